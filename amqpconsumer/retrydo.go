package amqpconsumer

import (
	"context"
	"errors"
	"fmt"

	retry "github.com/exactlyonce/retry"
)

// retryDo runs op as retry.Do does with the Conn's policy (see
// Conn.reopen), and returns op's own last error when the loop stopped on
// it, or, when ctx ended, ctx's error wrapped with op's last one (why
// the operation had not succeeded yet).
func retryDo(ctx context.Context, c *Conn, op func(ctx context.Context) error) error {
	err := retry.Do(ctx, op, c.reopen()...)
	var re *retry.Error
	if errors.As(err, &re) {
		if cerr := ctx.Err(); cerr != nil {
			switch {
			case re.Last == nil:
				return cerr
			case errors.Is(re.Last, cerr):
				return re.Last
			default:
				return fmt.Errorf("%w: %w", re.Last, cerr)
			}
		}
		if re.Last != nil {
			return re.Last
		}
	}
	return err
}
