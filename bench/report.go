package bench

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// WriteMarkdown writes the results as Markdown: one table with a column per
// library, then the settings.
func WriteMarkdown(w io.Writer, res Results) error {
	var b strings.Builder
	s := res.Settings
	b.WriteString("| scenario |")
	for _, r := range res.Libs {
		fmt.Fprintf(&b, " %s |", r.Library.Name)
	}
	b.WriteString("\n|---|")
	for range res.Libs {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	row := func(name string, cell func(r LibResult) string) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, r := range res.Libs {
			fmt.Fprintf(&b, " %s |", cell(r))
		}
		b.WriteString("\n")
	}
	row("total outage, attempts per request, defaults, sequential", func(r LibResult) string {
		return defaultsCell(r, r.DefaultsSeq)
	})
	row(fmt.Sprintf("same, %d concurrent callers", s.Callers), func(r LibResult) string {
		return defaultsCell(r, r.DefaultsConc)
	})
	row("same, 4-attempt policy, sequential", func(r LibResult) string { return perRequest(r.PolicySeq.PerRequest()) })
	row(fmt.Sprintf("same, 4-attempt policy, %d concurrent callers", s.Callers), func(r LibResult) string {
		return perRequest(r.PolicyConc.PerRequest())
	})
	row("3 nested layers, innermost attempts per top-level request, 4-attempt policy", func(r LibResult) string {
		return perRequest(r.NestedPolicy.PerRequest())
	})
	row("same, defaults", func(r LibResult) string {
		if !r.Library.QuickDefaults {
			return "not run (see note)"
		}
		return perRequest(r.NestedDefaults.PerRequest())
	})
	if s.Cost {
		plain := plainOf(res)
		for j, cc := range CostCases {
			row("library cost, "+cc.Name+": time vs plain client (allocations added)", func(r LibResult) string {
				return costCell(r.Costs[j], plain.Costs[j])
			})
		}
	}
	row("Retry-After: 1 (seconds) honoured", func(r LibResult) string { return retryAfterCell(r, r.RASeconds) })
	row("Retry-After as an HTTP-date honoured", func(r LibResult) string { return retryAfterCell(r, r.RADate) })
	row("Retry-After: 3600 with 2 s left", func(r LibResult) string {
		if !r.Library.Retries {
			return "n/a"
		}
		return r.RALong.LongVerdict()
	})
	row("body replay: 1 KiB POST, 503 then 200", func(r LibResult) string {
		switch {
		case !r.Library.Retries:
			return "n/a"
		case r.Replay.Attempts < 2:
			return "not retried"
		case r.Replay.Intact:
			return "intact"
		}
		return "damaged"
	})
	row("sends an Idempotency-Key", func(r LibResult) string {
		switch {
		case r.Replay.KeySent:
			return "yes, same on every attempt"
		case r.Replay.AnyKey:
			return "yes, but it changes"
		}
		return "no"
	})
	row(fmt.Sprintf("new TCP connections: %d requests, each a 503 with a 16 KiB body then 200", s.ReuseRequests), func(r LibResult) string {
		if !r.Library.Retries {
			return "n/a"
		}
		return fmt.Sprintf("%d (%d attempts)", r.Reuse.Conns, r.Reuse.Attempts)
	})
	row(fmt.Sprintf("server that ignores keys: duplicate effects of %d POSTs, every tenth reset after its effect (defaults)", s.IgnoredKeysRequests), func(r LibResult) string {
		return fmt.Sprintf("%d (%d failed)", r.IgnoredKeys.Duplicates, r.IgnoredKeys.Failed)
	})
	st := s.Storm
	offeredInOutage := st.Outage.Seconds() * float64(st.Rate)
	row(fmt.Sprintf("retry storm: attempts per request offered during the %v outage", st.Outage), func(r LibResult) string {
		return perRequest(float64(r.Storm.OutageAttempts(st.Outage)) / offeredInOutage)
	})
	row("retry storm: attempts per request over the whole run", func(r LibResult) string {
		return perRequest(float64(r.Storm.Total()) / float64(max(r.Storm.Requests, 1)))
	})
	row(fmt.Sprintf("retry storm: peak attempts/s (offered %d/s)", st.Rate), func(r LibResult) string {
		return fmt.Sprintf("%.0f", r.Storm.Peak())
	})
	row("retry storm: requests that succeeded", func(r LibResult) string {
		return fmt.Sprintf("%d of %d", r.Storm.Succeeded, r.Storm.Requests)
	})
	row("retry storm: time taken by requests offered after the recovery, p50 / p99", func(r LibResult) string {
		return fmt.Sprintf("%s / %s", latency(r.Storm.AfterQuantile(0.5)), latency(r.Storm.AfterQuantile(0.99)))
	})
	slowStormRows(row, "retry storm", "requests", s.SlowStorm, func(r LibResult) StormResult { return r.SlowStorm })
	stormRows(row, "flapping service", s.Flap, func(r LibResult) StormResult { return r.Flap })
	stormRows(row, "brownout", s.Brownout, func(r LibResult) StormResult { return r.Brownout })
	row("two hosts, one down: the healthy host's requests that succeeded", func(r LibResult) string {
		h := r.TwoHosts.Healthy
		return fmt.Sprintf("%d of %d (%.1f%%)", h.Succeeded, h.Requests, 100*float64(h.Succeeded)/float64(max(h.Requests, 1)))
	})
	row("two hosts, one down: attempts per request to the down host", func(r LibResult) string {
		d := r.TwoHosts.Down
		return perRequest(float64(d.Attempts) / float64(max(d.Requests, 1)))
	})
	cl := s.ClosedLoop
	row(fmt.Sprintf("closed loop, %d callers, connections cut now and then: time for %d calls (succeeded)", cl.Callers, cl.Calls), func(r LibResult) string {
		return closedLoopCell(r.ClosedLoop)
	})
	overloadRows(row, s.Overload, "defaults", func(r LibResult) OverloadResult { return r.OverloadDefaults })
	overloadRows(row, s.Overload, "4-attempt policy", func(r LibResult) OverloadResult { return r.OverloadPolicy })
	if s.Queueing.Rate > 0 {
		overloadRows(row, s.Queueing, "defaults", func(r LibResult) OverloadResult { return r.Queueing })
	}
	if len(res.Libs) > 0 && isOursName(res.Libs[0].Library.Name) {
		writeTimeline(&b, "exactlyonce against the finite-capacity server, defaults", res.Libs[0].OverloadDefaults)
		if s.Queueing.Rate > 0 {
			writeTimeline(&b, "exactlyonce against the server that queues without bound, defaults", res.Libs[0].Queueing)
		}
	}
	writeNotes(&b, res)
	_, err := io.WriteString(w, b.String())
	return err
}

