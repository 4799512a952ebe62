package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// chart geometry, in SVG user units.
const (
	chartW, chartH                       = 860, 460
	padLeft, padRight, padTop, padBottom = 70, 230, 40, 50
)

// chartColors is one colour per series, in order.
var chartColors = []string{"#d62728", "#7f7f7f", "#8c564b", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#e377c2"}

// Series is one line of the chart.
type Series struct {
	Name string
	// Points are (x, y) pairs in data units.
	X, Y []float64
}

// StormSeries turns one storm's results (of picks) into chart series:
// attempts per second at the middle of each bucket.
func StormSeries(res Results, of func(LibResult) StormResult) []Series {
	out := make([]Series, 0, len(res.Libs))
	for _, r := range res.Libs {
		st := of(r)
		s := Series{Name: r.Library.Name}
		for i := range st.Attempts {
			s.X = append(s.X, (time.Duration(i)*st.Bucket + st.Bucket/2).Seconds())
			s.Y = append(s.Y, st.PerSecond(i))
		}
		out = append(out, s)
	}
	return out
}

// WriteStormSVG draws the three storms, one panel each: attempts per second
// over time, one line per library, the bad period shaded.
func WriteStormSVG(w io.Writer, res Results) error {
	s := res.Settings
	panel := func(st StormConfig, title string, of func(LibResult) StormResult) LineChart {
		c := LineChart{
			Title: title, XLabel: "time (s)", YLabel: "attempts per second at the service",
			XMax: st.Window.Seconds(), ShadeLabel: "outage", Series: StormSeries(res, of),
		}
		switch st.Kind {
		case StormFlap:
			c.ShadeLabel = "down"
			for at := time.Duration(0); at < st.Outage; at += st.FlapPeriod {
				c.Shades = append(c.Shades, [2]float64{at.Seconds(), (at + st.FlapPeriod/2).Seconds()})
			}
		case StormBrownout:
			c.ShadeLabel = "brownout"
			c.Shades = [][2]float64{{0, st.Outage.Seconds()}}
		default:
			c.Shades = [][2]float64{{0, st.Outage.Seconds()}}
		}
		return c
	}
	return WriteLineCharts(w, []LineChart{
		panel(s.Storm, fmt.Sprintf("Outage: %d requests/s offered, service down for the first %v", s.Storm.Rate, s.Storm.Outage),
			func(r LibResult) StormResult { return r.Storm }),
		panel(s.Flap, fmt.Sprintf("Flapping: %d requests/s, down %v and up %v in turn for %v", s.Flap.Rate,
			s.Flap.FlapPeriod/2, s.Flap.FlapPeriod/2, s.Flap.Outage), func(r LibResult) StormResult { return r.Flap }),
		panel(s.Brownout, fmt.Sprintf("Brownout: %d requests/s, %.0f%% of attempts fail for %v", s.Brownout.Rate,
			100*s.Brownout.BrownoutRate, s.Brownout.Outage), func(r LibResult) StormResult { return r.Brownout }),
	})
}

// WriteLineCharts writes charts one above the other in one SVG document.
func WriteLineCharts(w io.Writer, charts []LineChart) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH*len(charts), chartW, chartH*len(charts))
	for i, c := range charts {
		var one strings.Builder
		if err := WriteLineChart(&one, c); err != nil {
			return err
		}
		inner := one.String()
		inner = inner[strings.Index(inner, "\n")+1 : strings.LastIndex(inner, "</svg>")]
		fmt.Fprintf(&b, `<g transform="translate(0,%d)">`+"\n%s</g>\n", i*chartH, inner)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// LineChart describes a chart: x from 0 to XMax, y from 0 to a rounded-up
// maximum of the data; Shades are x intervals drawn grey, the first
// labelled ShadeLabel.
type LineChart struct {
	Title, XLabel, YLabel string
	XMax                  float64
	Shades                [][2]float64
	ShadeLabel            string
	Series                []Series
}

// WriteLineChart writes c as a standalone SVG document.
func WriteLineChart(w io.Writer, c LineChart) error {
	yMax := 0.0
	for _, s := range c.Series {
		for _, y := range s.Y {
			yMax = math.Max(yMax, y)
		}
	}
	yMax, yStep := niceScale(yMax)
	xMax := c.XMax
	if xMax <= 0 {
		xMax = 1
	}
	plotW := float64(chartW - padLeft - padRight)
	plotH := float64(chartH - padTop - padBottom)
	px := func(x float64) float64 { return padLeft + x/xMax*plotW }
	py := func(y float64) float64 { return padTop + plotH - y/yMax*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", padLeft, html.EscapeString(c.Title))
	for i, sh := range c.Shades {
		if sh[1] <= sh[0] {
			continue
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%.1f" fill="#eeeeee"/>`+"\n",
			px(sh[0]), padTop, px(sh[1])-px(sh[0]), plotH)
		if i == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#666666">%s</text>`+"\n", px(sh[0])+6, padTop+16, html.EscapeString(c.ShadeLabel))
		}
	}
	// Grid and y ticks.
	for y := 0.0; y <= yMax+yStep/2; y += yStep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", padLeft, py(y), px(xMax), py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padLeft-6, py(y)+4, formatTick(y))
	}
	// x ticks, one per second (or coarser).
	xStep := math.Max(1, math.Ceil(xMax/12))
	for x := 0.0; x <= xMax+1e-9; x += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", px(x), py(0), px(x), py(0)+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(x), py(0)+18, formatTick(x))
	}
	// Axes and labels.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", padLeft, py(0), px(xMax), py(0))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="black"/>`+"\n", padLeft, padTop, padLeft, py(0))
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(xMax/2), chartH-10, html.EscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n",
		padTop+plotH/2, padTop+plotH/2, html.EscapeString(c.YLabel))
	// Lines, the first series drawn last so that it is on top, and legend.
	for i := len(c.Series) - 1; i >= 0; i-- {
		s := c.Series[i]
		color := chartColors[i%len(chartColors)]
		var pts strings.Builder
		for j := range s.X {
			if j > 0 {
				pts.WriteByte(' ')
			}
			fmt.Fprintf(&pts, "%.1f,%.1f", px(s.X[j]), py(s.Y[j]))
		}
		width := 1.5
		if i == 0 {
			width = 3
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" points="%s"/>`+"\n", color, width, pts.String())
		ly := padTop + 10 + 20*i
		lx := chartW - padRight + 20
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%.1f"/>`+"\n", lx, ly, lx+24, ly, color, width)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+30, ly+4, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceScale rounds max up to a multiple of a 1-2-5 step giving about five
// grid lines, and returns the rounded maximum and the step.
func niceScale(max float64) (float64, float64) {
	if !(max > 0) || math.IsInf(max, 0) {
		return 1, 0.2
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return math.Ceil(max/step) * step, step
}

// formatTick prints a tick value without needless decimals.
func formatTick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", math.Round(v*100)/100)
}
