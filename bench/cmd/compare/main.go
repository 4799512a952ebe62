// Command compare runs every benchmark scenario on this module's client, a
// plain http.Client, a naive retry loop and the peer libraries, all on
// loopback, and writes results/results.md (a Markdown table) and
// results/storm.svg (the retry storm over time); then the gRPC scenarios
// on grpcretry, grpc-go's own retry and go-grpc-middleware's, and writes
// results/grpc.md. With -grpc it runs and writes the gRPC part alone.
//
// Usage, from the bench directory:
//
//	go run ./cmd/compare [-out results] [-quick] [-grpc] [-benchtime 150ms]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/retry/bench"
)

// maxRunTime bounds a whole run.
const maxRunTime = 20 * time.Minute

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "results", "directory for results.md and storm.svg")
	quick := fs.Bool("quick", false, "small sizes, no cost benchmarks (a smoke run of a few seconds)")
	benchtime := fs.Duration("benchtime", 150*time.Millisecond, "run time of each library-cost benchmark")
	onlyGRPC := fs.Bool("grpc", false, "run the gRPC scenarios alone and write grpc.md")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *benchtime <= 0 {
		fmt.Fprintln(stderr, "usage: compare [-out dir] [-quick] [-grpc] [-benchtime d]")
		return 2
	}
	testing.Init()
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		fmt.Fprintln(stderr, "compare:", err)
		return 1
	}
	s := bench.DefaultSettings()
	if *quick {
		s = bench.QuickSettings()
	}
	s.OnlyGRPC = *onlyGRPC
	ctx, cancel := context.WithTimeout(context.Background(), maxRunTime)
	defer cancel()
	res := bench.Run(ctx, s, stderr)
	written, err := write(*out, res)
	if err != nil {
		fmt.Fprintln(stderr, "compare:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s in %v\n", strings.Join(written, ", "), res.Took.Round(time.Second))
	return 0
}

// write renders the results into dir and returns the files written.
func write(dir string, res bench.Results) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files := map[string]func(io.Writer, bench.Results) error{}
	if !res.Settings.OnlyGRPC {
		files["results.md"] = bench.WriteMarkdown
		files["storm.svg"] = bench.WriteStormSVG
	}
	if len(res.GRPC.Libs) > 0 {
		files["grpc.md"] = func(w io.Writer, r bench.Results) error { return bench.WriteGRPCMarkdown(w, r.GRPC) }
	}
	var written []string
	for _, name := range []string{"results.md", "storm.svg", "grpc.md"} {
		render, ok := files[name]
		if !ok {
			continue
		}
		var b bytes.Buffer
		if err := render(&b, res); err != nil {
			return written, err
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}
