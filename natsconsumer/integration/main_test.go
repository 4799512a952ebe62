package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// natsURL is the NATS server with JetStream the tests use.
func natsURL() string {
	if u := os.Getenv("EXACTLYONCE_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// startCommand is how the tests' NATS server is started on this project's machines.
const startCommand = "start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log"

func TestMain(m *testing.M) {
	if schema := os.Getenv(relayChildEnv); schema != "" {
		os.Exit(relayChild(schema, os.Getenv(relayStreamEnv)))
	}
	if schema := os.Getenv(drillChildEnv); schema != "" {
		os.Exit(drillChild(schema, os.Getenv(drillStreamEnv), os.Getenv(drillDependencyEnv)))
	}
	if err := checkServer(); err != nil {
		fmt.Fprintf(os.Stderr, "natsconsumer: the tests need NATS with JetStream at %s (EXACTLYONCE_NATS_URL), and it is not usable: %v\nstart it with: %s\n",
			natsURL(), err, startCommand)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// checkServer connects once and asks JetStream for the account.
func checkServer() error {
	nc, err := nats.Connect(natsURL(), nats.Timeout(3*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// connect returns a JetStream context on a new connection, closed at the
// end of the test.
func connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(natsURL())
	if err != nil {
		t.Fatalf("connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// uniqueName returns a stream name no other test uses.
func uniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// newStream creates a stream of its own for the test on subjects
// "<name>.>", deleted at the end of the test.
func newStream(t testing.TB, js jetstream.JetStream) string {
	t.Helper()
	name := uniqueName("EOTEST")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
	})
	return name
}

// newPullConsumer creates a durable pull consumer with explicit acks on stream.
func newPullConsumer(t testing.TB, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) jetstream.Consumer {
	t.Helper()
	if cfg.Durable == "" {
		cfg.Durable = "work"
	}
	cfg.AckPolicy = jetstream.AckExplicitPolicy
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	return c
}
