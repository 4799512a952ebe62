package main

import (
	"fmt"
	"io"
	"log"
	"text/tabwriter"
	"time"
)

// writeTable writes the results as an aligned table.
func writeTable(w io.Writer, rs []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tcharges requested\texecuted\tduplicates\tattempts sent\tfailures\tfaults (drop/reset)\ttime\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d/%d\t%v\t\n", r.Client, r.Requested, r.Executed, r.Duplicates,
			r.Attempts, r.Failures, r.Drops, r.Resets, r.Elapsed.Round(10*time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintln(w, "executed: charges the service performed, duplicates included; attempts sent: requests that reached the proxy.")
}

// quietLog discards the servers' own log lines (the proxy's resets make
// the service and proxy log broken connections on purpose).
func quietLog() *log.Logger {
	return log.New(io.Discard, "", 0)
}
