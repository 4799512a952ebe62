package linearize

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/exactlyonce/retry/idempotency"
)

// The sequential specification of one record, (caller, key), as package
// idempotency documents it. A history of calls on a store is linearizable
// when every key's calls can be ordered, each at an instant within its call
// and return, so that this model, stepped in that order, gives every result
// the store gave.
//
// Times: the workload moves the store's clock only between epochs, when no
// call runs, and every call carries the model time of its epoch. Times the
// store reports are read relative to the store's clock at the start of the
// run (base); a real store's clock also moves on by itself while the run
// goes on, by at most tolerance, so reported times are compared within it.
// Leases and TTLs are chosen so that no deadline falls within tolerance of
// an epoch's time: whether a lease or a record is live at an epoch never
// depends on that drift.

// opKind is the kind of a call in a history.
type opKind uint8

const (
	opClaim opKind = iota + 1
	opGet
	opSave
	opComplete
	opRelease
	opPark
	// opStalled is one record a TakeOverStalled call returned.
	opStalled
	// opListed is one workload key as a ListParked call saw it: listed,
	// with its record, or not.
	opListed
)

func (k opKind) String() string {
	return [...]string{"?", "Claim", "Get", "SaveRecoveryPoint", "Complete", "Release", "Park", "TakeOverStalled", "ListParked"}[k]
}

// input is a call: what it asked, on which key, at which model time.
type input struct {
	Kind opKind
	Key  int
	Now  int64 // model time of the call's epoch, in microseconds

	Fingerprint string
	Resume      string
	HasResume   bool
	Lease, TTL  int64

	Attempt, Generation int64 // the fence of a fenced write

	Point, Data, Response, Reason string

	// Batch names the batch the call was a member of (client-step), or
	// is empty for a call alone.
	Batch string
}

// Results of a call other than success.
const (
	errLeaseLost = "lease lost"
	errNotFound  = "not found"
	errNotListed = "not listed"
)

// output is what the store answered.
type output struct {
	Err     string
	Outcome idempotency.ClaimOutcome
	Rec     view
}

// view is a record as the store reported it, times in model microseconds.
type view struct {
	Caller, Key, Fingerprint string
	Completed                bool
	Attempt, Generation      int64
	LockedUntil, ExpiresAt   int64
	CreatedAt                int64

	Point, Data, Response, Resume, Parked string
}

// state is the model's record of one key. It is comparable, so porcupine's
// default equality serves.
type state struct {
	Exists                 bool
	Fingerprint            string
	Completed              bool
	Attempt, Generation    int64
	LockedUntil, ExpiresAt int64
	CreatedAt              int64

	Point, Data, Response, Resume, Parked string

	// Generations lists every generation given to the key so far, as
	// ",g1,g2,...,": a new record never reuses one.
	Generations string
}

func (s state) live(now int64) bool { return s.Exists && s.ExpiresAt > now }

// fenced reports whether a write fenced by (attempt, generation) applies.
func (s state) fenced(in input) bool {
	return s.live(in.Now) && !s.Completed && s.Attempt == in.Attempt && s.Generation == in.Generation
}

func (s state) gaveGeneration(g int64) bool {
	return strings.Contains(s.Generations, ","+strconv.FormatInt(g, 10)+",")
}

// checker steps the model; keys are the workload's (caller, key) pairs, and
// tolerance bounds how far a reported time may be from the model's.
type checker struct {
	keys      [][2]string
	tolerance int64
}

// near reports whether a time the store reported is the model's time
// want, within the drift of the store's clock.
func (c checker) near(got, want int64) bool {
	d := got - want
	return d >= -clockSlack && d <= c.tolerance
}

// clockSlack is how far before the model's time a reported time may be:
// the instant read as the run's base may be a little after the instant a
// store's statement began.
const clockSlack = 1_000_000

