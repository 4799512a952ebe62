package natsconsumer

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publish publishes payload to subject with its Nats-Msg-Id header set to
// id, and waits for the stream's ack (or ctx's end): a nil error means a
// stream stored it, or had stored it before under the same id within its
// duplicate window. It is the Deliver of an outbox relay: the row's id is
// the message's id, the same on every publish, and the consumer's key.
// A subject no stream listens on fails within half a second
// (jetstream.ErrNoStreamResponse, after nats.go's two retries for a stream
// electing its leader); a lost or silent connection fails when ctx ends,
// with an error that says so and matches ctx's.
func Publish(ctx context.Context, js jetstream.JetStream, id, subject string, payload []byte) error {
	msg := &nats.Msg{Subject: subject, Data: payload, Header: nats.Header{}}
	if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("natsconsumer: publish %s to %s: no ack from a stream before the context ended (the connection is %s; a silent network or server shows as connected until its pings fail): %w",
				id, subject, js.Conn().Status(), err)
		}
		return fmt.Errorf("natsconsumer: publish %s to %s: %w", id, subject, err)
	}
	return nil
}
