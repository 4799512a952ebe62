package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// An order service: the idempotency middleware over a PostgreSQL store, a
// handler whose own writes and follow-on message commit with the stored
// response, a relay delivering the messages, and a sweeper. A retry of the
// same request gets the stored response, and the order is written once.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn()) // for example os.Getenv("DATABASE_URL")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	schema := freshSchema("exactlyonce_example") // for example "exactlyonce"
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	if err := pgstore.Migrate(ctx, pool, schema); err != nil {
		log.Fatal(err)
	}
	_, _ = pool.Exec(ctx, "CREATE TABLE "+schema+".orders (id bigserial PRIMARY KEY, sku text NOT NULL)")
	store, err := pgstore.New(pool, pgstore.WithSchema(schema))
	if err != nil {
		log.Fatal(err)
	}

	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		idempotency.MarkStarted(ctx)
		tx, _ := pgstore.TxFrom(ctx) // committed with the stored response
		var id int64
		if err := tx.QueryRow(ctx, "INSERT INTO "+schema+".orders (sku) VALUES ('book') RETURNING id").Scan(&id); err != nil {
			http.Error(w, "cannot store the order", http.StatusInternalServerError)
			return
		}
		if _, err := store.Enqueue(ctx, tx, "order.created", fmt.Appendf(nil, `{"id":%d}`, id)); err != nil {
			http.Error(w, "cannot queue the event", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, id)
	})
	runner := idempotency.NewRunner(store)
	caller := func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil }
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotency.Middleware(runner, caller)(createOrder))
	server := httptest.NewServer(mux) // or http.ListenAndServe
	defer server.Close()

	// Expired keys and old delivered messages go in the background.
	sweeper := &pgstore.Sweeper{Store: store, Interval: 10 * time.Minute, OutboxRetention: 7 * 24 * time.Hour}
	sweepCtx, stopSweeper := context.WithCancel(ctx)
	defer stopSweeper()
	go func() { _ = sweeper.Run(sweepCtx) }()

	for range 2 { // the request and its retry
		req, _ := http.NewRequest("POST", server.URL+"/orders", strings.NewReader("sku=book"))
		req.Header.Set("X-Tenant", "shop-1")
		req.Header.Set("Idempotency-Key", `"order-7"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}

	// Deliver follow-on messages at least once; the id is stable, so a
	// consumer deduplicates with key = message id (see Relay).
	relay := &pgstore.Relay{Store: store, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		fmt.Println("publish", m.Topic, string(m.Payload))
		return nil
	}}
	if _, err := relay.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 201 {"id":1} replayed: false
	// 201 {"id":1} replayed: true
	// publish order.created {"id":1}
}

// A consumer of outbox messages runs each message once, with the message id
// as its idempotency key, however often the relay delivers it.
func ExampleRelay_consumer() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	schema := freshSchema("exactlyonce_example_relay")
	defer pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	if err := pgstore.Migrate(ctx, pool, schema); err != nil {
		log.Fatal(err)
	}
	store, _ := pgstore.New(pool, pgstore.WithSchema(schema))
	if _, err := store.Enqueue(ctx, pool, "order.created", []byte(`{"id":1}`)); err != nil {
		log.Fatal(err)
	}

	consumer := idempotency.NewRunner(idempotency.NewMemoryStore(nil))
	deliver := func(ctx context.Context, m pgstore.OutboxMessage) error {
		res, err := consumer.Do(ctx, idempotency.Request{Caller: m.Topic, Key: m.ID},
			func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
				fmt.Printf("send the confirmation email for %s\n", m.Payload)
				return []byte("sent"), nil
			})
		if err == nil && res.Replayed {
			fmt.Println("a repeat delivery: already sent")
		}
		return err
	}
	relay := &pgstore.Relay{Store: store, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		_ = deliver(ctx, m)    // a delivery whose acknowledgement is lost...
		return deliver(ctx, m) // ...is delivered again
	}}
	if _, err := relay.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// send the confirmation email for {"id":1}
	// a repeat delivery: already sent
}
