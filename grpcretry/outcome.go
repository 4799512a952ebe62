package grpcretry

import (
	"encoding/binary"
	"errors"
	"slices"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// outcomeVersion is the first byte of a stored outcome. Version 1, which
// stored no type name with the reply, is still read.
const (
	outcomeVersion   = 2
	outcomeVersionV1 = 1
)

var errBadOutcome = errors.New("grpcretry: malformed stored outcome")

// outcome is what the server interceptor stores of a call and replays: the
// reply (its protobuf encoding, as the handler's reply marshals), the
// status (code, message, details), and the header and trailer metadata.
type outcome struct {
	status          *spb.Status // code 0 with a reply
	reply           []byte
	replyType       string // the reply message's full name; "" when unknown (version 1)
	hasReply        bool
	header, trailer metadata.MD
}

// encode appends the outcome to dst: a version byte; the status's protobuf
// encoding; a byte that says whether a reply follows, and the reply's
// message type (its full name) and encoding; then the header and the
// trailer metadata, each as a count of names, and per name (sorted) the
// name and its values. Byte strings are preceded by their length as a
// uvarint.
func (o *outcome) encode(dst []byte) ([]byte, error) {
	st, err := proto.MarshalOptions{Deterministic: true}.Marshal(o.status)
	if err != nil {
		return nil, err
	}
	b := append(dst, outcomeVersion)
	b = appendBytes(b, st)
	if o.hasReply {
		b = appendBytes(append(b, 1), []byte(o.replyType))
		b = appendBytes(b, o.reply)
	} else {
		b = append(b, 0)
	}
	b = appendMD(b, o.header)
	return appendMD(b, o.trailer), nil
}

// decodeOutcome is the inverse of encode; it reads version 1 too, whose
// reply comes without its type.
func decodeOutcome(b []byte) (outcome, error) {
	var o outcome
	if len(b) == 0 || (b[0] != outcomeVersion && b[0] != outcomeVersionV1) {
		return o, errBadOutcome
	}
	typed := b[0] == outcomeVersion
	rest := b[1:]
	st, ok := cutBytes(&rest)
	if !ok || len(rest) == 0 {
		return o, errBadOutcome
	}
	o.status = new(spb.Status)
	if proto.Unmarshal(st, o.status) != nil {
		return o, errBadOutcome
	}
	switch flag := rest[0]; {
	case flag == 1:
		rest = rest[1:]
		if typed {
			name, ok := cutBytes(&rest)
			if !ok {
				return o, errBadOutcome
			}
			o.replyType = string(name)
		}
		if o.reply, ok = cutBytes(&rest); !ok {
			return o, errBadOutcome
		}
		o.hasReply = true
	case flag == 0:
		rest = rest[1:]
	default:
		return o, errBadOutcome
	}
	if o.header, ok = cutMD(&rest); !ok {
		return o, errBadOutcome
	}
	if o.trailer, ok = cutMD(&rest); !ok || len(rest) != 0 {
		return o, errBadOutcome
	}
	if o.hasReply != (o.status.GetCode() == 0) {
		return o, errBadOutcome // a reply comes with OK, and only with it
	}
	return o, nil
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendMD(b []byte, md metadata.MD) []byte {
	names := make([]string, 0, len(md))
	for name := range md {
		names = append(names, name)
	}
	slices.Sort(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendBytes(b, []byte(name))
		b = binary.AppendUvarint(b, uint64(len(md[name])))
		for _, v := range md[name] {
			b = appendBytes(b, []byte(v))
		}
	}
	return b
}

func cutUvarint(b *[]byte) (uint64, bool) {
	v, k := binary.Uvarint(*b)
	if k <= 0 {
		return 0, false
	}
	*b = (*b)[k:]
	return v, true
}

func cutBytes(b *[]byte) ([]byte, bool) {
	n, ok := cutUvarint(b)
	if !ok || n > uint64(len(*b)) {
		return nil, false
	}
	s := (*b)[:n]
	*b = (*b)[n:]
	return s, true
}

func cutMD(b *[]byte) (metadata.MD, bool) {
	n, ok := cutUvarint(b)
	if !ok || n > uint64(len(*b)) {
		return nil, false
	}
	md := make(metadata.MD, n)
	for range n {
		name, ok := cutBytes(b)
		if !ok {
			return nil, false
		}
		count, ok := cutUvarint(b)
		if !ok || count > uint64(len(*b)) {
			return nil, false
		}
		values := make([]string, 0, count)
		for range count {
			v, ok := cutBytes(b)
			if !ok {
				return nil, false
			}
			values = append(values, string(v))
		}
		md[string(name)] = values
	}
	return md, true
}
