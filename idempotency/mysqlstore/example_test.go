package mysqlstore_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/go-sql-driver/mysql"
)

// An order service on MySQL: the handler's order row commits with the
// stored response; a retry of the same request gets that response and the
// order is written once.
func Example() {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(dsn()) // for example os.Getenv("MYSQL_DSN")
	if err != nil {
		log.Fatal(err)
	}
	prefix := "example_" + randomHex(12) + "_" // tables of the example's own
	store, err := mysqlstore.Open(cfg, mysqlstore.WithTablePrefix(prefix))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	db := store.DB()
	for _, table := range []string{"idempotency_keys", "idempotency_generations", "orders"} {
		defer db.ExecContext(ctx, "DROP TABLE IF EXISTS "+prefix+table)
	}
	if err := mysqlstore.Migrate(ctx, db, prefix); err != nil {
		log.Fatal(err)
	}
	_, _ = db.ExecContext(ctx, "CREATE TABLE "+prefix+"orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku VARCHAR(40) NOT NULL)")

	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		idempotency.MarkStarted(ctx)
		tx, _ := mysqlstore.TxFrom(ctx) // committed with the stored response
		res, err := tx.ExecContext(ctx, "INSERT INTO "+prefix+"orders (sku) VALUES ('book')")
		if err != nil {
			http.Error(w, "cannot store the order", http.StatusInternalServerError)
			return
		}
		id, _ := res.LastInsertId()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, id)
	})
	runner := idempotency.NewRunner(store)
	srv := httptest.NewServer(idempotency.Middleware(runner, idempotency.SingleTenant)(createOrder))
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"sku":"book"}`))
		req.Header.Set("Idempotency-Key", "order-7")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Println(res.StatusCode, string(body), "replayed:", res.Header.Get("Idempotent-Replayed") == "true")
	}
	var orders int
	_ = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+prefix+"orders").Scan(&orders)
	fmt.Println("orders:", orders)
	// Output:
	// 201 {"id":1} replayed: false
	// 201 {"id":1} replayed: true
	// orders: 1
}
