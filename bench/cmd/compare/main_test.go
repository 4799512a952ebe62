package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exactlyonce/retry/bench"
)

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-nosuch"}, {"extra"}, {"-benchtime", "0s"}} {
		var stdout, stderr bytes.Buffer
		if code := realMain(args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit code %d, want 2", args, code)
		}
		if !strings.Contains(stderr.String(), "usage") && !strings.Contains(stderr.String(), "Usage") {
			t.Errorf("%q: no usage message: %s", args, stderr.String())
		}
	}
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := write(dir, bench.Results{Settings: bench.QuickSettings()}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"results.md", "storm.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %d bytes, %v", name, len(b), err)
		}
	}
}