// stormRows adds the rows of a flapping or brownout storm: successes,
// attempts per request over the bad period, peak rate.
func stormRows(row func(string, func(LibResult) string), name string, st StormConfig, of func(LibResult) StormResult) {
	offered := st.Outage.Seconds() * float64(st.Rate)
	row(name+": requests that succeeded", func(r LibResult) string {
		res := of(r)
		return fmt.Sprintf("%d of %d (%.1f%%)", res.Succeeded, res.Requests, 100*float64(res.Succeeded)/float64(max(res.Requests, 1)))
	})
	row(fmt.Sprintf("%s: attempts per request offered during the %v bad period", name, st.Outage), func(r LibResult) string {
		return perRequest(float64(of(r).OutageAttempts(st.Outage)) / offered)
	})
	row(fmt.Sprintf("%s: peak attempts/s (offered %d/s)", name, st.Rate), func(r LibResult) string {
		return fmt.Sprintf("%.0f", of(r).Peak())
	})
}

// slowStormRows adds the rows of the outage storm against a service that
// takes its time (none when st has no Rate): successes, peak rate and the
// time taken by the calls (what says "requests" or "calls") offered after
// the recovery.
func slowStormRows[R any](row func(string, func(R) string), name, what string, st StormConfig, of func(R) StormResult) {
	if st.Rate == 0 {
		return
	}
	name = fmt.Sprintf("%s, service taking %v-%v: ", name, st.ServiceTime, st.ServiceTime+st.ServiceSpread)
	row(name+what+" that succeeded", func(r R) string {
		res := of(r)
		return fmt.Sprintf("%d of %d (%.1f%%)", res.Succeeded, res.Requests, 100*float64(res.Succeeded)/float64(max(res.Requests, 1)))
	})
	row(fmt.Sprintf("%speak attempts/s (offered %d/s)", name, st.Rate), func(r R) string {
		return fmt.Sprintf("%.0f", of(r).Peak())
	})
	row(name+"time taken by "+what+" offered after the recovery, p50 / p99", func(r R) string {
		res := of(r)
		return fmt.Sprintf("%s / %s", latency(res.AfterQuantile(0.5)), latency(res.AfterQuantile(0.99)))
	})
}

