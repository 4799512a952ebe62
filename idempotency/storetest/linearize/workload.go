package linearize

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/storetest"
)

// Times of the workload. Epochs start at multiples of unit; every lease and
// TTL is an odd multiple of half a unit, so every deadline falls half a unit
// (ten minutes) from any epoch's start: farther than a store's clock drifts
// during a run (tolerance).
const (
	unit       = 20 * time.Minute
	longLease  = 50 * time.Minute
	shortLease = 30 * time.Minute
	ttl        = 110 * time.Minute
	tolerance  = 5 * time.Minute
)

// keys are the workload's (caller, key) pairs: two callers sharing a key,
// and pairs that a concatenation would confuse.
var keys = [][2]string{{"alice", "x"}, {"alice", "y"}, {"bob", "x"}, {"bo", "bx"}}

// recorder records the calls of a run.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	errs  []error
}

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(op porcupine.Operation) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// unexpected records a store error the workload never provokes.
func (r *recorder) unexpected(what string, err error) {
	r.mu.Lock()
	r.errs = append(r.errs, fmt.Errorf("%s: %w", what, err))
	r.mu.Unlock()
}

// run is one run of the workload on a store.
type run struct {
	cfg   Config
	h     storetest.Harness
	base  time.Time // the store's clock at model time 0
	rec   recorder
	epoch struct {
		sync.RWMutex
		now int64 // model time, microseconds
	}
}

// fence is a fence a client holds, maybe long after it was taken over.
type fence struct {
	key                 int
	attempt, generation int64
}

// client is one workload goroutine: it claims, saves points, completes,
// releases, parks, reads, takes stalled executions over and lists parked
// ones, with the fences it got, fresh or long stale.
type client struct {
	id     int
	r      *run
	rng    *rand.Rand
	fences []fence
	n      int
}

// record runs the workload on h and returns its history.
func record(ctx context.Context, cfg Config, h storetest.Harness) ([]porcupine.Operation, []error) {
	r := &run{cfg: cfg, h: h, rec: recorder{start: time.Now()}}
	// The store's clock at model time 0, from a record of its own.
	probe, err := h.Store.Claim(ctx, idempotency.ClaimRequest{Caller: "probe", Key: "probe", Fingerprint: "probe",
		Lease: time.Minute, TTL: time.Hour})
	if err != nil {
		return nil, []error{fmt.Errorf("probe claim: %w", err)}
	}
	r.base = probe.Record.CreatedAt
	clients := make([]*client, cfg.Clients)
	for i := range clients {
		clients[i] = &client{id: i, r: r, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1))}
	}
	plan := rand.New(rand.NewPCG(cfg.Seed, 0))
	for e := range cfg.Epochs {
		if e > 0 {
			// Time moves only here, with every client between epochs.
			steps := [...]int{0, 1, 1, 2, 4}[plan.IntN(5)]
			d := time.Duration(steps) * unit
			r.h.Advance(d)
			r.epoch.now += d.Microseconds()
		}
		var wg sync.WaitGroup
		for _, c := range clients {
			// A client that sits an epoch out is an owner paused past its
			// lease: it comes back with the fences it held.
			if e > 0 && c.rng.IntN(4) == 0 {
				continue
			}
			wg.Go(func() {
				for range cfg.OpsPerEpoch {
					c.step(ctx)
				}
			})
		}
		wg.Wait()
	}
	return r.rec.ops, r.rec.errs
}

// view reads a record as the model compares it.
func (r *run) view(rec idempotency.Record) view {
	rel := func(t time.Time) int64 { return t.Sub(r.base).Microseconds() }
	return view{
		Caller: rec.Caller, Key: rec.Key, Fingerprint: rec.Fingerprint,
		Completed: rec.State == idempotency.StateCompleted,
		Attempt:   rec.Attempt, Generation: rec.Generation,
		LockedUntil: rel(rec.LockedUntil), ExpiresAt: rel(rec.ExpiresAt), CreatedAt: rel(rec.CreatedAt),
		Point: rec.RecoveryPoint, Data: string(rec.RecoveryData), Response: string(rec.Response),
		Resume: string(rec.Resume), Parked: rec.Parked,
	}
}

// keyOf returns the workload index of a record's (caller, key), or -1.
func keyOf(rec idempotency.Record) int {
	for i, k := range keys {
		if k[0] == rec.Caller && k[1] == rec.Key {
			return i
		}
	}
	return -1
}

