package bench

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// memTransport answers every request at once with 200 and a two-byte body,
// without a network: what remains is the cost of the client.
type memTransport struct{}

// BoundsAttempts tells exactlyonce's Transport (retry.AttemptBounder) that
// this base needs no timer per attempt: it answers at once, as an
// http.Transport with a ResponseHeaderTimeout bounds its own waits.
func (memTransport) BoundsAttempts() bool { return true }

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

// costPayload is the body of the POST cost benchmark.
var costPayload = bytes.Repeat([]byte("p"), 1024)

// CostBenchmark returns a benchmark of one successful request (GET, or a
// POST of 1 KiB) through lib with its defaults over an in-memory transport.
func CostBenchmark(lib Library, method string) func(b *testing.B) {
	return func(b *testing.B) {
		client := lib.New(Defaults, memTransport{})
		var body []byte
		if method == http.MethodPost {
			body = costPayload
		}
		b.ReportAllocs()
		for b.Loop() {
			var rd io.Reader
			if body != nil {
				rd = bytes.NewReader(body)
			}
			req, err := http.NewRequest(method, "http://bench.invalid/op", rd)
			if err != nil {
				b.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
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
const costRounds = 5

// MeasureCosts runs CostBenchmark for every library and method with
// testing.Benchmark, costRounds times over, and returns the fastest run of
// each, indexed like libs and methods.
func MeasureCosts(libs []Library, methods []string) [][]Cost {
	best := make([][]Cost, len(libs))
	for i := range best {
		best[i] = make([]Cost, len(methods))
	}
	for range costRounds {
		for i, lib := range libs {
			for j, m := range methods {
				r := testing.Benchmark(CostBenchmark(lib, m))
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