// closedLoopCell tells how long the closed loop's calls took and how many
// succeeded, and, with riding through off, the same and the ratio.
func closedLoopCell(c ClosedLoopResult) string {
	cell := fmt.Sprintf("%s (%d)", latency(c.Took), c.Succeeded)
	if c.Off != nil {
		cell += fmt.Sprintf("; riding through off: %s (%d), %.1fx", latency(c.Off.Took), c.Off.Succeeded,
			float64(c.Took)/float64(max(c.Off.Took, 1)))
	}
	return cell
}

// overloadRows adds the rows of the overload scenario run with one policy:
// successes before, during and after the trigger, time to recover, load
// and wasted work.
func overloadRows[R any](row func(string, func(R) string), ov OverloadConfig, policy string, of func(R) OverloadResult) {
	name := serverName(ov) + " slowed x" + fmt.Sprint(ov.Slowdown) + " for " + ov.Trigger.String() + ", " + policy
	row(name+": succeeded before / during / after the slowdown", func(r R) string {
		o := of(r)
		return fmt.Sprintf("%.0f%% / %.0f%% / %.0f%%", 100*o.Before(), 100*o.During(), 100*o.After())
	})
	row(name+": time to recover (95% succeeding, and staying)", func(r R) string {
		d, ok := of(r).Recovery()
		if !ok {
			return "never"
		}
		return d.Round(ov.Bucket).String()
	})
	row(fmt.Sprintf("%s: attempts per request; peak attempts/s (offered %d/s)", name, ov.Rate), func(r R) string {
		o := of(r)
		return fmt.Sprintf("%.2f; %.0f", o.AttemptsPerRequest(), o.PeakRate())
	})
	row(fmt.Sprintf("%s: peak attempts/s from the slowdown on, per %v (capacity %.0f/s)", name, peakWidth, ov.Capacity()), func(r R) string {
		o := of(r)
		return fmt.Sprintf("%.0f (%.2fx)", o.PeakRateFrom(o.TriggerAt, peakWidth), o.PeakRateFrom(o.TriggerAt, peakWidth)/ov.Capacity())
	})
	row(name+": the server's work nobody waited for", func(r R) string {
		return fmt.Sprintf("%.0f%%", 100*of(r).WastedShare())
	})
	row(name+": outages taken (times taken as overloaded)", func(r R) string {
		o := of(r)
		if o.Outages < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%d (%d)", o.Outages, o.Overloads)
	})
}

// peakWidth is the span over which the peak rate of attempts after a
// slowdown began is taken.
const peakWidth = 500 * time.Millisecond

// serverName names the overload scenario's server.
func serverName(ov OverloadConfig) string {
	if ov.Unbounded {
		return "server that queues without bound"
	}
	return "finite-capacity server"
}

