package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

// A backoff is given to retry.WithBackoff; this one waits 10 ms before the
// first retry, then 20 ms, then 40 ms, whatever the random draw.
func Example() {
	doubling := backoff.Func(func(n int, _ time.Duration, _ float64) time.Duration {
		return 10 * time.Millisecond << (n - 1)
	})
	calls := 0
	err := retry.Do(context.Background(), func(context.Context) error {
		calls++
		return errors.New("unavailable")
	}, retry.WithBackoff(doubling))
	fmt.Println(calls, errors.Is(err, retry.ErrAttemptsExhausted))
	fmt.Println(backoff.FullJitter(100*time.Millisecond, 10*time.Second).Delay(3, 0, 0.5))
	// Output:
	// 4 true
	// 200ms
}
