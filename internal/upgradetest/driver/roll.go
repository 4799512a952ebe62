package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// roll is one worker of the rolling deploy: it serves every key of the keys
// file, in an order of its own, with a Reconciler running, until it has
// seen each completed (executed here, or replayed); a key another worker
// holds is tried again later. The test kills workers at random and starts
// them again. A worker that finishes checks every answer it got against
// the ledger and appends what is wrong to the problems file; its report
// says what it executed and replayed.
func roll(b backend) error {
	keys, err := readKeys()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pf, err := os.OpenFile(*problems, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer pf.Close()
	problem := func(format string, args ...any) {
		_, _ = fmt.Fprintf(pf, "%s (%s, pid %d): %s\n", *version, *storeName, os.Getpid(), fmt.Sprintf(format, args...))
	}
	s := newServer(b, rollLease, nil, nil)
	rc := idempotency.StartReconciler(s.runner, idempotency.ReconcilerConfig{Interval: 100 * time.Millisecond, MaxAttempts: 1000})
	defer rc.Stop()
	// The outbox's relay, as every instance runs one.
	relayed := make(chan struct{})
	stopRelay := make(chan struct{})
	go func() {
		defer close(relayed)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := b.Relay(ctx); err != nil && ctx.Err() == nil {
				problem("relay: %v", err)
			}
			select {
			case <-stopRelay:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stopRelay); <-relayed }()
	rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	var rep Report
	rep.Version = *version
	for pending := keys; len(pending) > 0; {
		if ctx.Err() != nil {
			problem("%d keys still in progress after 2 minutes", len(pending))
			return ctx.Err()
		}
		var again []string
		for _, key := range pending {
			kr := s.serveKey(ctx, key)
			switch kr.Outcome {
			case "in_progress":
				again = append(again, key)
			case "executed", "replayed":
				rep.Keys = append(rep.Keys, kr)
			default:
				problem("%s: %s %s", key, kr.Outcome, kr.Err)
				again = append(again, key)
			}
		}
		pending = again
		if len(pending) > 0 {
			time.Sleep(20 * time.Millisecond) // other workers hold them
		}
	}
	l, err := b.Ledger(ctx)
	if err != nil {
		return err
	}
	for _, kr := range rep.Keys {
		bodies := l.Effects[kr.Key]
		if len(bodies) != 1 || bodies[0] != kr.Body {
			problem("%s: answered %q (%s), the ledger holds %q", kr.Key, kr.Body, kr.Outcome, bodies)
		}
	}
	return writeReport(rep)
}
