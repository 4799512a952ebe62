package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// With -cut, our consumers reach each broker through a proxy that drops
// every connection cutsPerRun times mid-run: they ride it through, and
// ship every order once, none lost or dead-lettered, on both brokers.
func TestDemoCut(t *testing.T) {
	cfg := defaultConfig()
	cfg.Orders = 400
	cfg.Seed = 3
	cfg.Outage = time.Second
	cfg.Cut = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	rs, err := run(ctx, cfg, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if len(rs) != 2 {
		t.Fatalf("got %d results, want our consumer on each broker", len(rs))
	}
	for _, r := range rs {
		if r.Consumer != kindOurs.String() {
			t.Errorf("%s: -cut ran %s", r.Broker, r.Consumer)
		}
		if !r.Settled || r.Effects != cfg.Orders || r.Duplicates != 0 || r.Lost != 0 || r.DeadLettered != 0 {
			t.Errorf("%s = %+v; want every order shipped once, none lost or dead-lettered", r.Broker, r)
		}
		if r.Cuts != cutsPerRun {
			t.Errorf("%s: the proxy cut the connections %d times, want %d", r.Broker, r.Cuts, cutsPerRun)
		}
		if r.Reconnects < 1 {
			t.Errorf("%s: our consumers counted no reconnect", r.Broker)
		}
	}
	if out := stdout.String(); !strings.Contains(out, "every consumer connection cut") {
		t.Errorf("the table does not say the connections were cut:\n%s", out)
	}
}
