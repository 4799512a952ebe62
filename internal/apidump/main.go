// Command apidump writes the exported API of this repository's public
// packages to one text file each, so that every change of the API is a
// visible, reviewed diff. Run from the repository's root:
//
//	go run ./internal/apidump          # rewrite api/*.txt
//	go run ./internal/apidump -check   # fail when the code and api/*.txt differ
//
// It reads the packages' sources (not their tests), so it needs no build of
// the nested modules.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// packages are the public packages and the file each API goes to.
var packages = []struct{ dir, file string }{
	{".", "retry.txt"},
	{"backoff", "backoff.txt"},
	{"pushback", "pushback.txt"},
	{"protocol", "protocol.txt"},
	// Not public, but package protocol's Call and Verdict are aliases of its
	// types: their fields and methods are protocol's API.
	{"internal/protocolcore", "protocolcore.txt"},
	{"idempotency", "idempotency.txt"},
	{"idempotency/storetest", "storetest.txt"},
	{"idempotency/pgstore", "pgstore.txt"},
	{"idempotency/redisstore", "redisstore.txt"},
	{"idempotency/mysqlstore", "mysqlstore.txt"},
	{"idempotency/storetest/linearize", "linearize.txt"},
	{"idempotency/storetest/sim", "sim.txt"},
	{"otelretry", "otelretry.txt"},
	{"idempotency/consumer", "consumer.txt"},
	{"idempotency/consumer/consumertest", "consumertest.txt"},
	{"natsconsumer", "natsconsumer.txt"},
	{"amqpconsumer", "amqpconsumer.txt"},
	{"grpcretry", "grpcretry.txt"},
	{"opsui", "opsui.txt"},
}

func main() {
	check := flag.Bool("check", false, "compare with the files instead of writing them")
	out := flag.String("dir", "api", "directory of the API files")
	flag.Parse()
	stale := 0
	for _, p := range packages {
		api, err := dump(p.dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apidump:", err)
			os.Exit(1)
		}
		path := filepath.Join(*out, p.file)
		if *check {
			if old, err := os.ReadFile(path); err != nil || !bytes.Equal(old, api) {
				fmt.Fprintf(os.Stderr, "apidump: the API of %s differs from %s; run go run ./internal/apidump and review the diff\n", p.dir, path)
				stale++
			}
			continue
		}
		if err := os.WriteFile(path, api, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "apidump:", err)
			os.Exit(1)
		}
	}
	if stale > 0 {
		os.Exit(1)
	}
}
