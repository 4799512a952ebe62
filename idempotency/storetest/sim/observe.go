package sim

import (
	"context"
	"errors"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// gen returns the state of generation g of key, made on first sight.
func (w *world) gen(key string, g int64) *genState {
	m := w.gens[key]
	if m == nil {
		m = map[int64]*genState{}
		w.gens[key] = m
	}
	s := m[g]
	if s == nil {
		s = &genState{}
		m[g] = s
	}
	return s
}

// sawClaim checks a claim's answer.
func (w *world) sawClaim(a *actor, req idempotency.ClaimRequest, c idempotency.Claim) {
	r := c.Record
	switch c.Outcome {
	case idempotency.ClaimCreated:
		w.logf("  %s: claim %s: created g%d a%d point %q", a.name, req.Key, r.Generation, r.Attempt, r.RecoveryPoint)
		if _, seen := w.gens[req.Key][r.Generation]; seen {
			w.violate("claim of %s created generation %d again", req.Key, r.Generation)
		}
		w.gen(req.Key, r.Generation).maxAttempt = r.Attempt
		w.claimedLast(req)
	case idempotency.ClaimTakenOver:
		w.sawTakeOver(a, r, "claim "+req.Key+": taken over")
		w.claimedLast(req)
	case idempotency.ClaimCompleted:
		w.logf("  %s: claim %s: completed g%d", a.name, req.Key, r.Generation)
		w.sawRecord(a, r, "claim")
	case idempotency.ClaimInProgress:
		w.logf("  %s: claim %s: in progress g%d a%d point %q", a.name, req.Key, r.Generation, r.Attempt, r.RecoveryPoint)
		w.claimedLast(req)
	default:
		w.logf("  %s: claim %s: outcome %d (g%d a%d)", a.name, req.Key, c.Outcome, r.Generation, r.Attempt)
	}
}

// claimedLast notes a claim that makes the store own a message: the
// broker's last delivery's, which marks it started, whether it takes the
// execution or finds it held by another (its mark is then saved on the
// holder's record).
func (w *world) claimedLast(req idempotency.ClaimRequest) {
	if req.Point == "" {
		return
	}
	for _, m := range w.broker.msgs {
		if m.key == req.Key {
			m.claimed = true
		}
	}
}

// sawTakeOver checks a takeover: the attempt moves on, a completed
// record is never taken over.
func (w *world) sawTakeOver(a *actor, r idempotency.Record, how string) {
	w.logf("  %s: %s g%d a%d point %q", a.name, how, r.Generation, r.Attempt, r.RecoveryPoint)
	g := w.gen(r.Key, r.Generation)
	if g.completed {
		w.violate("%s: %s took over completed %s g%d", a.name, how, r.Key, r.Generation)
	}
	if r.Attempt <= g.maxAttempt {
		w.violate("%s: %s of %s g%d gave attempt %d, not above %d", a.name, how, r.Key, r.Generation, r.Attempt, g.maxAttempt)
	}
	g.maxAttempt = max(g.maxAttempt, r.Attempt)
}

// sawFencedWrite checks a fenced write the store accepted: only the
// latest attempt of a record not completed may make one.
func (w *world) sawFencedWrite(a *actor, f idempotency.Fence, what string) {
	w.logf("  %s: %s %s g%d a%d: done", a.name, what, f.Key, f.Generation, f.Attempt)
	g := w.gen(f.Key, f.Generation)
	if g.completed {
		w.violate("%s: %s of %s g%d a%d accepted after its completion", a.name, what, f.Key, f.Generation, f.Attempt)
	}
	if f.Attempt != g.maxAttempt {
		w.violate("%s: %s of %s g%d accepted from attempt %d, fenced out by attempt %d", a.name, what, f.Key, f.Generation, f.Attempt, g.maxAttempt)
	}
}

// sawComplete checks a completion the store accepted: one per key and
// generation, from its latest attempt.
func (w *world) sawComplete(a *actor, f idempotency.Fence, response []byte) {
	w.sawFencedWrite(a, f, "complete")
	g := w.gen(f.Key, f.Generation)
	g.completed, g.response, g.by = true, append([]byte{}, response...), a.name
	if prev, ok := w.outcomes[f.Key]; ok {
		w.violate("%s: %s completed again (g%d), its outcome was %q", a.name, f.Key, f.Generation, prev)
	}
	w.outcomes[f.Key] = g.response
}

// sawRecord checks a record read back: a completed one holds its outcome.
func (w *world) sawRecord(a *actor, r idempotency.Record, how string) {
	if r.State != idempotency.StateCompleted {
		return
	}
	want, ok := w.outcomes[r.Key]
	switch {
	case !ok:
		w.violate("%s: %s found %s completed (g%d) with no completion seen", a.name, how, r.Key, r.Generation)
	case string(want) != string(r.Response):
		w.violate("%s: %s found the outcome of %s changed: %q, stored %q", a.name, how, r.Key, r.Response, want)
	}
}

// sawResult checks what Runner.Do returned a worker: an outcome is the
// stored one.
func (w *world) sawResult(a *actor, key string, res idempotency.Result, err error) {
	if err != nil {
		var ip *idempotency.InProgressError
		if errors.As(err, &ip) {
			// The hint is read off the store's clock, which a server's
			// runs on: rounded, the trace replays.
			w.logf("  %s: do %s: in progress, retry after about %v", a.name, key, ip.RetryAfter.Round(time.Minute))
			return
		}
		w.logf("  %s: do %s: %v", a.name, key, err)
		return
	}
	w.logf("  %s: do %s: %q replayed=%v", a.name, key, res.Response, res.Replayed)
	if want, ok := w.outcomes[key]; !ok || string(want) != string(res.Response) {
		w.violate("%s: do %s returned %q (replayed %v), the stored outcome is %q", a.name, key, res.Response, res.Replayed, want)
	}
}

// checkOwned checks, when a consumer acks or terminates a delivery, that
// the store has the message: its outcome, or the message parked, or
// started with the message stored (a Reconciler finishes it).
func (w *world) checkOwned(d *delivery, how string) {
	r, err := w.h.Store.Get(context.Background(), w.caller, d.m.key)
	switch {
	case err != nil:
		w.violate("%s %s#%d (last %v) with no record in the store (%v)", how, d.m.key, d.n, d.last, err)
	case r.State == idempotency.StateCompleted || r.Parked != "":
	case d.last && r.RecoveryPoint != "" && len(r.Resume) > 0:
	default:
		w.violate("%s %s#%d (last %v) while its record is in progress (point %q, lease until %v)", how, d.m.key, d.n, d.last, r.RecoveryPoint, r.LockedUntil)
	}
}
