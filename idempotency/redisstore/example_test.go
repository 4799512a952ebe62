package redisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/redis/go-redis/v9"
)

// A queue consumer on Redis: a message delivered twice is charged once, and
// its second delivery gets the stored outcome.
func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr()}) // for example os.Getenv("REDIS_ADDR")
	defer rdb.Close()
	prefix := "example_" + randomHex(12) // a prefix of the example's own
	store, err := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	if err != nil {
		log.Fatal(err)
	}
	defer cleanExample(rdb, prefix)

	runner := idempotency.NewRunner(store)
	charges := 0
	handle := func(messageID string) {
		res, err := runner.Do(ctx, idempotency.Request{Caller: "billing", Key: messageID},
			func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
				charges++
				return []byte("charged 100"), nil
			})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s (replayed: %v)\n", messageID, res.Response, res.Replayed)
	}
	handle("msg-1")
	handle("msg-1") // redelivered
	fmt.Println("charges:", charges)
	// Output:
	// msg-1: charged 100 (replayed: false)
	// msg-1: charged 100 (replayed: true)
	// charges: 1
}

// cleanExample deletes the example's keys.
func cleanExample(rdb *redis.Client, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
