package main

import (
	"bytes"
	"strings"
	"testing"
)

// With -otel=stdout our consumers' metrics reach stderr as JSON, for both
// brokers, and the table is alone on stdout.
func TestDemoOTelStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"-n", "60", "-outage", "200ms", "-otel=stdout"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, want 0:\n%s", code, stderr.String())
	}
	for _, want := range []string{
		`"Name":"exactlyonce.consumer.deliveries"`,
		`"Name":"exactlyonce.consumer.handler.duration"`,
		`"Name":"exactlyonce.consumer.fetch.size"`,
		`"Name":"exactlyonce.consumer.broker.wait"`,
		`"Name":"exactlyonce.consumer.stats.outages"`,
		`"Value":"executed"`,
		`"Value":"NATS JetStream/ship"`,
		`"Value":"RabbitMQ/ship"`,
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the telemetry lacks %s:\n%s", want, stderr.String())
		}
	}
	if out := stdout.String(); !strings.Contains(out, "effects performed") || strings.Contains(out, "exactlyonce.consumer") {
		t.Errorf("stdout is not the table alone:\n%s", out)
	}
}
