// Package natsconsumer consumes NATS JetStream messages with exactly-once
// effect: a thin layer over idempotency.Runner (through package
// idempotency/consumer, whose documentation says what becomes of every
// delivery) on nats.go's jetstream package. It is a module of its own, so
// the NATS client never reaches users of the root module.
//
//	cons, _ := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{
//		Durable: "ship", AckPolicy: jetstream.AckExplicitPolicy,
//		AckWait: 10 * time.Second, // no MaxDeliver
//	})
//	c, _ := natsconsumer.New(cons, consumer.Config{Runner: runner, Handler: ship})
//	err := c.Run(ctx)
//
// # Keys
//
// A message's key is its Nats-Msg-Id header when the publisher set one
// (so a message published twice is one message even past the stream's
// duplicate window), else its stream and stream sequence ("ORDERS:42"),
// which every redelivery of it shares. Keys are scoped by the consumer's
// caller (consumer.Config.Caller, by default its Name, by default the
// stream and durable name): the consumers of a stream that do different
// things keep apart, the instances of one share.
//
// # Deliveries
//
// The consumer pulls (Fetch) only as many messages as it has room to
// handle, so none waits in a buffer while its AckWait runs, and none while
// a dependency is down. A delivery is acked after its outcome is stored;
// kept alive with InProgress every third of the consumer's AckWait while
// it is handled or held (so a short AckWait costs only those calls, and
// a consumer that dies leaves its messages for AckWait: 10 s as the quick
// start sets it, not JetStream's default 30 s); given back with NakWithDelay (the
// *idempotency.InProgressError's hint, or a full-jitter backoff over
// NumDelivered); terminated with Term when its execution is parked, when
// it is rejected, or when its id came with another body. JetStream has no
// dead-letter queue: a terminated message stays in the stream (unless its
// retention removes it) and a parked one in the store, with its reason and
// the message (consumer.Consumer.ListParked, RetryParked). The consumer
// parks a message whose delivery consumer.Config.MaxDeliveries failed:
// leave the JetStream consumer's MaxDeliver unset, for JetStream drops a
// message past it, also one whose last delivery a consumer took and died
// before its claim reached the store. A MaxDeliver kept all the same is
// respected: the delivery that reaches it is never given back, and the
// store owns it before its handler runs, so that the consumer's
// Reconciler finishes it if the consumer dies (see package
// idempotency/consumer).
//
// # Stopping
//
// A stopping consumer lets its pull request end (up to two seconds, three
// on a silent network, when nats.go's own timer ends it) and
// settles what it brings, rather than leaving it at the server, which
// would deliver messages to nobody at the cost of a delivery, the last one
// perhaps. It gives back the deliveries JetStream will make again, hands
// the last ones, with a MaxDeliver, to the store (acked once stored, for
// the next consumer's Reconciler), and waits up to
// consumer.Config.StopGrace for running handlers.
//
// # Reconnecting
//
// nats.go restores a lost connection itself (give nats.Connect
// nats.MaxReconnects(-1) for a consumer that must outlive any outage);
// meanwhile the consumer's pull requests fail and it tries again every
// quarter of a second. The deliveries whose acks were lost come again
// after AckWait, and the store replays those that completed. Give New
// WithConn(nc) and Stats().Reconnects counts nats.go's reconnects.
//
// # Outbox
//
// Publish sends a message with Nats-Msg-Id set to the outbox row's id and
// waits for the stream's ack, as a pgstore.Relay's Deliver:
//
//	relay := &pgstore.Relay{Store: store, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
//		return natsconsumer.Publish(ctx, js, m.ID, m.Topic, m.Payload)
//	}}
//
// A relay killed between publishing and marking the row sent publishes it
// again; the stream drops the repeat within its duplicate window (two
// minutes by default), and the consumer, keyed by the same id, acks any
// later one without running it.
package natsconsumer
