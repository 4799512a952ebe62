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
func Publish(ctx context.Context, js jetstream.JetStream, id, subject string, payload []byte) error {
	msg := &nats.Msg{Subject: subject, Data: payload, Header: nats.Header{}}
	if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("natsconsumer: publish %s to %s: %w", id, subject, err)
	}
	return nil
}
