package natsconsumer_test

import (
	"testing"

	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	natstest.CheckServer()
	goleak.VerifyTestMain(m)
}
