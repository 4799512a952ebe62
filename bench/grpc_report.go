package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteGRPCMarkdown writes the gRPC results as Markdown: one table with a
// column per gRPC client, then notes on how the figures were made.
func WriteGRPCMarkdown(w io.Writer, res GRPCResults) error {
	var b strings.Builder
	writeGRPCMarkdown(&b, res)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeGRPCMarkdown writes the gRPC table to b.
func writeGRPCMarkdown(b *strings.Builder, res GRPCResults) {
	s := res.Settings
	b.WriteString("| scenario |")
	for _, r := range res.Libs {
		fmt.Fprintf(b, " %s |", r.Library.Name)
	}
	b.WriteString("\n|---|")
	for range res.Libs {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	row := func(name string, cell func(r GRPCLibResult) string) {
		fmt.Fprintf(b, "| %s |", name)
		for _, r := range res.Libs {
			fmt.Fprintf(b, " %s |", cell(r))
		}
		b.WriteString("\n")
	}
	row("total outage, attempts per call, 4-attempt policy, sequential", func(r GRPCLibResult) string {
		return fmt.Sprintf("%s (%d)", perRequest(r.OutageSeq.PerRequest()), r.OutageSeq.Requests)
	})
	row(fmt.Sprintf("same, %d concurrent callers", s.Callers), func(r GRPCLibResult) string {
		return fmt.Sprintf("%s (%d)", perRequest(r.OutageCon.PerRequest()), r.OutageCon.Requests)
	})
	row("sends an idempotency key", func(r GRPCLibResult) string {
		if strings.HasPrefix(r.Library.Name, "exactlyonce") {
			return "yes, same on every attempt (methods not declared idempotent)"
		}
		return "no"
	})
	row(fmt.Sprintf("demo's faults (%.0f%% answers lost after the charge, %.0f%% calls refused before): charges performed for %d requested",
		100*s.Drop, 100*s.Reset, s.Charges), func(r GRPCLibResult) string {
		d := r.Duplicates
		return fmt.Sprintf("%d: %d duplicates (%d attempts, %d failed)", d.Executed, d.Duplicates, d.Attempts, d.Failures)
	})
	st := s.Storm
	offered := st.Outage.Seconds() * float64(st.Rate)
	row("retry storm: calls that succeeded", func(r GRPCLibResult) string {
		return fmt.Sprintf("%d of %d (%.1f%%)", r.Storm.Succeeded, r.Storm.Requests, 100*float64(r.Storm.Succeeded)/float64(max(r.Storm.Requests, 1)))
	})
	row(fmt.Sprintf("retry storm: attempts per call offered during the %v outage", st.Outage), func(r GRPCLibResult) string {
		return perRequest(float64(r.Storm.OutageAttempts(st.Outage)) / offered)
	})
	row("retry storm: attempts per call over the whole run", func(r GRPCLibResult) string {
		return perRequest(float64(r.Storm.Total()) / float64(max(r.Storm.Requests, 1)))
	})
	row(fmt.Sprintf("retry storm: peak attempts/s (offered %d/s)", st.Rate), func(r GRPCLibResult) string {
		return fmt.Sprintf("%.0f", r.Storm.Peak())
	})
	row("retry storm: time taken by calls made after the recovery, p50 / p99", func(r GRPCLibResult) string {
		return fmt.Sprintf("%s / %s", latency(r.Storm.AfterQuantile(0.5)), latency(r.Storm.AfterQuantile(0.99)))
	})
	slowStormRows(row, "retry storm", "calls", s.SlowStorm, func(r GRPCLibResult) StormResult { return r.SlowStorm })
	if cl := s.ClosedLoop; cl.Calls > 0 {
		row(fmt.Sprintf("closed loop, %d callers, calls cut now and then: time for %d calls (succeeded)", cl.Callers, cl.Calls), func(r GRPCLibResult) string {
			return closedLoopCell(r.ClosedLoop)
		})
	}
	if s.Overload.Rate > 0 {
		overloadRows(row, s.Overload, "attempt timeouts like for like", func(r GRPCLibResult) OverloadResult { return r.Overload })
	}
	if s.Queueing.Rate > 0 {
		overloadRows(row, s.Queueing, "attempt timeouts like for like", func(r GRPCLibResult) OverloadResult { return r.Queueing })
	}
	bare := bareGRPC(res)
	if s.Cost && len(bare.Costs) > 0 {
		for j, cc := range GRPCCostCases {
			row("cost, "+cc.Name+", loopback: time vs grpc-go without retry (allocations added)", func(r GRPCLibResult) string {
				cell := costCell(r.Costs[j], bare.Costs[j])
				if cc.Keyed && strings.HasPrefix(r.Library.Name, "exactlyonce") && len(res.FloorCosts) > j {
					// A keyed call is deduplicated by the server: compare
					// it with a client that sends a key too.
					cell += "; vs the key-by-hand floor: " + costCell(r.Costs[j], res.FloorCosts[j])
				}
				return cell
			})
		}
	}
	if len(res.Libs) > 0 && isOursName(res.Libs[0].Library.Name) {
		if s.Overload.Rate > 0 {
			writeTimeline(b, "exactlyonce (grpcretry) against the finite-capacity server", res.Libs[0].Overload)
		}
		if s.Queueing.Rate > 0 {
			writeTimeline(b, "exactlyonce (grpcretry) against the server that queues without bound", res.Libs[0].Queueing)
		}
	}
	fmt.Fprintf(b, `
How the gRPC figures were made (loopback TCP, one process, a real grpc.Server with grpcretry's server
interceptor in front of the service, keys optional so that every client is served):

- **Policies**: ours with its defaults (4 attempts, full jitter from 100 ms, the retry budget,
  riding through outages); grpc-go's built-in retry with a retryPolicy of 4 attempts listing
  UNAVAILABLE, backoff from 100 ms doubling, and retryThrottling (10 tokens, ratio 0.1);
  go-grpc-middleware's retry interceptor with WithMax(4) (its default is no retry), its default
  codes and exponential backoff from 100 ms with 10%% jitter. One connection per client.
- **Total outage**: the service answers every call UNAVAILABLE; %d sequential Charge calls, and
  %d callers with %d calls each, each call with a %v deadline; attempts counted at the service
  per call (in brackets, the calls made).
- **Demo's faults**: %d Charge calls from %d callers; %.0f%% of the calls answered UNAVAILABLE
  after the service charged (the answer lost), %.0f%% before (never reached it), chosen by a hash
  of the seed, the request and how often the service saw it, so every client meets the same faults.
- **Retry storm**: GetCharge (NO_SIDE_EFFECTS) at %d calls/s for %v to a service that answers
  UNAVAILABLE for the first %v; attempts counted at the service in %v buckets over %v; calls time
  out after %v.
- **Cost**: one successful unary call, the fastest of %d interleaved runs, client and server in
  one process (server allocations included), next to the same call through a bare grpc-go client.
  "grpc-go, key added by hand" (a bare client whose interceptor appends a constant key to the
  metadata, the least any client sending a key costs) measured %s.
`, s.OutageCalls, s.Callers, s.CallerCalls, s.OutageTimeout, s.Charges, s.Concurrency, 100*s.Drop, 100*s.Reset,
		st.Rate, st.Offer, st.Outage, st.Bucket, st.Window, st.RequestTimeout, grpcCostRounds, keyFloorNote(res))
	writeGRPCScenarioNotes(b, s)
}

// writeGRPCScenarioNotes tells how the slow storm, the closed loop and the
// finite-capacity server were run over gRPC.
func writeGRPCScenarioNotes(b *strings.Builder, s GRPCSettings) {
	if st := s.SlowStorm; st.Rate > 0 {
		fmt.Fprintf(b, `- **Retry storm, slow server**: the same storm against a service that takes %v to %v (by a
  fixed pseudo-random sequence) for each call it serves; it refuses at once during the outage.
`, st.ServiceTime, st.ServiceTime+st.ServiceSpread)
	}
	if cl := s.ClosedLoop; cl.Calls > 0 {
		fmt.Fprintf(b, `- **Closed loop**: %d callers, each making its next GetCharge call when its last one returned,
  %d calls in all, each with a %v deadline, to a service that takes %v per call. The cuts are
  made by an interceptor in front of the service: after every %d attempts it answers the next %d
  UNAVAILABLE at once (what a call gets when its connection is lost under it), so that no
  library meets grpc-go's reconnection backoff, which a proxy resetting connections would add.
  Each client with its policy above; ours again with riding through off, and the ratio of the two;
  the run of median length of %d, as in the HTTP table.
`, cl.Callers, cl.Calls, cl.RequestTimeout, cl.ServiceTime, cl.CutEvery, cl.CutLength, max(cl.Runs, 1))
	}
	if ov := s.Overload; ov.Rate > 0 {
		fmt.Fprintf(b, `- **Finite-capacity server**: the HTTP scenario's server (the same pool of %d workers of %v and a
  queue of %d; work goes on after its caller left) behind an interceptor that answers UNAVAILABLE
  at once when the queue is full. Open-loop GetCharge calls, %d/s for %v, each with a %v deadline;
  from %v to %v the service time is x%d. Each attempt is bounded by %v where a client can set
  it: ours through grpcretry.NewClient(retry.WithAttemptTimeout), go-grpc-middleware through
  WithPerRetryTimeout (an attempt that runs out of it is retried). grpc-go's retryPolicy has no
  attempt timeout (a call's deadline bounds all its attempts together), so it runs with the
  deadline only, as the bare client does. Each client with its policy above; the rows read as the
  HTTP table's.
`, ov.Workers, ov.ServiceTime, ov.Queue, ov.Rate, ov.Offer, ov.RequestTimeout, ov.TriggerAt, ov.triggerEnd(), ov.Slowdown, ov.AttemptTimeout)
	}
	if q := s.Queueing; q.Rate > 0 {
		fmt.Fprintf(b, `- **Server that queues without bound**: the same pool behind one queue with no bound, served in
  order of arrival, answering UNAVAILABLE without work only to a call that waited over %v for a
  worker; the same calls, slowdown and attempt timeouts. "Outages taken" and the peak read as in
  the HTTP table.
`, q.MaxQueueWait)
	}
}

// bareGRPC returns the bare client's results.
func bareGRPC(res GRPCResults) GRPCLibResult {
	for _, r := range res.Libs {
		if !r.Library.Retries {
			return r
		}
	}
	return GRPCLibResult{}
}

// keyFloorNote tells the cost of the key-by-hand floor in the keyed cases.
func keyFloorNote(res GRPCResults) string {
	bare := bareGRPC(res)
	floor := res.FloorCosts
	if len(floor) == 0 || len(bare.Costs) == 0 {
		return "(not run)"
	}
	var parts []string
	for j, cc := range GRPCCostCases {
		if cc.Keyed {
			parts = append(parts, fmt.Sprintf("%s for a Charge %s", costCell(floor[j], bare.Costs[j]), strings.TrimPrefix(cc.Name, "unary Charge (keyed by ours) ")))
		}
	}
	return strings.Join(parts, " and ")
}
