package consumer

import (
	"bytes"
	"testing"
)

// A message stored with its execution reads back the same.
func TestInputRoundTrip(t *testing.T) {
	for _, m := range []*Message{
		{Key: "k", Subject: "orders.new", Body: []byte("2 chairs")},
		{Key: "k", Subject: "", Header: map[string][]string{"A": {"1", "2"}, "Nats-Msg-Id": {"k"}}, Body: nil},
		{Key: "k", Subject: "s", Header: map[string][]string{"": {""}}, Body: []byte{0, 1, 2, 0xff}},
	} {
		got, err := decodeInput(m.Key, encodeInput(m))
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if got.Subject != m.Subject || !bytes.Equal(got.Body, m.Body) || len(got.Header) != len(m.Header) {
			t.Errorf("got %+v, want %+v", got, m)
		}
		for k, vs := range m.Header {
			if len(got.Header[k]) != len(vs) {
				t.Errorf("header %q: got %q, want %q", k, got.Header[k], vs)
			}
		}
		if got.Delivery != 0 || got.Raw != nil {
			t.Errorf("a stored message has no delivery: %+v", got)
		}
	}
}

func TestDecodeInputRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {}, {2}, {inputVersion}, {inputVersion, 5, 'a'}, {inputVersion, 0, 9}} {
		if _, err := decodeInput("k", b); err != ErrBadInput {
			t.Errorf("%v: got %v, want ErrBadInput", b, err)
		}
	}
}

func FuzzDecodeInput(f *testing.F) {
	f.Add(encodeInput(&Message{Subject: "s", Header: map[string][]string{"a": {"b"}}, Body: []byte("x")}))
	f.Add([]byte{inputVersion, 0, 200, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeInput("k", b)
		if err != nil {
			return
		}
		again, err := decodeInput("k", encodeInput(m))
		if err != nil || again.Subject != m.Subject || !bytes.Equal(again.Body, m.Body) {
			t.Fatalf("%q decodes to %+v, which does not round-trip: %+v, %v", b, m, again, err)
		}
	})
}
