package opsui_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/opsui"
)

// Mount the page beside the service's API; here a parked execution shows
// in its JSON twin.
func ExampleNew() {
	runner := idempotency.NewRunner(idempotency.NewMemoryStore(nil))
	_, _ = runner.Do(context.Background(), idempotency.Request{Caller: "shop", Key: "order-7"},
		func(context.Context, *idempotency.Execution) ([]byte, error) {
			return nil, idempotency.Park(errors.New("the ledger refused it"))
		})

	mux := http.NewServeMux()
	mux.Handle(opsui.DefaultPath+"/", opsui.New(opsui.Config{
		Runner: runner,
		// Who may look, and who may act: here everyone may look, nobody act.
		Authorize: func(r *http.Request, a opsui.Action) error {
			if a != opsui.ActionView {
				return errors.New("read-only")
			}
			return nil
		},
	}))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, opsui.DefaultPath+"/executions?state=parked&format=json", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 application/json
}
