// Package drill holds what the consumers' stop drills share: the
// downstream dependency their handlers call, which fails and hangs on
// command, and the handler, which records its effect in the transaction
// its outcome commits in (pgstore). The drills themselves, one per broker
// adapter, live in the adapters' tests.
package drill

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

// Dependency is the drill handlers' downstream service, run by the test.
// Up, it answers 204. Down, it answers every other call 503 at once and
// holds the others until it is up again (then 503): a dependency that
// fails and one that hangs.
type Dependency struct {
	srv   *httptest.Server
	calls atomic.Int64

	mu   sync.Mutex
	down bool
	up   chan struct{} // closed when it comes up again
}

// NewDependency starts a Dependency, up, closed at the end of the test.
func NewDependency(t testing.TB) *Dependency {
	d := &Dependency{up: make(chan struct{})}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(func() {
		d.SetDown(false)
		d.srv.Close()
	})
	return d
}

// URL is the dependency's address.
func (d *Dependency) URL() string { return d.srv.URL }

func (d *Dependency) serve(w http.ResponseWriter, r *http.Request) {
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

// SetDown takes the dependency down, or brings it up again.
func (d *Dependency) SetDown(down bool) {
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

// ErrFlaky is the drill handler's injected transient failure.
var ErrFlaky = errors.New("transient failure (injected)")

// Handler is the drill's handler: it fails the first delivery of one
// message in FlakyEvery (so that its second, with the drill's delivery
// limit of 2, is the broker's last), calls the dependency at depURL
// through retry.Do on budget, then records its effect, a row of the
// schema's effects table, in the transaction its outcome commits in.
func Handler(schema, depURL string, budget *retry.Budget) consumer.Handler {
	client := &http.Client{}
	insert := "INSERT INTO " + pgx.Identifier{schema, "effects"}.Sanitize() + " (key) VALUES ($1)"
	return func(ctx context.Context, m *consumer.Message) error {
		if m.Delivery == 1 && Flaky(m.Key) {
			return ErrFlaky
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

// FlakyEvery: one message in FlakyEvery fails its first delivery.
const FlakyEvery = 5

// Flaky reports whether the drill handler fails key's first delivery.
func Flaky(key string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return h.Sum32()%FlakyEvery == 0
}