// writeTimeline writes an overload run of one client as a table: per
// peakWidth, the requests offered then that succeeded and the attempts
// that reached the server then.
func writeTimeline(b *strings.Builder, title string, r OverloadResult) {
	n := max(int(peakWidth/r.Bucket), 1)
	if len(r.Offered) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s, per %v:\n\n| from (s) |", title, peakWidth)
	for i := 0; i < len(r.Offered); i += n {
		fmt.Fprintf(b, " %.1f |", (time.Duration(i) * r.Bucket).Seconds())
	}
	b.WriteString("\n|---|")
	for i := 0; i < len(r.Offered); i += n {
		b.WriteString("---|")
	}
	sum := func(xs []int, i int) int {
		t := 0
		for _, x := range xs[i:min(i+n, len(xs))] {
			t += x
		}
		return t
	}
	b.WriteString("\n| succeeded of offered |")
	for i := 0; i < len(r.Offered); i += n {
		fmt.Fprintf(b, " %d of %d |", sum(r.Succeeded, i), sum(r.Offered, i))
	}
	b.WriteString("\n| attempts at the server |")
	for i := 0; i < len(r.Offered); i += n {
		fmt.Fprintf(b, " %d |", sum(r.Attempts, i))
	}
	b.WriteString("\n")
}