// same reports whether v is the record s, as the store should report it.
func (c checker) same(v view, s state, key int) bool {
	return v.Caller == c.keys[key][0] && v.Key == c.keys[key][1] &&
		v.Fingerprint == s.Fingerprint && v.Completed == s.Completed &&
		v.Attempt == s.Attempt && v.Generation == s.Generation &&
		v.Point == s.Point && v.Data == s.Data && v.Response == s.Response &&
		v.Resume == s.Resume && v.Parked == s.Parked &&
		c.near(v.LockedUntil, s.LockedUntil) && c.near(v.ExpiresAt, s.ExpiresAt) && c.near(v.CreatedAt, s.CreatedAt)
}

// step is the model: whether the store could answer in with out in state
// s, and the state after.
func (c checker) step(s state, in input, out output) (bool, state) {
	now := in.Now
	switch in.Kind {
	case opClaim:
		return c.claim(s, in, out)
	case opGet:
		if !s.live(now) {
			return out.Err == errNotFound, s
		}
		return out.Err == "" && c.same(out.Rec, s, in.Key), s
	case opSave, opComplete, opRelease, opPark:
		if !s.fenced(in) {
			return out.Err == errLeaseLost, s
		}
		if out.Err != "" {
			return false, s
		}
		n := s
		switch in.Kind {
		case opSave:
			n.Point, n.Data, n.LockedUntil = in.Point, in.Data, now+in.Lease
		case opComplete:
			n.Completed, n.Response, n.Resume = true, in.Response, ""
		case opRelease:
			n = state{Generations: s.Generations}
		case opPark:
			n.Parked, n.LockedUntil = in.Reason, now
		}
		return true, n
	case opStalled:
		stalled := s.live(now) && !s.Completed && s.Point != "" && s.Parked == "" && s.LockedUntil <= now
		if !stalled {
			return false, s
		}
		n := s
		n.Attempt++
		n.LockedUntil = now + in.Lease
		return c.same(out.Rec, n, in.Key), n
	case opListed:
		parked := s.live(now) && !s.Completed && s.Parked != ""
		if out.Err == errNotListed {
			return !parked, s
		}
		return parked && out.Err == "" && c.same(out.Rec, s, in.Key), s
	}
	return false, s
}

// claim steps a Claim.
func (c checker) claim(s state, in input, out output) (bool, state) {
	now, r := in.Now, out.Rec
	if out.Err != "" {
		return false, s
	}
	if !s.live(now) {
		resume := ""
		if in.HasResume {
			resume = in.Resume
		}
		n := state{
			Exists: true, Fingerprint: in.Fingerprint, Attempt: 1, Generation: r.Generation,
			LockedUntil: now + in.Lease, ExpiresAt: now + in.TTL, CreatedAt: now, Resume: resume,
			Generations: s.Generations + strconv.FormatInt(r.Generation, 10) + ",",
		}
		if s.Generations == "" {
			n.Generations = "," + n.Generations
		}
		ok := out.Outcome == idempotency.ClaimCreated && r.Generation != 0 && !s.gaveGeneration(r.Generation) &&
			c.same(r, n, in.Key)
		return ok, n
	}
	switch {
	case s.Fingerprint != in.Fingerprint:
		return out.Outcome == idempotency.ClaimMismatch && c.same(r, s, in.Key), s
	case s.Completed:
		return out.Outcome == idempotency.ClaimCompleted && c.same(r, s, in.Key), s
	case s.LockedUntil > now:
		return out.Outcome == idempotency.ClaimInProgress && c.same(r, s, in.Key), s
	}
	n := s
	n.Attempt++
	n.LockedUntil = now + in.Lease
	n.Parked = ""
	if in.HasResume {
		n.Resume = in.Resume
	}
	return out.Outcome == idempotency.ClaimTakenOver && c.same(r, n, in.Key), n
}

// model is the porcupine model of a history, partitioned by key.
func (c checker) model() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := make([][]porcupine.Operation, len(c.keys))
			for _, op := range history {
				k := op.Input.(input).Key
				byKey[k] = append(byKey[k], op)
			}
			var parts [][]porcupine.Operation
			for _, ops := range byKey {
				if len(ops) > 0 {
					parts = append(parts, ops)
				}
			}
			return parts
		},
		Init: func() any { return state{} },
		Step: func(s, in, out any) (bool, any) {
			return c.step(s.(state), in.(input), out.(output))
		},
		DescribeOperation: func(in, out any) string { return c.describe(in.(input), out.(output)) },
		DescribeState:     func(s any) string { return describeState(s.(state)) },
	}
}

