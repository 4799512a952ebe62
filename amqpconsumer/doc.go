// Package amqpconsumer consumes RabbitMQ messages with exactly-once
// effect: a thin layer over idempotency.Runner (through package
// idempotency/consumer, whose documentation says what becomes of every
// delivery) on github.com/rabbitmq/amqp091-go. It is a module of its own,
// so the AMQP client never reaches users of the root module.
//
//	conn, _ := amqpconsumer.Dial(url, amqpconsumer.WithSetup(declareQueues))
//	c, _ := conn.NewConsumer("orders", consumer.Config{Runner: runner, Handler: ship})
//	err := c.Run(ctx)
//
// # Keys
//
// A message's key is its message_id property; WithKey gives a function
// for publishers that key messages otherwise (a header, a field of the
// body). A message with neither is never run without a key: the consumer
// stops at once with an error matching consumer.ErrNoKey and gives the
// message back, rather than risk running it twice. Keys are scoped by the
// consumer's caller (consumer.Config.Caller, by default its Name, by
// default the queue's name).
//
// # Deliveries
//
// The consumer's channel has a prefetch of consumer.Config.MaxInFlight,
// so the broker sends no more than the consumer handles, and none while a
// dependency is down and its deliveries are held. A delivery is acked
// after its outcome is stored. AMQP 0-9-1 cannot delay a redelivery: a
// message given back later (another execution holds its key, or its
// handler failed transiently) is held for the delay, then rejected with
// requeue. A message whose execution is parked, that is rejected, or whose
// id came with another body is rejected without requeue, which
// dead-letters it when the queue has a dead-letter exchange
// (x-dead-letter-exchange) and drops it otherwise; a parked one is kept in
// the store in any case, with its reason and the message
// (consumer.Consumer.ListParked, RetryParked).
//
// Quorum queues count deliveries (x-delivery-count), and the consumer
// parks a message whose delivery consumer.Config.MaxDeliveries failed.
// Give the queue no delivery limit of its own: none before RabbitMQ 4.0,
// x-delivery-limit -1 from 4.0, whose default is 20. A queue's limit
// dead-letters a message whose last delivery a consumer took and died
// before its claim reached the store, and a stopping consumer's channel
// close returns its undelivered prefetch at the cost of a delivery each,
// dead-lettering those on their last one. A limit kept all the same: with
// a limit of n, a message is delivered up to n+1 times; tell the consumer
// with WithDeliveryLimit, and it never gives back that last delivery but
// runs it again itself or parks it. Classic queues count nothing: each
// redelivery is counted as the second, so MaxDeliveries above 2 never
// parks a message there.
//
// # Stopping
//
// When Run's context ends, the consumer stops as package
// idempotency/consumer says: it fetches no more, gives back the
// deliveries the queue will make again and waits up to
// consumer.Config.StopGrace for running handlers; on a queue with a
// delivery limit, it hands the last ones to the store (acked once
// stored), for the next consumer's Reconciler. On a queue without a limit
// nothing more happens. With one, it stays subscribed meanwhile, and
// then takes what the queue still sends it, for a quorum queue returns
// the messages it has assigned to a consumer and not yet delivered when
// the consumer's channel closes, counting a delivery for each: one on
// its last delivery would be dead-lettered unseen. The last deliveries
// among them it hands to the store, the others it keeps unacked,
// settling none (which would free room for more), until its prefetch is
// full, nothing came for a quarter of a second, or the grace period
// ended; then it closes its channel, which gives them back: a handed-over
// one is then dead-lettered as well, a copy of a message the store owns
// and finishes. A queue without a limit has none of this.
//
// # Reconnecting
//
// amqp091-go does not reconnect; a Conn does. When its connection is
// lost, the first of its users to need it dials again, through retry.Do
// with full-jitter backoff (WithRedialBackoff), until the broker answers
// or the Conn is closed: one dial at a time, the others waiting for its
// outcome. A Conn's consumer (Conn.NewConsumer) then opens a channel, runs
// the caller's setup on it (WithSetup: exchanges, queues, bindings, as
// declared before), sets the prefetch and consumes again, and counts it
// (Stats().Reconnects); the broker's refusal (the queue is gone, access
// refused) ends Run instead. The deliveries of the lost channel that were
// not acked are requeued by the broker and come again, to a consumer whose
// store finds them completed (acked without running: their ack was lost),
// in progress (their handler still runs here; redelivered later) or
// abandoned (run again, resuming after the last completed step). A Conn's
// publisher (Conn.NewPublisher) publishes again, on a new channel, a
// message whose channel was lost before the broker confirmed it, or that
// the broker nacked (Publisher.Resent), with the same message_id, so that
// a second copy the
// broker may keep is acked by the consumer without running. A Consumer
// made by New, on a connection of the caller's, does not reconnect: Run
// returns when its channel closes; make a new Consumer of the same name on
// a new connection, on the same Runner.
//
// What a Conn's users see of each fault:
//
//   - The network goes silent (the connection open, every byte dropped): a
//     stopping consumer's Run returns within its StopGrace (its channel's
//     close waits for the rest of the grace, 250 ms at least, then the
//     connection is closed hard, not left to the heartbeat); Close waits
//     a second for the broker's answer, then closes the socket.
//   - The address accepts TCP and never speaks AMQP: Close (and the end
//     of the Conn's life) cuts the dial, its handshake included.
//   - The broker refuses the login or the vhost (403 ACCESS_REFUSED, 530
//     NOT_ALLOWED): the Conn does not dial again; Run and Publish return
//     an error matching ErrRefused and wrapping the *amqp.Error, after one
//     dial.
//   - The broker refuses a publish by closing its channel (404 no such
//     exchange, 403, 406 a message over the size limit): Publish returns
//     at once an error matching ErrRefused, with the broker's reason, and
//     sends nothing again; a lost connection is still ridden through.
//   - The broker stays unreachable: Run and Publish wait; a Publish whose
//     context ends says why ("broker unreachable since T (n failed dials):
//     dial tcp ...: connection refused: context deadline exceeded"),
//     matching the context's error.
//
// # Keeping a delivery
//
// RabbitMQ has no way to extend one delivery, as JetStream's InProgress
// does: an unacked delivery stays with its consumer as long as the
// channel lives, up to the broker's consumer timeout (consumer_timeout,
// 30 minutes by default; per queue with x-consumer-timeout from RabbitMQ
// 3.12), after which the broker closes the channel and requeues
// everything unacked on it. So the consumer keeps the connection alive
// (amqp091-go's heartbeats) and the execution's lease in the store
// (idempotency.Execution.Extend) while a handler runs; a handler, with
// the holds of its delivery, must end within the consumer timeout. If the
// channel closes, a Conn's consumer consumes again and a New one's Run
// returns (see Reconnecting); the requeued deliveries come back to a
// consumer, whose store finds them completed (acked without running), in
// progress (redelivered later) or abandoned (run again, resuming after
// the last completed step).
//
// # Outbox
//
// A Publisher publishes with publisher confirms: Publish returns once the
// broker has taken the message (persistent, with message_id set to the
// outbox row's id), as a pgstore.Relay's Deliver. A relay killed between
// publishing and marking the row sent publishes it again; RabbitMQ keeps
// both copies, and the consumer, keyed by the id, acks the second without
// running it.
package amqpconsumer
