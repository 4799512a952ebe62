package stores

import (
	"fmt"
	"io"
	"time"
)

// WriteMarkdown writes the results as a Markdown table, then how they were
// made.
func WriteMarkdown(w io.Writer, s Settings, res []Result, took time.Duration) {
	fmt.Fprintf(w, "| store | keyed requests/s through the Middleware, first executions | replays | round trips per first execution / per replay | the store's limit: claim+complete/s alone | first executions vs the limit | the machine's CPU busy: first executions / the limit |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, r := range res {
		if r.Err != nil {
			fmt.Fprintf(w, "| %s | failed: %v | | | | | |\n", r.Backend, r.Err)
			continue
		}
		trips, limit, ratio, busy := "0 / 0 (in memory)", "n/a", "n/a", busyCell(r.FirstBusy)
		if r.LimitHow != "" {
			trips = fmt.Sprintf("%.2f / %.2f", r.FirstTrips, r.ReplayTrips)
			limit = fmt.Sprintf("%.0f", r.LimitPerSec)
			ratio = fmt.Sprintf("%.2fx", r.Ratio())
			busy += " / " + busyCell(r.LimitBusy)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %s | %s | %s | %s |\n", r.Backend, r.FirstPerSec, r.ReplayPerSec, trips, limit, ratio, busy)
	}
	fmt.Fprintf(w, "\nHow the figures were made (loopback, %v in all, one run):\n\n", took.Round(time.Second))
	fmt.Fprintf(w, "- **Through the Middleware**: %d clients at once send keyed POSTs over loopback HTTP (keep-alive) to a\n", s.Clients)
	fmt.Fprintf(w, "  handler behind idempotency.Middleware that marks the start and answers 201; first executions use a\n")
	fmt.Fprintf(w, "  new key each, replays repeat %d completed keys. %d rounds of %v each for first executions, replays and\n", s.Replays, s.Rounds, s.Phase)
	fmt.Fprintf(w, "  the limit in turn, so that load from elsewhere on the machine weighs on all alike. Round trips are\n")
	fmt.Fprintf(w, "  counted on the store's connections over %d first executions, then %d replays, sent one after\n", s.Counted, s.Counted)
	fmt.Fprintf(w, "  another once the pool is warm (the pool's new connections and pings do not count).\n")
	fmt.Fprintf(w, "- **The limit**: the database alone serving the store's own claim and complete, at the same\n")
	fmt.Fprintf(w, "  concurrency, on the same server:\n")
	for _, r := range res {
		if r.LimitHow != "" {
			fmt.Fprintf(w, "  %s: %s;\n", r.Backend, r.LimitHow)
		}
	}
	fmt.Fprintf(w, "  the ratio is first executions through the Middleware over it.\n")
	fmt.Fprintf(w, "- **CPU busy**: the share of the whole machine's CPU time (every core, every process: the client,\n")
	fmt.Fprintf(w, "  the server and the database alike) that was not idle while the phase ran, from /proc/stat. Well\n")
	fmt.Fprintf(w, "  below 100%%, the phase waited on something other than the CPU.\n")
}

// busyCell renders a share of the machine's CPU.
func busyCell(share float64) string {
	if share < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*share)
}
