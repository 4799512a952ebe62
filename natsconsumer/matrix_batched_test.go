package natsconsumer_test

import (
	"testing"

	"github.com/exactlyonce/retry/idempotency/consumer/consumertest"
)

// The consumers' fault matrix, against the real JetStream, with the
// durable work batched (claims and outcomes of the deliveries taken
// together).
func TestFaultMatrixBatched(t *testing.T) { consumertest.RunBatched(t, matrixBroker{}) }