// step makes one random call: on a BatchStore, now and then a batch.
func (c *client) step(ctx context.Context) {
	c.n++
	if bs, ok := c.r.h.Store.(idempotency.BatchStore); ok && c.rng.IntN(100) < batchShare {
		c.batch(ctx, bs)
		return
	}
	switch p := c.rng.IntN(100); {
	case p < 25:
		c.claim(ctx)
	case p < 45:
		c.fenced(ctx, opSave)
	case p < 52:
		c.fenced(ctx, opComplete)
	case p < 56:
		c.fenced(ctx, opRelease)
	case p < 63:
		c.fenced(ctx, opPark)
	case p < 71:
		c.get(ctx)
	case p < 83:
		c.takeOverStalled(ctx)
	case p < 93:
		c.listParked(ctx)
	default:
		// Sweeps race the rest; their effect is the absence of
		// expired records, which every other call already sees.
		if _, err := c.r.h.Store.DeleteExpired(ctx, 1+c.rng.IntN(3)); err != nil {
			c.r.rec.unexpected("DeleteExpired", err)
		}
	}
}

// epochNow returns the model time of the current epoch.
func (c *client) epochNow() int64 {
	c.r.epoch.RLock()
	defer c.r.epoch.RUnlock()
	return c.r.epoch.now
}

// call records one call on one key.
func (c *client) call(in input, do func() output) output {
	in.Now = c.epochNow()
	callAt := c.r.rec.now()
	out := do()
	c.r.rec.add(porcupine.Operation{ClientId: c.id, Input: in, Call: callAt, Output: out, Return: c.r.rec.now()})
	return out
}

func (c *client) claim(ctx context.Context) {
	in, req := c.claimRequest(c.rng.IntN(len(keys)), fmt.Sprintf("%d-%d", c.id, c.n))
	c.call(in, func() output {
		cl, err := c.r.h.Store.Claim(ctx, req)
		if err != nil {
			c.r.rec.unexpected("Claim", err)
			return output{Err: err.Error()}
		}
		return c.claimed(in.Key, cl)
	})
}

// claimRequest makes a claim of key k: mostly with fingerprint A, half the
// time with a stored request to resume, named by tag.
func (c *client) claimRequest(k int, tag string) (input, idempotency.ClaimRequest) {
	in := input{Kind: opClaim, Key: k, Fingerprint: "A", Lease: longLease.Microseconds(), TTL: ttl.Microseconds()}
	if c.rng.IntN(20) == 0 {
		in.Fingerprint = "B"
	}
	if c.rng.IntN(2) == 0 {
		in.HasResume, in.Resume = true, "resume-"+tag
	}
	req := idempotency.ClaimRequest{Caller: keys[k][0], Key: keys[k][1], Fingerprint: in.Fingerprint,
		Lease: longLease, TTL: ttl}
	if in.HasResume {
		req.Resume = []byte(in.Resume)
	}
	return in, req
}

// claimed keeps the fence of a claim of key k that gave the client the
// execution, and returns the claim as the model reads it.
func (c *client) claimed(k int, cl idempotency.Claim) output {
	if cl.Outcome == idempotency.ClaimCreated || cl.Outcome == idempotency.ClaimTakenOver {
		c.fences = append(c.fences, fence{key: k, attempt: cl.Record.Attempt, generation: cl.Record.Generation})
	}
	return output{Outcome: cl.Outcome, Rec: c.r.view(cl.Record)}
}

// pickFence returns a fence the client holds: mostly its latest one for a
// key, sometimes an old one, now and then one it forged.
func (c *client) pickFence() (fence, bool) {
	if len(c.fences) == 0 {
		return fence{}, false
	}
	f := c.fences[c.rng.IntN(len(c.fences))]
	if c.rng.IntN(3) > 0 {
		for i := len(c.fences) - 1; i >= 0; i-- {
			if c.fences[i].key == f.key {
				f = c.fences[i]
				break
			}
		}
	}
	switch c.rng.IntN(20) {
	case 0:
		f.attempt++
	case 1:
		f.generation++
	}
	return f, true
}

