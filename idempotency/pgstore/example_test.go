package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// An order service: the idempotency middleware over a PostgreSQL store, a
// handler whose own writes and follow-on message commit with the stored
// response, a relay delivering the messages, and a sweeper. (It needs a
// database, so it is compiled but not run.)
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool, "exactlyonce"); err != nil {
		log.Fatal(err)
	}
	store, err := pgstore.New(pool, pgstore.WithSchema("exactlyonce"))
	if err != nil {
		log.Fatal(err)
	}

	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		idempotency.MarkStarted(ctx)
		tx, _ := pgstore.TxFrom(ctx) // committed with the stored response
		var id int64
		if err := tx.QueryRow(ctx, "INSERT INTO orders (sku) VALUES ('book') RETURNING id").Scan(&id); err != nil {
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
	http.Handle("POST /orders", idempotency.Middleware(runner, caller)(createOrder))

	// Deliver follow-on messages at least once; the id is stable, so the
	// consumer deduplicates with key = message id.
	relay := &pgstore.Relay{Store: store, Deliver: func(ctx context.Context, m pgstore.Message) error {
		log.Printf("publish %s %s %s", m.ID, m.Topic, m.Payload)
		return nil
	}}
	go func() { _ = relay.Run(ctx) }()
	sweeper := &pgstore.Sweeper{Store: store, Interval: 10 * time.Minute, OutboxRetention: 7 * 24 * time.Hour}
	go func() { _ = sweeper.Run(ctx) }()

	log.Fatal(http.ListenAndServe("127.0.0.1:8080", nil))
}

// A consumer of outbox messages runs each message once, with the message id
// as its idempotency key, however often the relay delivers it.
func ExampleRelay_consumer() {
	ctx := context.Background()
	var store *pgstore.Store // as in the package example
	consumer := idempotency.NewRunner(idempotency.NewMemoryStore(nil))
	relay := &pgstore.Relay{Store: store, Deliver: func(ctx context.Context, m pgstore.Message) error {
		_, err := consumer.Do(ctx, idempotency.Request{Caller: m.Topic, Key: m.ID},
			func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
				log.Printf("send the confirmation email for %s", m.Payload)
				return nil, nil
			})
		return err
	}}
	_, _ = relay.RunOnce(ctx)
}
