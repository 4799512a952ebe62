package natsconsumer_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// A JetStream consumer that ships each order once: the publisher's
// repeat of order-1 (its first ack was lost, say) carries the same
// Nats-Msg-Id, so the stream drops it, and a repeat past the stream's
// duplicate window would be acked by the consumer without running.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := nats.Connect(natstest.URL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream := natstest.UniqueName("EXAMPLE")
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"},
		Storage: jetstream.MemoryStorage})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer js.DeleteStream(context.Background(), stream)
	for _, id := range []string{"order-1", "order-2", "order-1"} {
		_ = natsconsumer.Publish(ctx, js, id, stream+".orders", []byte("2 chairs"))
	}

	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: "ship", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	shipped := make(chan string, 3)
	c, err := natsconsumer.New(cons, consumer.Config{
		Runner: idempotency.NewRunner(nil),
		Handler: func(ctx context.Context, m *consumer.Message) error {
			shipped <- m.Key
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	got := []string{<-shipped, <-shipped}
	slices.Sort(got)
	stop()
	<-done
	fmt.Println("shipped", got)
	fmt.Printf("%+v\n", c.Stats())
	// Output:
	// shipped [order-1 order-2]
	// {Executed:2 Duplicates:0 InProgress:0 Retried:0 Held:0 Parked:0 HandedOver:0 Terminated:0 Outages:0 Reconnects:0}
}
