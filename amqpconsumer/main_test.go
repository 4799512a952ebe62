package amqpconsumer_test

import (
	"testing"

	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	amqptest.CheckServer()
	goleak.VerifyTestMain(m)
}
