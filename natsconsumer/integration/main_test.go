package integration_test

import (
	"os"
	"testing"

	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if schema := os.Getenv(relayChildEnv); schema != "" {
		os.Exit(relayChild(schema, os.Getenv(relayStreamEnv)))
	}
	if schema := os.Getenv(drillChildEnv); schema != "" {
		os.Exit(drillChild(schema, os.Getenv(drillStreamEnv), os.Getenv(drillDependencyEnv)))
	}
	natstest.CheckServer()
	goleak.VerifyTestMain(m)
}
