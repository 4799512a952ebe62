package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	res := quickResults(t)
	var md, svg bytes.Buffer
	if err := WriteMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(md.String(), "\n")
	if !strings.HasPrefix(lines[0], "| scenario | exactlyonce |") || !strings.HasPrefix(lines[1], "|---|") {
		t.Errorf("bad table header:\n%s", md.String())
	}
	cols := strings.Count(lines[0], "|")
	for _, l := range lines[2:] {
		if l == "" {
			break
		}
		if strings.Count(l, "|") != cols {
			t.Errorf("row has %d cells, header %d: %s", strings.Count(l, "|"), cols, l)
		}
	}
	if err := WriteStormSVG(&svg, res); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, svg.Bytes(), 3*len(res.Libs)) // three storms
}

func TestLineChart(t *testing.T) {
	var b bytes.Buffer
	err := WriteLineChart(&b, LineChart{
		Title: "a <title> & more", XLabel: "x", YLabel: "y", XMax: 4, Shades: [][2]float64{{0, 1}}, ShadeLabel: "outage",
		Series: []Series{
			{Name: "one", X: []float64{0.5, 1.5, 2.5}, Y: []float64{10, 120, 30}},
			{Name: "two", X: []float64{0.5, 1.5}, Y: []float64{0, 0}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkSVG(t, b.Bytes(), 2)
	if !strings.Contains(b.String(), "a &lt;title&gt; &amp; more") {
		t.Error("title not escaped")
	}
}

// checkSVG parses doc as XML and counts its polylines and legend entries.
func checkSVG(t *testing.T, doc []byte, series int) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	polylines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if polylines != series {
		t.Errorf("got %d polylines, want %d", polylines, series)
	}
}

func TestNiceScale(t *testing.T) {
	for _, c := range []struct{ in, max, step float64 }{
		{0, 1, 0.2}, {1, 1, 0.2}, {7, 8, 2}, {95, 100, 20}, {850, 1000, 200}, {1200, 1500, 500},
	} {
		if max, step := niceScale(c.in); max != c.max || step != c.step {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", c.in, max, step, c.max, c.step)
		}
	}
}

// The note on bounding by hand sets ours without a deadline against the
// plain client with one, case by case.
func TestBoundedNote(t *testing.T) {
	costs := func(ns ...float64) []Cost {
		c := make([]Cost, len(ns))
		for i, n := range ns {
			c[i] = Cost{NsPerOp: n, AllocsPerOp: int64(n)}
		}
		return c
	}
	// In CostCases' order: loopback GET, POST, both with a deadline; then
	// the same in memory.
	res := Results{Libs: []LibResult{
		{Library: Library{Name: "exactlyonce", Retries: true}, Costs: costs(40, 50, 40, 50, 12, 18, 15, 22)},
		{Library: Library{Name: "plain http.Client"}, Costs: costs(30, 40, 40, 44, 10, 14, 16, 20)},
	}}
	got := boundedNote(res)
	for _, want := range []string{"+10 allocations for a GET on loopback and +6 in", "1.0x (+0) (GET) and 1.1x (+6) (POST", "0.8x (-4) and 0.9x (-2) in memory"} {
		if !strings.Contains(strings.Join(strings.Fields(got), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("the note %q lacks %q", got, want)
		}
	}
	if boundedNote(Results{}) != "" {
		t.Error("a note without costs")
	}
}