// writeNotes explains how the figures were made.
func writeNotes(b *strings.Builder, res Results) {
	s := res.Settings
	st := s.Storm
	fmt.Fprintf(b, `
How the figures were made (loopback, %s in all):

- **Defaults**: each library as its constructor returns it (loggers off). sethvargo/go-retry has
  no default backoff, so its defaults are the 4-attempt policy. Outage with defaults: up to %d
  sequential requests, and %d callers with up to %d requests each, within a %v window and a %v
  deadline per request; a cell shows attempts per completed request and, in brackets, how many
  requests completed. A library whose default waits outlast the deadline is cut by it
  (cenkalti/backoff's default MaxElapsedTime is 15 min; avast/retry-go waits 0.1 s doubling, 10
  attempts; go-retryablehttp 1 s doubling, 5 attempts).
- **4-attempt policy**: 4 attempts in all, exponential backoff from %v capped at %v, with each
  library's own jitter; %d sequential requests, and %d callers with %d requests each, a %v
  deadline per request, within a minute.
- **exactlyonce** keeps its defaults in every row: a retry budget (20 tokens, then 0.1 token
  per success, at least 1 retry/s, and the tokens of retries that led to a success given back),
  and riding through outages: once a service fails 8 times in a row (or twice with the budget
  dry), requests to it wait, within their deadlines, while only a probe now and then goes out,
  and are released paced when it answers again. In a total outage a request therefore ends at
  its deadline while the outage is younger than 10 s (MaxWait), and at once after that.
- **Nested**: three services chained, each calling the next with the library under test, using
  the request's context; the innermost always answers 503. Ours wrap their handlers with
  pushback.Middleware. %d top-level requests, %d at a time. With defaults, peers that wait
  seconds between attempts were not run three deep (one top-level request would take minutes);
  their product of attempts is 5x5x5 = 125 (go-retryablehttp) and 10x10x10 = 1000
  (avast/retry-go).
- **Library cost**: one successful request with each library's defaults, the fastest of %d
  interleaved runs, next to a plain http.Client over the same base: net/http's own Transport (a
  clone of http.DefaultTransport) to a server on loopback, with and without a 5 s deadline on
  the request, and a custom in-memory RoundTripper that implements nothing of any library's.
  "go test -bench Cost -benchmem" in this module gives the same figures. The plain client's own
  cost is %.0f ns (GET) and %.0f ns (POST) on loopback, %.0f ns and %.0f ns in memory. A request
  without a deadline gets a timer of exactlyonce's per attempt (no attempt waits forever: 30 s
  for the response headers), a request with one does not.
  %s
- **Retry-After**: a GET answered 503 with the header, then 200; honoured when the second
  attempt came at least %v later. 3600 s with 2 s left: "returns at once" hands the 503 back,
  "sleeps till the deadline" waits out the caller's deadline, "ignores it" retries at once.
- **cenkalti/backoff, avast/retry-go, sethvargo/go-retry** are generic: their HTTP wrapper here
  is the operation their documentation shows (an error or a 429/5xx is retried; the failed
  response is closed, not drained, and Retry-After is not read).
- **Retry storm**: %d requests/s for %v to a service that answers 503 for the first %v; attempts
  counted at the service in %v buckets over %v; requests time out after %v; defaults. **Slow
  server**: the same storm against a service that takes %v to %v (by a fixed pseudo-random
  sequence) for each request it serves; it refuses at once during the outage.
- **Flapping service**: the same rate for %v, the service down %v and up %v in turn for the
  first %v. **Brownout**: the same rate for %v, %.0f%% of the attempts, by a fixed pseudo-random
  sequence, answered 503 for the first %v. Attempts "per request offered during the bad period"
  are the attempts the service saw then over the requests offered then: waiting requests sent
  after it count in the next period.
- **Two hosts**: one client (defaults) sends %d requests/s to each of two services for %v, with
  a %v deadline each: one answers 503 throughout, the other answers %.0f%% of its attempts, by a
  fixed pseudo-random sequence, with a 503 (blips worth retrying). A library with one budget per
  client must not let the dead service's failures cost the healthy one its retries.
- **Closed loop**: %d callers, each sending its next GET when its last one returned, %d calls in
  all, each with a %v deadline, to a server that takes %v per call and, after every %d attempts,
  closes the connections of the next %d without answering; defaults. Ours is run again with
  riding through off, and the cell gives the ratio of the two. Each library runs it %d times
  (ours with riding through on and off in turn) and the cell gives its run of median length: one
  run's length hangs on the backoff's jitter of a few unlucky calls.
- **Finite-capacity server** (a metastable failure: Bronson et al., HotOS 2021): %d workers of %v
  each and a queue of %d in front of them (a request that finds it full gets 503 at once); work
  goes on after its caller left. Open-loop arrivals, %d requests/s for %v, each with a %v
  deadline and a %v timeout per attempt (ours: WithAttemptTimeout; every other library that
  retries: a base transport that bounds each round trip, as an http.Client.Timeout does; the
  plain client has only the deadline). From %v to %v the service time is x%d. A request counts
  before, during or after by when it was offered; "time to recover" is from the slowdown's end
  to the first %v bucket from which 95%% of the requests offered succeed in every bucket; wasted
  work is what the server finished for callers that had gone.
%s`, res.Took.Round(time.Second),
		s.DefaultsRequests, s.Callers, s.CallerRequests, s.DefaultsWindow, s.DefaultsRequestTimeout,
		PolicyBase, PolicyCap, s.PolicyRequests, s.Callers, s.CallerRequests, s.PolicyRequestTimeout,
		s.NestedRequests, s.NestedCallers, costRounds, plainCost(res, 0), plainCost(res, 1), plainCost(res, 4), plainCost(res, 5), boundedNote(res), retryAfterHonoured,
		st.Rate, st.Offer, st.Outage, st.Bucket, st.Window, st.RequestTimeout,
		s.SlowStorm.ServiceTime, s.SlowStorm.ServiceTime+s.SlowStorm.ServiceSpread,
		s.Flap.Offer, s.Flap.FlapPeriod/2, s.Flap.FlapPeriod/2, s.Flap.Outage,
		s.Brownout.Offer, 100*s.Brownout.BrownoutRate, s.Brownout.Outage,
		s.TwoHosts.Rate, s.TwoHosts.Offer, s.TwoHosts.RequestTimeout, 100*s.TwoHosts.BlipRate,
		s.ClosedLoop.Callers, s.ClosedLoop.Calls, s.ClosedLoop.RequestTimeout, s.ClosedLoop.ServiceTime, s.ClosedLoop.CutEvery, s.ClosedLoop.CutLength, max(s.ClosedLoop.Runs, 1),
		s.Overload.Workers, s.Overload.ServiceTime, s.Overload.Queue, s.Overload.Rate, s.Overload.Offer,
		s.Overload.RequestTimeout, s.Overload.AttemptTimeout, s.Overload.TriggerAt, s.Overload.triggerEnd(),
		s.Overload.Slowdown, s.Overload.Bucket, queueingNote(s.Queueing))
}