// describe writes a call and its result for a person.
func (c checker) describe(in input, out output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "t=%s %s(%q, %q", minutes(in.Now), in.Kind, c.keys[in.Key][0], c.keys[in.Key][1])
	switch in.Kind {
	case opClaim:
		fmt.Fprintf(&b, ", fp %s, lease %s", in.Fingerprint, minutes(in.Lease))
		if in.HasResume {
			fmt.Fprintf(&b, ", resume %s", in.Resume)
		}
	case opSave:
		fmt.Fprintf(&b, ", fence %d/%d, point %q, data %q, lease %s", in.Attempt, in.Generation, in.Point, in.Data, minutes(in.Lease))
	case opComplete:
		fmt.Fprintf(&b, ", fence %d/%d, response %q", in.Attempt, in.Generation, in.Response)
	case opRelease:
		fmt.Fprintf(&b, ", fence %d/%d", in.Attempt, in.Generation)
	case opPark:
		fmt.Fprintf(&b, ", fence %d/%d, reason %q", in.Attempt, in.Generation, in.Reason)
	case opStalled:
		fmt.Fprintf(&b, ", lease %s", minutes(in.Lease))
	}
	if in.Batch != "" {
		fmt.Fprintf(&b, ", in batch %s", in.Batch)
	}
	b.WriteString(") -> ")
	switch {
	case out.Err != "":
		b.WriteString(out.Err)
	case in.Kind == opClaim:
		fmt.Fprintf(&b, "%s %s", outcomeName(out.Outcome), describeView(out.Rec))
	case in.Kind == opGet || in.Kind == opStalled || in.Kind == opListed:
		b.WriteString(describeView(out.Rec))
	default:
		b.WriteString("ok")
	}
	return b.String()
}

func describeView(v view) string {
	st := "in progress"
	if v.Completed {
		st = "completed"
	}
	s := fmt.Sprintf("{%s attempt %d gen %d fp %s lockedUntil %s expires %s", st, v.Attempt, v.Generation, v.Fingerprint,
		minutes(v.LockedUntil), minutes(v.ExpiresAt))
	return s + extras(v.Point, v.Data, v.Response, v.Resume, v.Parked) + "}"
}

func describeState(s state) string {
	if !s.Exists {
		return fmt.Sprintf("no record (generations given: %s)", strings.Trim(s.Generations, ","))
	}
	st := "in progress"
	if s.Completed {
		st = "completed"
	}
	return fmt.Sprintf("{%s attempt %d gen %d fp %s lockedUntil %s expires %s%s}", st, s.Attempt, s.Generation,
		s.Fingerprint, minutes(s.LockedUntil), minutes(s.ExpiresAt), extras(s.Point, s.Data, s.Response, s.Resume, s.Parked))
}

func extras(point, data, response, resume, parked string) string {
	var b strings.Builder
	for _, f := range [][2]string{{"point", point}, {"data", data}, {"response", response}, {"resume", resume}, {"parked", parked}} {
		if f[1] != "" {
			fmt.Fprintf(&b, " %s %q", f[0], f[1])
		}
	}
	return b.String()
}

// minutes writes model microseconds as minutes, to the second.
func minutes(us int64) string {
	return strconv.FormatFloat(float64(us)/60e6, 'f', 2, 64) + "m"
}

func outcomeName(o idempotency.ClaimOutcome) string {
	switch o {
	case idempotency.ClaimCreated:
		return "created"
	case idempotency.ClaimTakenOver:
		return "taken over"
	case idempotency.ClaimInProgress:
		return "in progress"
	case idempotency.ClaimCompleted:
		return "completed"
	case idempotency.ClaimMismatch:
		return "mismatch"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}
