package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/exactlyonce/retry/idempotency"
)

// finalChecks checks the end state: every message settled and its key
// completed or parked, every begun execution completed or parked, and,
// with a TxStore, exactly one committed local write for each completed
// generation and none for another.
func (w *world) finalChecks(ctx context.Context) {
	for _, m := range w.broker.msgs {
		if !m.settled() {
			w.violate("message %s never settled (%d deliveries)", m.key, m.deliveries)
			continue
		}
		r, err := w.h.Store.Get(ctx, w.caller, m.key)
		switch {
		case m.dropped && !m.claimed && (errors.Is(err, idempotency.ErrNotFound) ||
			err == nil && r.State == idempotency.StateInProgress && r.RecoveryPoint == ""):
			// Its last delivery died with its consumer before its claim
			// reached the store: the broker dropped it, and nothing could
			// have kept it (an earlier delivery's claim may have left a
			// record that never began).
			w.logf("end: %s lost with its consumer before its last claim", m.key)
		case err != nil:
			w.violate("message %s (acked %v, terminated %v, dropped %v): no record: %v", m.key, m.acked, m.termed, m.dropped, err)
		case r.State != idempotency.StateCompleted && r.Parked == "":
			w.violate("message %s (acked %v, terminated %v, dropped %v) ended neither completed nor parked (a%d, point %q)",
				m.key, m.acked, m.termed, m.dropped, r.Attempt, r.RecoveryPoint)
		}
	}
	for _, k := range httpKeys {
		r, err := w.h.Store.Get(ctx, w.caller, k)
		if err != nil {
			continue
		}
		w.sawRecord(w.actors[0], r, "the end's read")
		if r.State != idempotency.StateCompleted && r.Parked == "" && r.RecoveryPoint != "" {
			w.violate("request %s began (point %q) and ended neither completed nor parked (a%d)", k, r.RecoveryPoint, r.Attempt)
		}
	}
	if w.h.LocalWrites == nil {
		return
	}
	names, err := w.h.LocalWrites(ctx, w.caller+"|")
	if err != nil {
		w.violate("list local writes: %v", err)
		return
	}
	count := map[string]int{}
	for _, n := range names {
		parts := strings.Split(n, "|") // caller|key|gN|aN
		if len(parts) != 4 {
			w.violate("local write %q: malformed", n)
			continue
		}
		count[parts[1]+"|"+parts[2]]++
	}
	for key, gens := range w.gens {
		for g, s := range gens {
			n := count[fmt.Sprintf("%s|g%d", key, g)]
			switch {
			case s.completed && n != 1:
				w.violate("%s g%d completed with %d local writes committed, not 1", key, g, n)
			case !s.completed && n != 0:
				w.violate("%s g%d not completed, with %d local writes committed", key, g, n)
			}
			delete(count, fmt.Sprintf("%s|g%d", key, g))
		}
	}
	for kg, n := range count {
		w.violate("%d local writes committed for %s, a generation never claimed", n, kg)
	}
}