// queueingNote tells how the server that queues without bound was run.
func queueingNote(q OverloadConfig) string {
	if q.Rate == 0 {
		return ""
	}
	return fmt.Sprintf(`- **Server that queues without bound**: the same %d workers of %v, the same load and slowdown,
  behind one queue with no bound, served in order of arrival (as Go's net/http, which gives every
  request a goroutine, does); its workers never watch the request's context, and it answers 503
  without work only to a request that waited over %v for a worker. Defaults. "Outages taken" is
  how many times ours took the server as down (and, in brackets, as overloaded: answering slower
  than when it was healthy); other clients do not tell. The peak is taken over %v from the
  slowdown's start on, against the server's capacity (%.0f/s).
`, q.Workers, q.ServiceTime, q.MaxQueueWait, peakWidth, q.Capacity())
}

// isOursName reports whether a library of the tables is ours.
func isOursName(name string) bool { return strings.HasPrefix(name, "exactlyonce") }

func defaultsCell(r LibResult, o OutageResult) string {
	if !r.Library.HasDefaults {
		return "n/a (no defaults)"
	}
	return fmt.Sprintf("%s (%d)", perRequest(o.PerRequest()), o.Requests)
}

// latency writes d in milliseconds, with a decimal under 10 ms.
func latency(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 10 {
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

func perRequest(v float64) string {
	return fmt.Sprintf("%.2f", v)
}

func costCell(c, plain Cost) string {
	if plain.NsPerOp == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1fx (%+d)", c.NsPerOp/plain.NsPerOp, c.AllocsPerOp-plain.AllocsPerOp)
}

func retryAfterCell(r LibResult, ra RetryAfterResult) string {
	switch {
	case !r.Library.Retries:
		return "n/a"
	case ra.Honoured():
		return fmt.Sprintf("yes (%.1f s)", ra.Gap.Seconds())
	case ra.Attempts >= 2:
		return fmt.Sprintf("no (%.2f s)", ra.Gap.Seconds())
	}
	return "no retry"
}

// plainCost is the plain client's time per request in CostCases[i].
func plainCost(res Results, i int) float64 {
	if p := plainOf(res); i < len(p.Costs) {
		return p.Costs[i].NsPerOp
	}
	return 0
}

// plainOf returns the plain client's results.
func plainOf(res Results) LibResult {
	for _, r := range res.Libs {
		if !r.Library.Retries {
			return r
		}
	}
	return LibResult{}
}

// boundedNote compares exactlyonce without a deadline, which bounds every
// attempt itself, with the plain client whose requests carry a deadline:
// what a caller pays to bound a request by hand. Empty when costs were
// not measured.
func boundedNote(res Results) string {
	plain := plainOf(res)
	var ours LibResult
	for _, r := range res.Libs {
		if r.Library.Name == "exactlyonce" {
			ours = r
		}
	}
	if len(plain.Costs) < len(CostCases) || len(ours.Costs) < len(CostCases) {
		return ""
	}
	// vs is ours without a deadline against plain with one; added is what
	// the deadline adds to the plain client's allocations.
	vs := func(method string, loopback bool) string {
		return costCell(ours.Costs[costIndex(method, loopback, false)], plain.Costs[costIndex(method, loopback, true)])
	}
	added := func(loopback bool) int64 {
		return plain.Costs[costIndex(http.MethodGet, loopback, true)].AllocsPerOp -
			plain.Costs[costIndex(http.MethodGet, loopback, false)].AllocsPerOp
	}
	return fmt.Sprintf(`Against the plain client bounding each request by hand (the same requests
  with a 5 s deadline, which cost it %+d allocations for a GET on loopback and %+d in memory),
  exactlyonce without a deadline costs %s (GET) and %s (POST, which it also keys) on loopback,
  %s and %s in memory.`,
		added(true), added(false), vs(http.MethodGet, true), vs(http.MethodPost, true),
		vs(http.MethodGet, false), vs(http.MethodPost, false))
}

// costIndex is the index in CostCases of the case with method, over
// loopback or in memory, with a deadline or without.
func costIndex(method string, loopback, deadline bool) int {
	for i, cc := range CostCases {
		if cc.Method == method && cc.Loopback == loopback && cc.Deadline == deadline {
			return i
		}
	}
	panic("bench: no cost case " + method)
}
