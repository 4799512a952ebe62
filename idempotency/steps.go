package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

type stepResult struct {
	name   string
	result []byte
}

// Step runs fn once for this unit of work, bracketed by recovery points. fn
// is the body of the step: an external call made with downstreamKey as its
// idempotency key, returning a small result to keep (an id, a status).
//
//  1. If an earlier attempt completed step name, Step returns its saved result
//     without calling fn.
//  2. Otherwise it saves the recovery point "begin:"+name (renewing the lease),
//     calls fn with the step's downstream key, then saves "done:"+name with
//     fn's result.
//
// A retry after a crash (the lease taken over) resumes after the last
// completed step; a step that began but did not complete is called again with
// the same downstream key, so the downstream service deduplicates it. fn's
// error is returned as it is and nothing is saved for the step. If a
// recovery point cannot be saved (the store failed), Step returns that
// error, and whatever the work then returns is not stored: the attempt
// failed, and the next retry (or a Reconciler) resumes it. Step marks the
// execution started. Each name may be used once per execution; results are
// stored with the key, so keep them small.
//
// An error matching ErrLeaseLost means another attempt owns the key: stop.
func (e *Execution) Step(ctx context.Context, name string, fn func(ctx context.Context, downstreamKey string) ([]byte, error)) ([]byte, error) {
	if e == nil {
		return nil, errors.New("idempotency: Step outside an execution")
	}
	if e.used[name] {
		return nil, fmt.Errorf("idempotency: step %q called twice in one execution", name)
	}
	if e.used == nil {
		e.used = make(map[string]bool)
	}
	e.used[name] = true
	e.started.Store(true) // and the step's recovery point marks it in the store
	for _, s := range e.steps {
		if s.name == name {
			return bytes.Clone(s.result), nil
		}
	}
	if err := e.save(ctx, "begin:"+name, nil); err != nil {
		return nil, err
	}
	res, err := fn(ctx, DownstreamKey(e.fence.Caller, e.fence.Key, name))
	if err != nil {
		return nil, err
	}
	steps := append(e.steps, stepResult{name: name, result: bytes.Clone(res)})
	if err := e.save(ctx, "done:"+name, encodeSteps(steps)); err != nil {
		return nil, err
	}
	e.steps = steps
	return res, nil
}

// save stores a recovery point with data (nil: the data saved last) and
// renews the lease. The execution's recovery state is read and written
// under the lock only: MarkStarted saves it from any goroutine.
func (e *Execution) save(ctx context.Context, point string, data []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if data == nil {
		data = e.data
	}
	if err := e.renew(ctx, point, data); err != nil {
		if e.stepErr == nil && !errors.Is(err, ErrLeaseLost) {
			e.stepErr = err
		}
		return fmt.Errorf("idempotency: recovery point %q: %w", point, err)
	}
	return nil
}

// downstreamSpace is the UUID namespace of downstream keys.
var downstreamSpace = uuid.MustParse("6f1b0a52-9d0e-4c57-8a53-3f3e0c1f6a10")

// DownstreamKey returns the idempotency key for step of the unit of work
// (caller, key): a version 8 UUID (RFC 9562, name-based with SHA-256, as
// uuid.NewHash makes) over a fixed namespace and the three strings, each
// preceded by its length as a big-endian uint32. It is deterministic, so every
// attempt at the step sends the same key, and differs between callers, keys
// and steps.
func DownstreamKey(caller, key, step string) string {
	data := make([]byte, 0, 12+len(caller)+len(key)+len(step))
	for _, s := range [...]string{caller, key, step} {
		data = binary.BigEndian.AppendUint32(data, uint32(len(s)))
		data = append(data, s...)
	}
	return uuid.NewHash(sha256.New(), downstreamSpace, data, 8).String()
}

// stepsVersion is the first byte of encoded recovery data.
const stepsVersion = 1

// encodeSteps encodes completed step results: a version byte, then for each
// step its name and result, each preceded by its length as a uvarint.
func encodeSteps(steps []stepResult) []byte {
	b := []byte{stepsVersion}
	for _, s := range steps {
		b = binary.AppendUvarint(b, uint64(len(s.name)))
		b = append(b, s.name...)
		b = binary.AppendUvarint(b, uint64(len(s.result)))
		b = append(b, s.result...)
	}
	return b
}

var errBadSteps = errors.New("malformed step results")

func decodeSteps(b []byte) ([]stepResult, error) {
	if len(b) == 0 || b[0] != stepsVersion {
		return nil, errBadSteps
	}
	b = b[1:]
	var steps []stepResult
	for len(b) > 0 {
		name, rest, ok := cutField(b)
		if !ok {
			return nil, errBadSteps
		}
		result, rest, ok := cutField(rest)
		if !ok {
			return nil, errBadSteps
		}
		steps = append(steps, stepResult{name: string(name), result: bytes.Clone(result)})
		b = rest
	}
	return steps, nil
}

// cutField splits a uvarint-length-prefixed field off b.
func cutField(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}
