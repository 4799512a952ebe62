// Command stores measures each idempotency store's cost through the
// Middleware, beside its database's own limit for the store's statements, in
// one run, and writes results/stores.md (a Markdown table).
//
// Usage, from the bench directory:
//
//	go run ./cmd/stores [-out results] [-quick] [-only name] [-cpuprofile file]
//
// It needs PostgreSQL, Redis and MySQL or MariaDB where the tests find them
// (EXACTLYONCE_PG_DSN, EXACTLYONCE_REDIS_ADDR, EXACTLYONCE_MYSQL_DSN), and
// pgbench for PostgreSQL's limit.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/exactlyonce/retry/bench/stores"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stores", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "results", "directory for stores.md")
	quick := fs.Bool("quick", false, "short phases (a smoke run of a few seconds)")
	only := fs.String("only", "", "measure only the store of this name (memory, PostgreSQL, Redis, MySQL)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: stores [-out dir] [-quick] [-only name] [-cpuprofile file]")
		return 2
	}
	backends := stores.Backends(stores.DefaultServers())
	if *only != "" {
		backends = slices.DeleteFunc(backends, func(b stores.Backend) bool { return !strings.EqualFold(b.Name, *only) })
		if len(backends) == 0 {
			fmt.Fprintf(stderr, "stores: no store is named %q\n", *only)
			return 2
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "stores:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "stores:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	s := stores.DefaultSettings()
	if *quick {
		s = stores.QuickSettings()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	res := stores.Run(ctx, s, backends, stderr)
	var md bytes.Buffer
	stores.WriteMarkdown(&md, s, res, time.Since(start))
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, "stores:", err)
		return 1
	}
	path := filepath.Join(*out, "stores.md")
	if err := os.WriteFile(path, md.Bytes(), 0o644); err != nil {
		fmt.Fprintln(stderr, "stores:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	for _, r := range res {
		if r.Err != nil {
			fmt.Fprintf(stderr, "stores: %s: %v\n", r.Backend, r.Err)
			return 1
		}
	}
	return 0
}
