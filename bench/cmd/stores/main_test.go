package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-nosuch"}, {"extra"}} {
		var stdout, stderr bytes.Buffer
		if code := realMain(args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit code %d, want 2", args, code)
		}
		if !strings.Contains(stderr.String(), "sage") {
			t.Errorf("%q: no usage message: %s", args, stderr.String())
		}
	}
}
