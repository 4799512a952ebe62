package amqpconsumer

import (
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
)

// amqp091-go's own errors (a failed read or write: 501, Server false) are
// losses, worth another attempt; the broker's 501 and its refusals are
// not. Only a refusal of the login or the vhost ends the dials.
func TestClassifyAMQPErrors(t *testing.T) {
	for _, tc := range []struct {
		name          string
		err           error
		lost, refused bool
	}{
		{"read failed", &amqp.Error{Code: amqp.FrameError, Reason: "EOF"}, true, false},
		{"closed", amqp.ErrClosed, true, false},
		{"the broker's frame error", &amqp.Error{Code: amqp.FrameError, Server: true}, false, false},
		{"no exchange", &amqp.Error{Code: amqp.NotFound, Server: true}, false, false},
		{"connection forced", &amqp.Error{Code: amqp.ConnectionForced, Server: true}, true, false},
		{"credentials", amqp.ErrCredentials, true, true},
		{"vhost", fmt.Errorf("dial: %w", &amqp.Error{Code: amqp.NotAllowed, Server: true}), false, true},
		{"vhost, socket closed", amqp.ErrVhost, true, true},
	} {
		assert.Equal(t, tc.lost, connectionLost(tc.err), "%s: lost", tc.name)
		assert.Equal(t, tc.refused, dialRefused(tc.err), "%s: dial refused", tc.name)
	}
}
