// Command compare runs every benchmark scenario on this module's client, a
// plain http.Client, a naive retry loop and the peer libraries, all on
// loopback, and writes results/results.md (a Markdown table) and
// results/storm.svg (the retry storm over time).
//
// Usage, from the bench directory:
//
//	go run ./cmd/compare [-out results] [-quick] [-benchtime 150ms]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/exactlyonce/retry/bench"
)

// maxRunTime bounds a whole run.
const maxRunTime = 10 * time.Minute

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "results", "directory for results.md and storm.svg")
	quick := fs.Bool("quick", false, "small sizes, no cost benchmarks (a smoke run of a few seconds)")
	benchtime := fs.Duration("benchtime", 150*time.Millisecond, "run time of each library-cost benchmark")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *benchtime <= 0 {
		fmt.Fprintln(stderr, "usage: compare [-out dir] [-quick] [-benchtime d]")
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
	ctx, cancel := context.WithTimeout(context.Background(), maxRunTime)
	defer cancel()
	res := bench.Run(ctx, s, stderr)
	if err := write(*out, res); err != nil {
		fmt.Fprintln(stderr, "compare:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s and %s in %v\n", filepath.Join(*out, "results.md"), filepath.Join(*out, "storm.svg"),
		res.Took.Round(time.Second))
	return 0
}

// write renders the results into dir.
func write(dir string, res bench.Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var md, svg bytes.Buffer
	if err := bench.WriteMarkdown(&md, res); err != nil {
		return err
	}
	if err := bench.WriteStormSVG(&svg, res); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "storm.svg"), svg.Bytes(), 0o644)
}
