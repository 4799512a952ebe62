package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

func ExampleDo() {
	calls := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("temporarily unavailable")
		}
		return nil
	}, retry.WithBackoff(backoff.Constant(time.Millisecond)))
	fmt.Println(calls, err)
	// Output: 3 <nil>
}

func ExampleDoValue() {
	attempt := 0
	balance, err := retry.DoValue(context.Background(), func(ctx context.Context) (int, error) {
		attempt++
		if attempt == 1 {
			return 0, errors.New("connection reset")
		}
		return 42, nil
	}, retry.WithBackoff(backoff.Constant(time.Millisecond)))
	fmt.Println(balance, err)
	// Output: 42 <nil>
}

func ExampleError() {
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		return errors.New("still down")
	}, retry.WithMaxAttempts(3), retry.WithBackoff(backoff.Constant(time.Millisecond)))

	var re *retry.Error
	if errors.As(err, &re) {
		fmt.Println("attempts:", re.Attempts)
		fmt.Println("gave up because attempts ran out:", errors.Is(err, retry.ErrAttemptsExhausted))
		fmt.Println("last error:", re.Last)
	}
	// Output:
	// attempts: 3
	// gave up because attempts ran out: true
	// last error: still down
}

func ExamplePermanent() {
	calls := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		calls++
		return retry.Permanent(errors.New("card declined"))
	})
	fmt.Println(calls, errors.Is(err, retry.ErrPermanent), err)
	// Output: 1 true retry: permanent error after 1 attempts: card declined
}

func ExampleWithTotalTimeout() {
	start := time.Now()
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		return errors.New("unavailable")
	}, retry.WithTotalTimeout(300*time.Millisecond), retry.WithBackoff(backoff.Constant(time.Second)))
	// The next wait would end past the deadline, so Do returns at once.
	fmt.Println(errors.Is(err, retry.ErrDeadline), time.Since(start) < 300*time.Millisecond)
	// Output: true true
}
