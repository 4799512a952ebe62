package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// memTransport answers every request at once with 200 and a two-byte body,
// without a network: what remains is the cost of the client. It implements
// nothing of any library's: a custom RoundTripper as users write them.
type memTransport struct{}

func (memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode:    http.StatusOK,
		Status:        "200 OK",
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{},
		Body:          io.NopCloser(strings.NewReader("ok")),
		ContentLength: 2,
		Request:       r,
	}, nil
}

// costPayload is the body of the POST cost benchmarks.
var costPayload = bytes.Repeat([]byte("p"), 1024)

// CostCase is one way of measuring a library's cost per request.
type CostCase struct {
	// Name labels the case in tables.
	Name string
	// Method is GET, or POST with a 1 KiB body.
	Method string
	// Loopback sends over net/http's own *http.Transport (a clone of
	// http.DefaultTransport, what users have) to a server on loopback;
	// otherwise over a custom in-memory RoundTripper.
	Loopback bool
	// Deadline gives every request a 5 s deadline in its context, as a
	// request served for an incoming one usually has.
	Deadline bool
}

// CostCases are the cases every library is measured in.
var CostCases = []CostCase{
	{Name: "GET over net/http's Transport, loopback", Method: http.MethodGet, Loopback: true},
	{Name: "POST 1 KiB over net/http's Transport, loopback", Method: http.MethodPost, Loopback: true},
	{Name: "GET with a 5 s request deadline, loopback", Method: http.MethodGet, Loopback: true, Deadline: true},
	{Name: "POST 1 KiB with a 5 s request deadline, loopback", Method: http.MethodPost, Loopback: true, Deadline: true},
	{Name: "GET over a custom in-memory RoundTripper", Method: http.MethodGet},
	{Name: "POST 1 KiB over a custom in-memory RoundTripper", Method: http.MethodPost},
	{Name: "GET with a 5 s request deadline, in memory", Method: http.MethodGet, Deadline: true},
	{Name: "POST 1 KiB with a 5 s request deadline, in memory", Method: http.MethodPost, Deadline: true},
}

// costServer answers every request with 200 "ok" after reading its body.
func costServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("ok"))
	}))
}

// CostBenchmark returns a benchmark of one successful request through lib
// with its defaults, as cc says; url is costServer's, for loopback cases.
func CostBenchmark(lib Library, cc CostCase, url string) func(b *testing.B) {
	return func(b *testing.B) {
		base, target := costBase(cc, url)
		if tr, ok := base.(*http.Transport); ok {
			defer tr.CloseIdleConnections()
		}
		client := lib.New(Defaults, base)
		var body []byte
		if cc.Method == http.MethodPost {
			body = costPayload
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := costOnce(client, cc, target, body); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// costBase returns the base of a cost case and the address to send to;
// close the base's idle connections when done.
func costBase(cc CostCase, url string) (http.RoundTripper, string) {
	if !cc.Loopback {
		return memTransport{}, "http://bench.invalid/op"
	}
	return http.DefaultTransport.(*http.Transport).Clone(), url + "/op"
}

// costOnce sends one request of a cost benchmark and reads its answer.
func costOnce(client Client, cc CostCase, url string, body []byte) error {
	ctx := context.Background()
	if cc.Deadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cc.Method, url, rd)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// Cost is one library's measured cost per request.
type Cost struct {
	NsPerOp     float64
	AllocsPerOp int64
	BytesPerOp  int64
}

// costRounds is how many times MeasureCosts runs every benchmark; it keeps
// the fastest run of each, the one least disturbed by other work on the
// machine. Rounds interleave the libraries, so a busy spell slows them all
// rather than one.
const costRounds = 3

// MeasureCosts runs CostBenchmark for every library and case with
// testing.Benchmark, costRounds times over, and returns the fastest run of
// each, indexed like libs and cases.
func MeasureCosts(libs []Library, cases []CostCase) [][]Cost {
	srv := costServer()
	defer srv.Close()
	best := make([][]Cost, len(libs))
	for i := range best {
		best[i] = make([]Cost, len(cases))
	}
	for range costRounds {
		for j, cc := range cases {
			for i, lib := range libs {
				r := testing.Benchmark(CostBenchmark(lib, cc, srv.URL))
				if r.N == 0 {
					continue
				}
				c := Cost{NsPerOp: float64(r.T.Nanoseconds()) / float64(r.N), AllocsPerOp: r.AllocsPerOp(), BytesPerOp: r.AllocedBytesPerOp()}
				if best[i][j].NsPerOp == 0 || c.NsPerOp < best[i][j].NsPerOp {
					best[i][j] = c
				}
			}
		}
	}
	return best
}
