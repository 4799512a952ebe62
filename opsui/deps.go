package opsui

import (
	"fmt"
	"html/template"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/exactlyonce/retry"
)

// keptSamples is how many samples of each dependency the chart shows.
const keptSamples = 60

// sampleEvery is the least time between two samples: the page samples the
// clients when it is viewed, at most once a sampleEvery.
const sampleEvery = time.Second

// Dependency is one dependency of a client as the page shows it.
type Dependency struct {
	Client string `json:"client"`
	// Name is the host or target; the fields below are those of
	// retry.DependencyStats.
	Name       string `json:"name"`
	State      string `json:"state"`
	Waiting    int    `json:"waiting"`
	Outages    uint64 `json:"outages"`
	Waited     uint64 `json:"waited"`
	Released   uint64 `json:"released"`
	Probes     uint64 `json:"probes"`
	Expired    uint64 `json:"expired"`
	Abandoned  uint64 `json:"abandoned"`
	Rejected   uint64 `json:"rejected"`
	FailedFast uint64 `json:"failed_fast"`
	// Recent are the samples the chart shows, oldest first.
	Recent []Sample `json:"recent"`
	// Chart is the chart of Recent, an inline SVG.
	Chart template.HTML `json:"-"`
}

// Sample is what changed in one interval between two samples of a
// dependency.
type Sample struct {
	At    time.Time `json:"at"`
	State string    `json:"state"`
	// Waiting is the number of requests waiting when it was taken.
	Waiting int `json:"waiting"`
	// Released counts the waits released by a recovery in the interval;
	// Failed, the requests that failed waiting or at once (expired,
	// rejected, failed fast).
	Released uint64 `json:"released"`
	Failed   uint64 `json:"failed"`
}

// Budget is one client's retry budget.
type Budget struct {
	Client string `json:"client"`
	// The fields of retry.BudgetStats.
	Tokens          float64 `json:"tokens"`
	Capacity        float64 `json:"capacity"`
	Requests        uint64  `json:"requests"`
	Successes       uint64  `json:"successes"`
	RetriesAllowed  uint64  `json:"retries_allowed"`
	FloorAllowed    uint64  `json:"floor_allowed"`
	RetriesDenied   uint64  `json:"retries_denied"`
	RetriesRefunded uint64  `json:"retries_refunded"`
}

// ConsumerStats are one consumer's counts.
type ConsumerStats struct {
	Name string `json:"name"`
	// The fields of consumer.Stats.
	Executed   uint64 `json:"executed"`
	Duplicates uint64 `json:"duplicates"`
	InProgress uint64 `json:"in_progress"`
	Retried    uint64 `json:"retried"`
	Held       uint64 `json:"held"`
	Parked     uint64 `json:"parked"`
	Terminated uint64 `json:"terminated"`
	Outages    uint64 `json:"outages"`
	Reconnects uint64 `json:"reconnects"`
}

// sampler keeps the recent samples of every dependency of the clients.
type sampler struct {
	clk clock.Clock
	mu  sync.Mutex
	// last is when the last samples were taken; series, per client and
	// dependency, the kept samples and the counters of the last.
	last   time.Time
	series map[[2]string]*series
}

type series struct {
	samples []Sample
	prev    retry.DependencyStats
}

func newSampler(clk clock.Clock) *sampler {
	return &sampler{clk: clk, series: map[[2]string]*series{}}
}