func (c *client) fenced(ctx context.Context, kind opKind) {
	f, ok := c.pickFence()
	if !ok {
		c.claim(ctx)
		return
	}
	fe := idempotency.Fence{Caller: keys[f.key][0], Key: keys[f.key][1], Attempt: f.attempt, Generation: f.generation}
	in := input{Kind: kind, Key: f.key, Attempt: f.attempt, Generation: f.generation}
	var do func() error
	s := c.r.h.Store
	switch kind {
	case opSave:
		in.Point, in.Data, in.Lease = fmt.Sprintf("begin:step-%d-%d", c.id, c.n), fmt.Sprintf("data-%d-%d", c.id, c.n), longLease.Microseconds()
		lease := longLease
		if c.rng.IntN(2) == 0 {
			in.Lease, lease = shortLease.Microseconds(), shortLease
		}
		do = func() error { return s.SaveRecoveryPoint(ctx, fe, in.Point, []byte(in.Data), lease) }
	case opComplete:
		in.Response = fmt.Sprintf("response-%d-%d", c.id, c.n)
		do = func() error { return s.Complete(ctx, fe, []byte(in.Response)) }
	case opRelease:
		do = func() error { return s.Release(ctx, fe) }
	case opPark:
		in.Reason = fmt.Sprintf("reason-%d-%d", c.id, c.n)
		do = func() error { return s.Park(ctx, fe, in.Reason) }
	}
	c.call(in, func() output {
		err := do()
		switch {
		case err == nil:
			return output{}
		case errors.Is(err, idempotency.ErrLeaseLost):
			return output{Err: errLeaseLost}
		}
		c.r.rec.unexpected(kind.String(), err)
		return output{Err: err.Error()}
	})
}

func (c *client) get(ctx context.Context) {
	k := c.rng.IntN(len(keys))
	c.call(input{Kind: opGet, Key: k}, func() output {
		rec, err := c.r.h.Store.Get(ctx, keys[k][0], keys[k][1])
		switch {
		case errors.Is(err, idempotency.ErrNotFound):
			return output{Err: errNotFound}
		case err != nil:
			c.r.rec.unexpected("Get", err)
			return output{Err: err.Error()}
		}
		return output{Rec: c.r.view(rec)}
	})
}

// takeOverStalled records each record a TakeOverStalled call took over as a
// call of its own on that record's key, within the call's interval: the
// store takes each over atomically, not all at once.
func (c *client) takeOverStalled(ctx context.Context) {
	now := c.epochNow()
	callAt := c.r.rec.now()
	recs, err := c.r.h.Store.TakeOverStalled(ctx, "", 0, longLease)
	returnAt := c.r.rec.now()
	if err != nil {
		c.r.rec.unexpected("TakeOverStalled", err)
		return
	}
	for _, rec := range recs {
		k := keyOf(rec)
		if k < 0 {
			if rec.Caller != "probe" {
				c.r.rec.unexpected("TakeOverStalled", fmt.Errorf("a record of an unknown key (%q, %q)", rec.Caller, rec.Key))
			}
			continue
		}
		c.fences = append(c.fences, fence{key: k, attempt: rec.Attempt, generation: rec.Generation})
		c.r.rec.add(porcupine.Operation{ClientId: c.id, Call: callAt, Return: returnAt,
			Input:  input{Kind: opStalled, Key: k, Now: now, Lease: longLease.Microseconds()},
			Output: output{Rec: c.r.view(rec)}})
	}
}

// listParked records, for every key, whether a ListParked call listed it
// (and as what), as a call of its own on that key.
func (c *client) listParked(ctx context.Context) {
	now := c.epochNow()
	callAt := c.r.rec.now()
	recs, err := c.r.h.Store.ListParked(ctx, "", "", 0)
	returnAt := c.r.rec.now()
	if err != nil {
		c.r.rec.unexpected("ListParked", err)
		return
	}
	listed := make(map[int]idempotency.Record)
	for _, rec := range recs {
		k := keyOf(rec)
		if k < 0 {
			c.r.rec.unexpected("ListParked", fmt.Errorf("a record of an unknown key (%q, %q)", rec.Caller, rec.Key))
			continue
		}
		if _, dup := listed[k]; dup {
			c.r.rec.unexpected("ListParked", fmt.Errorf("(%q, %q) listed twice", rec.Caller, rec.Key))
		}
		listed[k] = rec
	}
	for k := range keys {
		out := output{Err: errNotListed}
		if rec, ok := listed[k]; ok {
			out = output{Rec: c.r.view(rec)}
		}
		c.r.rec.add(porcupine.Operation{ClientId: c.id, Call: callAt, Return: returnAt,
			Input: input{Kind: opListed, Key: k, Now: now}, Output: out})
	}
}
