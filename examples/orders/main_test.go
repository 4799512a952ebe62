package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// demoRun runs a short demo on store and checks the table's promises:
// ours ships every order once, nothing lost or dead-lettered, on both
// brokers; the plain consumer ships some twice or dead-letters some, and
// the mark-before one loses some.
func demoRun(t *testing.T, store string) {
	cfg := defaultConfig()
	cfg.Orders = 300
	cfg.Seed = 3
	cfg.Outage = time.Second
	cfg.Store = store
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	rs, err := run(ctx, cfg, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if len(rs) != 6 {
		t.Fatalf("got %d results, want 3 per broker", len(rs))
	}
	for _, r := range rs {
		if !r.Settled {
			t.Errorf("%s, %s: did not settle: %+v", r.Broker, r.Consumer, r)
		}
		if r.Killed == "" {
			t.Errorf("%s, %s: no instance was killed", r.Broker, r.Consumer)
		}
		switch r.Consumer {
		case kindOurs.String():
			if r.Effects != cfg.Orders || r.Duplicates != 0 || r.Lost != 0 || r.DeadLettered != 0 {
				t.Errorf("%s, ours = %+v; want every order shipped once, none lost or dead-lettered", r.Broker, r)
			}
		case kindPlain.String():
			if r.Duplicates == 0 && r.DeadLettered == 0 {
				t.Errorf("%s, plain = %+v; want duplicates or dead letters with seed %d", r.Broker, r, cfg.Seed)
			}
		case kindMarkBefore.String():
			if r.Lost == 0 {
				t.Errorf("%s, mark before = %+v; want lost orders with seed %d", r.Broker, r, cfg.Seed)
			}
		}
	}
	out := stdout.String()
	for _, want := range []string{"NATS JetStream:", "RabbitMQ:", "effects performed", "dead-lettered", "exactlyonce"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoShortRunMemory(t *testing.T) { demoRun(t, storeMemory) }

func TestDemoShortRunPostgres(t *testing.T) { demoRun(t, storePostgres) }

func TestBadFlagsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "0"},
		{"-n", "x"},
		{"-fail", "0.9"},
		{"-dup", "-1"},
		{"-outage", "2m"},
		{"-store", "redis"},
		{"-broker", "kafka"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := realMain(args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit code %d, want 2", args, code)
		}
		if !strings.Contains(stderr.String(), "usage: orders") {
			t.Errorf("%q: no usage message:\n%s", args, stderr.String())
		}
	}
}

func TestShortFlag(t *testing.T) {
	cfg, err := parseFlags([]string{"-short"}, new(bytes.Buffer))
	if err != nil || cfg.Orders != shortOrders {
		t.Errorf("-short: %+v, %v; want %d orders", cfg, err, shortOrders)
	}
	cfg, err = parseFlags([]string{"-short", "-n", "20"}, new(bytes.Buffer))
	if err != nil || cfg.Orders != 20 {
		t.Errorf("-short -n 20: %+v, %v; want 20 orders", cfg, err)
	}
}

func TestHelpExitsZero(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
