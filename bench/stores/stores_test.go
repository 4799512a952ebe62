package stores

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// A quick run measures every store, and the table shows each.
func TestQuickRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := QuickSettings()
	res := Run(ctx, s, Backends(DefaultServers()), io.Discard)
	// Round trips of the store per request: a claim and a completion (and
	// for MySQL the claim's read before its write), one read per replay;
	// counted on warm connections, so a busy machine (which makes the pool
	// open new ones under load) changes nothing.
	trips := map[string]float64{"PostgreSQL": 2, "Redis": 2, "MySQL": 3}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Backend, r.Err)
		}
		if r.FirstPerSec <= 0 || r.ReplayPerSec <= 0 {
			t.Errorf("%s: %+v", r.Backend, r)
		}
		t.Logf("%s: %.2f round trips per first execution, %.2f per replay", r.Backend, r.FirstTrips, r.ReplayTrips)
		if want, ok := trips[r.Backend]; ok {
			if r.FirstTrips < want || r.FirstTrips > want+0.5 || r.ReplayTrips < 1 || r.ReplayTrips > 1.5 {
				t.Errorf("%s: round trips %.2f per first execution, %.2f per replay; want about %v and 1", r.Backend, r.FirstTrips, r.ReplayTrips, want)
			}
			if r.LimitPerSec <= 0 {
				t.Errorf("%s: no limit measured", r.Backend)
			}
		}
	}
	var md bytes.Buffer
	WriteMarkdown(&md, s, res, time.Second)
	for _, name := range []string{"memory", "PostgreSQL", "Redis", "MySQL", "pgbench"} {
		if !strings.Contains(md.String(), name) {
			t.Errorf("the table lacks %s:\n%s", name, md.String())
		}
	}
}
