package amqpconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/idempotency/pgstore"
)

// dependency is the drill handlers' downstream service, run by the test.
// Up, it answers 204. Down, it answers every other call 503 at once and
// holds the others until it is up again (then 503): a dependency that
// fails and one that hangs.
type dependency struct {
	srv   *httptest.Server
	calls atomic.Int64

	mu   sync.Mutex
	down bool
	up   chan struct{} // closed when it comes up again
}

// newDependency starts a dependency, up, closed at the end of the test.
func newDependency(t *testing.T) *dependency {
	d := &dependency{up: make(chan struct{})}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(func() {
		d.setDown(false)
		d.srv.Close()
	})
	return d
}

func (d *dependency) serve(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	down, up := d.down, d.up
	d.mu.Unlock()
	if !down {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if d.calls.Add(1)%2 == 0 {
		select {
		case <-up:
		case <-r.Context().Done():
			return
		}
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}

// setDown takes the dependency down, or brings it up again.
func (d *dependency) setDown(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down == down {
		return
	}
	d.down = down
	if down {
		d.up = make(chan struct{})
	} else {
		close(d.up)
	}
}

// errDrillFlaky is the drill handler's injected transient failure.
var errDrillFlaky = errors.New("transient failure (injected)")

// drillHandler is the drill's handler: it fails the first delivery of
// one message in drillFlakyEvery (so that its second, with the drill's
// limit, is the broker's last), calls the dependency at depURL through
// retry.Do on budget, then records its effect, a row of the schema's
// effects table, in the transaction its outcome commits in.
func drillHandler(schema, depURL string, budget *retry.Budget) consumer.Handler {
	client := &http.Client{}
	insert := "INSERT INTO " + pgx.Identifier{schema, "effects"}.Sanitize() + " (key) VALUES ($1)"
	return func(ctx context.Context, m *consumer.Message) error {
		if m.Delivery == 1 && flaky(m.Key) {
			return errDrillFlaky
		}
		err := retry.Do(ctx, func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, depURL+"?key="+url.QueryEscape(m.Key), nil)
			if err != nil {
				return retry.Permanent(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				return fmt.Errorf("dependency: %s", resp.Status)
			}
			return nil
		}, retry.WithBudget(budget))
		if err != nil {
			return err
		}
		tx, ok := pgstore.TxFrom(ctx)
		if !ok {
			return retry.Permanent(errors.New("the handler has no transaction"))
		}
		_, err = tx.Exec(ctx, insert, m.Key)
		return err
	}
}

// drillFlakyEvery: one message in drillFlakyEvery fails its first delivery.
const drillFlakyEvery = 5

// flaky reports whether the drill handler fails key's first delivery.
func flaky(key string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return h.Sum32()%drillFlakyEvery == 0
}
