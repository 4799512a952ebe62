package amqpconsumer

import (
	"context"
	"errors"

	retry "github.com/exactlyonce/retry"
)

// retryDo runs op as retry.Do does with the Conn's policy (see
// Conn.reopen), and returns op's own last error when the loop stopped on
// it, or ctx's error when ctx ended.
func retryDo(ctx context.Context, c *Conn, op func(ctx context.Context) error) error {
	err := retry.Do(ctx, op, c.reopen()...)
	var re *retry.Error
	if errors.As(err, &re) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if re.Last != nil {
			return re.Last
		}
	}
	return err
}
