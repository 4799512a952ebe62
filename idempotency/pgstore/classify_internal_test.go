package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/exactlyonce/retry"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestClassify(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("pgstore: claim: %w", &pgconn.PgError{Code: code}) }
	for _, tc := range []struct {
		err       error
		permanent bool
	}{
		{pg("54000"), true},  // index row size exceeds the maximum
		{pg("22021"), true},  // invalid byte sequence for the encoding
		{pg("22001"), true},  // value too long
		{pg("23505"), true},  // unique violation
		{pg("42P01"), true},  // undefined table: never migrated
		{pg("42883"), true},  // undefined function
		{pg("28P01"), true},  // password authentication failed
		{pg("3D000"), true},  // database does not exist
		{pg("XX001"), true},  // data corrupted
		{pg("40001"), false}, // serialization failure
		{pg("40P01"), false}, // deadlock
		{pg("08006"), false}, // connection failure
		{pg("53300"), false}, // too many connections
		{pg("57014"), false}, // statement timeout
		{pg("57P01"), false}, // admin shutdown
		{pg("55P03"), false}, // lock not available
		{pg("25006"), false}, // read-only transaction (a standby)
		// An aborted transaction refuses statements for an earlier
		// failure: a batch member after the batch's connection was reset.
		{pg("25P02"), false},
		{fmt.Errorf("%w (the batch's transaction failed: %w)", errAborted, io.ErrUnexpectedEOF), false},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
		{context.DeadlineExceeded, false},
		{context.Canceled, false},
		{io.ErrUnexpectedEOF, false},
	} {
		err := classify(tc.err)
		// As the Middleware judges it: retry.IsPermanent, a cancelled
		// context excepted (the caller went away).
		if got := retry.IsPermanent(err) && !errors.Is(err, context.Canceled); got != tc.permanent {
			t.Errorf("classify(%v): permanent = %v, want %v", tc.err, got, tc.permanent)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("classify(%v) lost the error: %v", tc.err, err)
		}
	}
	if classify(nil) != nil {
		t.Error("classify(nil) != nil")
	}
}