// dependencies samples the clients (unless it did a moment ago) and
// returns their dependencies with their charts.
func (s *sampler) dependencies(clients []Client) []Dependency {
	now := s.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	take := s.last.IsZero() || now.Sub(s.last) >= sampleEvery
	if take {
		s.last = now
	}
	var out []Dependency
	for _, c := range clients {
		if c.Dependencies == nil {
			continue
		}
		for _, st := range c.Dependencies() {
			k := [2]string{c.Name, st.Name}
			sr := s.series[k]
			if sr == nil {
				sr = &series{prev: st}
				s.series[k] = sr
			}
			if take {
				sr.samples = append(sr.samples, Sample{
					At: now.UTC(), State: st.State, Waiting: st.Waiting,
					Released: st.Released - sr.prev.Released,
					Failed: (st.Expired + st.Rejected + st.FailedFast) -
						(sr.prev.Expired + sr.prev.Rejected + sr.prev.FailedFast),
				})
				if len(sr.samples) > keptSamples {
					sr.samples = sr.samples[len(sr.samples)-keptSamples:]
				}
				sr.prev = st
			}
			recent := append([]Sample(nil), sr.samples...)
			out = append(out, Dependency{Client: c.Name, Name: st.Name, State: st.State, Waiting: st.Waiting,
				Outages: st.Outages, Waited: st.Waited, Released: st.Released, Probes: st.Probes, Expired: st.Expired,
				Abandoned: st.Abandoned, Rejected: st.Rejected, FailedFast: st.FailedFast,
				Recent: recent, Chart: chart(recent)})
		}
	}
	return out
}

// Chart geometry, in SVG units.
const (
	chartW, chartH = 240.0, 64.0
	barSlot        = chartW / keptSamples
)

// chart draws samples as an inline SVG: a band for each interval the
// dependency was down (grey) or recovering (amber), bars of released
// waits (green, up from the middle) and failures (red, down from it), and
// a line of the requests waiting (blue). Only numbers go into it.
func chart(samples []Sample) template.HTML {
	var maxBar uint64 = 1
	maxWait := 1
	for _, s := range samples {
		maxBar = max(maxBar, s.Released, s.Failed)
		maxWait = max(maxWait, s.Waiting)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="recent outcomes and waits" xmlns="http://www.w3.org/2000/svg">`, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%g" height="%g" class="bg"/>`, chartW, chartH)
	mid := chartH / 2
	off := chartW - barSlot*float64(len(samples))
	var line []string
	for i, s := range samples {
		x := off + barSlot*float64(i)
		switch s.State {
		case "down":
			fmt.Fprintf(&b, `<rect x="%.1f" y="0" width="%.1f" height="%g" class="down"/>`, x, barSlot, chartH)
		case "recovering":
			fmt.Fprintf(&b, `<rect x="%.1f" y="0" width="%.1f" height="%g" class="recovering"/>`, x, barSlot, chartH)
		}
		if s.Released > 0 {
			h := (mid - 2) * float64(s.Released) / float64(maxBar)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="ok"/>`, x+0.5, mid-h, barSlot-1, h)
		}
		if s.Failed > 0 {
			h := (mid - 2) * float64(s.Failed) / float64(maxBar)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%g" width="%.1f" height="%.1f" class="fail"/>`, x+0.5, mid, barSlot-1, h)
		}
		y := chartH - 2 - (chartH-4)*float64(s.Waiting)/float64(maxWait)
		line = append(line, fmt.Sprintf("%.1f,%.1f", x+barSlot/2, y))
	}
	fmt.Fprintf(&b, `<line x1="0" y1="%g" x2="%g" y2="%g" class="axis"/>`, mid, chartW, mid)
	if len(line) > 0 {
		fmt.Fprintf(&b, `<polyline points="%s" class="wait"/>`, strings.Join(line, " "))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and fixed text only
}

func budgets(clients []Client) []Budget {
	var out []Budget
	for _, c := range clients {
		if c.Budget != nil {
			st := c.Budget.Stats()
			out = append(out, Budget{Client: c.Name, Tokens: st.Tokens, Capacity: st.Capacity, Requests: st.Requests,
				Successes: st.Successes, RetriesAllowed: st.RetriesAllowed, FloorAllowed: st.FloorAllowed,
				RetriesDenied: st.RetriesDenied, RetriesRefunded: st.RetriesRefunded})
		}
	}
	return out
}

func consumers(cs []Consumer) []ConsumerStats {
	var out []ConsumerStats
	for _, c := range cs {
		if c.Stats != nil {
			st := c.Stats()
			out = append(out, ConsumerStats{Name: c.Name, Executed: st.Executed, Duplicates: st.Duplicates,
				InProgress: st.InProgress, Retried: st.Retried, Held: st.Held, Parked: st.Parked,
				Terminated: st.Terminated, Outages: st.Outages, Reconnects: st.Reconnects})
		}
	}
	return out
}
