package idempotency

import (
	"encoding/binary"
	"errors"
)

// resumeVersion is the first byte of an encoded Record.Resume.
const resumeVersion = 1

// startedPoint is the recovery point that marks an execution started when
// its record can be resumed (it has Record.Resume) and no step has begun:
// the mark a Reconciler looks for. No step's point is ever this name (a
// step's are "begin:" or "done:" and its name).
const startedPoint = "started"

var errBadResume = errors.New("idempotency: malformed stored work")

// encodeResume encodes the name of the registered work and its input: a
// version byte, the name preceded by its length as a uvarint, the input.
func encodeResume(work string, input []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(work)+len(input))
	b = append(b, resumeVersion)
	b = binary.AppendUvarint(b, uint64(len(work)))
	b = append(b, work...)
	return append(b, input...)
}

// decodeResume is the inverse of encodeResume.
func decodeResume(b []byte) (work string, input []byte, err error) {
	if len(b) == 0 || b[0] != resumeVersion {
		return "", nil, errBadResume
	}
	name, rest, ok := cutField(b[1:])
	if !ok || len(name) == 0 {
		return "", nil, errBadResume
	}
	return string(name), rest, nil
}
