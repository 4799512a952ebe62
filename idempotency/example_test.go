package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/exactlyonce/retry/idempotency"
)

// A queue consumer: the message id is the key, so a redelivered message
// is not processed twice.
func ExampleRunner_Do() {
	runner := idempotency.NewRunner(idempotency.NewMemoryStore(nil))
	handle := func(ctx context.Context, msgID, body string) {
		res, err := runner.Do(ctx, idempotency.Request{Caller: "orders-queue", Key: msgID, Fingerprint: body},
			func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
				fmt.Println("processing", msgID)
				return []byte("shipped " + body), nil
			})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Printf("%s: %s (replayed: %v)\n", msgID, res.Response, res.Replayed)
	}
	ctx := context.Background()
	handle(ctx, "msg-1", "order 42")
	handle(ctx, "msg-1", "order 42") // redelivered
	handle(ctx, "msg-1", "order 43") // same id, other content
	// Output:
	// processing msg-1
	// msg-1: shipped order 42 (replayed: false)
	// msg-1: shipped order 42 (replayed: true)
	// error: idempotency: key reused with a different request
}

// A unit of work with an external call: the step gets a downstream key
// derived from (caller, key, step), and its result is kept, so a retry after a
// crash resumes after the last completed step.
func ExampleExecution_Step() {
	runner := idempotency.NewRunner(nil)
	charge := func(ctx context.Context, downstreamKey string) ([]byte, error) {
		// Call the payment provider with downstreamKey as its idempotency key.
		return []byte("ch_1"), nil
	}
	res, err := runner.Do(context.Background(), idempotency.Request{Caller: "shop", Key: "order-42"},
		func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
			id, err := e.Step(ctx, "charge", charge)
			if err != nil {
				return nil, err // the next retry resumes here
			}
			return append([]byte("paid with "), id...), nil
		})
	fmt.Println(string(res.Response), err)
	fmt.Println(idempotency.DownstreamKey("shop", "order-42", "charge"))
	// Output:
	// paid with ch_1 <nil>
	// 66eb29a0-e085-8d1f-8b55-359b2c323285
}

// HTTP middleware: a retried POST with the same Idempotency-Key gets the
// stored response instead of creating a second order.
func ExampleMiddleware() {
	orders := 0
	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) == 0 {
			// A rejection before execution began: not stored.
			http.Error(w, "empty order", http.StatusBadRequest)
			return
		}
		idempotency.MarkStarted(r.Context())
		orders++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d}`, orders)
	})
	caller := func(r *http.Request) (string, error) {
		user, _, ok := r.BasicAuth()
		if !ok {
			return "", errors.New("no credentials")
		}
		return user, nil
	}
	h := idempotency.Middleware(idempotency.NewRunner(nil), caller)(create)

	post := func(key, body string) {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
		r.SetBasicAuth("alice", "secret")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), strings.TrimSpace(w.Body.String()))
	}
	post(`"k-1"`, "")       // rejected, key freed
	post(`"k-1"`, "coffee") // corrected retry runs
	post(`"k-1"`, "coffee") // replayed
	post(`"k-1"`, "tea")    // same key, other request
	post("", "tea")         // no key
	// Output:
	// 400  empty order
	// 201  {"order":1}
	// 201 true {"order":1}
	// 422  {"type":"about:blank","title":"Unprocessable Entity","status":422,"detail":"This Idempotency-Key was used with a different request.","code":"idempotency_key_mismatch"}
	// 400  {"type":"about:blank","title":"Bad Request","status":400,"detail":"This request needs an Idempotency-Key header.","code":"idempotency_key_missing"}
}

// A queue consumer runs each message once, keyed by its id: a redelivered
// message gets the stored outcome instead of running again.
func ExampleRunner_Do_queueConsumer() {
	runner := idempotency.NewRunner(nil)
	handled := 0
	consume := func(msgID, body string) string {
		res, err := runner.Do(context.Background(), idempotency.Request{Caller: "orders-queue", Key: msgID},
			func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
				handled++
				return []byte("shipped " + body), nil
			})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%s (replayed: %t)", res.Response, res.Replayed)
	}
	fmt.Println(consume("msg-1", "order 42"))
	fmt.Println(consume("msg-1", "order 42")) // the broker delivered it again
	fmt.Println("handled", handled, "time")
	// Output:
	// shipped order 42 (replayed: false)
	// shipped order 42 (replayed: true)
	// handled 1 time
}

// A Reconciler finishes an execution that began and failed (or whose
// process died) when nobody retries it: here a receipt email, resumed with
// the work registered under its Request.Work and the Input saved with it.
// Production code runs StartReconciler beside the Sweeper; the example
// makes one pass on a mock clock.
func ExampleRunner_Reconcile() {
	mock := clock.NewMock()
	runner := idempotency.NewRunner(idempotency.NewMemoryStore(mock), idempotency.WithClock(mock))
	runner.Register("receipt", func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		fmt.Printf("send the receipt for %s\n", e.Input())
		return []byte("sent"), nil
	})
	req := idempotency.Request{Caller: "shop", Key: "order-1", Work: "receipt", Input: []byte("order 1")}
	_, err := runner.Do(context.Background(), req, func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		e.MarkStarted()
		return nil, errors.New("the mail server is down")
	})
	fmt.Println(err)

	mock.Add(time.Second) // the failed execution's lease has run out
	n, _ := runner.Reconcile(context.Background(), idempotency.ReconcilerConfig{
		Logger: slog.New(slog.DiscardHandler),
	})
	fmt.Println("resumed", n)

	res, _ := runner.Do(context.Background(), req, nil) // the client, if it ever comes back
	fmt.Printf("%s (replayed: %v)\n", res.Response, res.Replayed)
	// Output:
	// the mail server is down
	// send the receipt for order 1
	// resumed 1
	// sent (replayed: true)
}

// A Runner on a BatchStore does the durable work of many requests at
// once: StartBatch claims all their keys in one store operation, each Do
// runs one request's work, and Commit stores their outcomes in one
// commit. A queue consumer does this for the messages of one fetch.
func ExampleRunner_StartBatch() {
	ctx := context.Background()
	runner := idempotency.NewRunner(idempotency.NewMemoryBatchStore(nil))
	reqs := []idempotency.Request{
		{Caller: "orders", Key: "order-1", Fingerprint: "v1:a"},
		{Caller: "orders", Key: "order-2", Fingerprint: "v1:b"},
	}
	batch, err := runner.StartBatch(ctx, reqs)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer batch.Close(ctx)
	for i := range reqs {
		// Concurrently in a consumer; a nil error here means the outcome
		// waits for Commit.
		_, err := batch.Do(ctx, i, func(context.Context, *idempotency.Execution) ([]byte, error) {
			return []byte("shipped " + reqs[i].Key), nil
		})
		fmt.Println(reqs[i].Key, "ran:", err)
	}
	for i, err := range batch.Commit(ctx) {
		fmt.Println(reqs[i].Key, "stored:", err)
	}
	res, _ := runner.Do(ctx, reqs[0], nil)
	fmt.Println("again:", string(res.Response), res.Replayed)
	// Unordered output:
	// order-1 ran: <nil>
	// order-2 ran: <nil>
	// order-1 stored: <nil>
	// order-2 stored: <nil>
	// again: shipped order-1 true
}
