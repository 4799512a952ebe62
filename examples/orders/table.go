package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// writeTable writes one table per broker.
func writeTable(w io.Writer, cfg config, rs []result) {
	for i := 0; i < len(rs); {
		broker := rs[i].Broker
		fmt.Fprintf(w, "\n%s: %d orders (%d messages sent: the publisher's retries), %.0f%% of handler calls failing, warehouse down %v, one instance killed mid-handler, %s store%s\n",
			broker, rs[i].Published, rs[i].Copies, 100*cfg.Fail, cfg.Outage, cfg.Store, cutHeader(rs[i]))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "consumer\tpublished\teffects performed\tduplicates\tlost\tdead-lettered\ttime\t")
		for ; i < len(rs) && rs[i].Broker == broker; i++ {
			r := rs[i]
			elapsed := r.Elapsed.Round(10 * time.Millisecond).String()
			if !r.Settled {
				elapsed += " (unsettled)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.Consumer, r.Published, r.Effects, r.Duplicates, r.Lost, r.DeadLettered, elapsed)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\neffects performed: reservations the warehouse made, duplicates included; lost: orders never shipped and not dead-lettered;")
	fmt.Fprintln(w, "dead-lettered: orders the broker gave up on (RabbitMQ: its dead-letter queue; JetStream: dropped at MaxDeliver) or the consumer terminated.")
}

// plural returns n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
