package integration_test

import (
	"os"
	"testing"

	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if schema := os.Getenv(relayChildEnv); schema != "" {
		os.Exit(relayChild(schema, os.Getenv(relayQueueEnv)))
	}
	if schema := os.Getenv(drillChildEnv); schema != "" {
		os.Exit(drillChild(schema, os.Getenv(drillQueueEnv), os.Getenv(drillDependencyEnv)))
	}
	amqptest.CheckServer()
	goleak.VerifyTestMain(m)
}
