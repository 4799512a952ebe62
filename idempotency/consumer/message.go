package consumer

import (
	"context"
	"encoding/binary"
	"errors"
	"time"
)

// Message is one message as a Handler sees it.
type Message struct {
	// Key is the message's idempotency key within the consumer's caller:
	// its id, as the broker adapter takes it.
	Key string
	// Subject is where the message was published: a JetStream subject, a
	// RabbitMQ routing key.
	Subject string
	// Header holds the message's headers (nil when it has none).
	Header map[string][]string
	// Body is the message's payload.
	Body []byte
	// Delivery counts the broker's deliveries of the message: 1 the first
	// time. It is 0 when the message runs again from the store, without a
	// broker delivery (RetryParked, a Reconciler).
	Delivery int
	// Published is when the broker took the message, where it says
	// (JetStream: the stream's timestamp; RabbitMQ: the timestamp
	// property, if the publisher set it); zero otherwise, and when the
	// message runs again from the store.
	Published time.Time
	// Raw is the broker client's own message (see the adapter), or nil
	// when the message runs again from the store.
	Raw any
}

// Handler processes one message inside idempotency.Runner.Do: ctx carries
// the Execution (idempotency.FromContext, for steps) and, with a TxStore,
// the transaction in which local writes commit with the outcome
// (pgstore.TxFrom). Like a Work, its context does not end when the
// consumer stops; it ends when the execution's lease runs out, which the
// consumer renews while the handler runs. See the package documentation
// for what its error decides: nil is done; retry.Permanent or
// idempotency.Park parks the message; idempotency.Reject terminates it;
// an error matching retry.ErrDependencyDown holds it; any other error
// has it redelivered after a backoff.
type Handler func(ctx context.Context, m *Message) error

// inputVersion is the first byte of a message stored with its execution.
const inputVersion = 1

// ErrBadInput is matched by the error of a stored message that cannot be
// read back (RetryParked, a Reconciler): a record written by something
// other than this package.
var ErrBadInput = errors.New("consumer: malformed stored message")

// encodeInput encodes what running m again needs (Request.Input): a
// version byte, the subject, the number of header values, each name and
// value, every string preceded by its length as a uvarint, then the body.
func encodeInput(m *Message) []byte {
	n := 1 + binary.MaxVarintLen64*2 + len(m.Subject) + len(m.Body)
	count := 0
	for name, values := range m.Header {
		count += len(values)
		for _, v := range values {
			n += 2*binary.MaxVarintLen64 + len(name) + len(v)
		}
	}
	b := make([]byte, 0, n)
	b = append(b, inputVersion)
	b = appendString(b, m.Subject)
	b = binary.AppendUvarint(b, uint64(count))
	for name, values := range m.Header {
		for _, v := range values {
			b = appendString(appendString(b, name), v)
		}
	}
	return append(b, m.Body...)
}

// decodeInput is the inverse of encodeInput; the Key is the record's.
func decodeInput(key string, b []byte) (*Message, error) {
	if len(b) == 0 || b[0] != inputVersion {
		return nil, ErrBadInput
	}
	subject, rest, ok := cutString(b[1:])
	if !ok {
		return nil, ErrBadInput
	}
	count, k := binary.Uvarint(rest)
	if k <= 0 || count > uint64(len(rest)) {
		return nil, ErrBadInput
	}
	rest = rest[k:]
	m := &Message{Key: key, Subject: subject}
	for range count {
		var name, value string
		if name, rest, ok = cutString(rest); !ok {
			return nil, ErrBadInput
		}
		if value, rest, ok = cutString(rest); !ok {
			return nil, ErrBadInput
		}
		if m.Header == nil {
			m.Header = make(map[string][]string)
		}
		m.Header[name] = append(m.Header[name], value)
	}
	m.Body = append([]byte{}, rest...)
	return m, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// cutString splits a uvarint-length-prefixed string off b.
func cutString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}
