// Command stores measures each idempotency store's cost through the
// Middleware, beside its database's own limit for the store's statements, in
// one run, and writes results/stores.md (a Markdown table).
//
// Usage, from the bench directory:
//
//	go run ./cmd/stores [-out results] [-quick]
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
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: stores [-out dir] [-quick]")
		return 2
	}
	s := stores.DefaultSettings()
	if *quick {
		s = stores.QuickSettings()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	res := stores.Run(ctx, s, stores.Backends(stores.DefaultServers()), stderr)
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
