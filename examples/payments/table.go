package main

import (
	"fmt"
	"io"
	"log"
	"text/tabwriter"
	"time"
)

// writeTable writes the results as an aligned table; crash adds the column
// stuck and a line per client on the crash.
func writeTable(w io.Writer, rs []result, crash bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	stuckHead := ""
	if crash {
		stuckHead = "stuck\t"
	}
	fmt.Fprintf(tw, "client\tcharges requested\texecuted\tduplicates\t%sattempts sent\tfailures\tfaults (drop/reset)\ttime\t\n", stuckHead)
	for _, r := range rs {
		stuck := ""
		if crash {
			stuck = fmt.Sprintf("%d\t", r.Stuck)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s%d\t%d\t%d/%d\t%v\t\n", r.Client, r.Requested, r.Executed, r.Duplicates,
			stuck, r.Attempts, r.Failures, r.Drops, r.Resets, r.Elapsed.Round(10*time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintln(w, "executed: charges the service performed, duplicates included; attempts sent: requests that reached the proxy.")
	if !crash {
		return
	}
	fmt.Fprintln(w, "stuck: keyed requests still in progress in the store at the end.")
	for _, r := range rs {
		if !r.Crashed {
			fmt.Fprintf(w, "crash, %s: none (no charge was made after a third of them were requested)\n", r.Client)
			continue
		}
		fmt.Fprintf(w, "crash, %s: killed at charge %d with %s in flight; finished by the reconciler %d, by client retries %d; stuck %d; provider deduplications %d\n",
			r.Client, r.KilledAt, plural(r.CrashedInFlight, "request"), r.Reconciled, r.TakenOver, r.Stuck, r.Deduplicated)
	}
	fmt.Fprintln(w, "in flight: requests the killed service stopped in its handlers; finished: executions it left in progress")
	fmt.Fprintln(w, "(claims it cut short included), taken over and completed; provider deduplications: charges sent again with their key.")
}

// plural returns n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// quietLog discards the servers' own log lines (the proxy's resets make
// the service and proxy log broken connections on purpose).
func quietLog() *log.Logger {
	return log.New(io.Discard, "", 0)
}
