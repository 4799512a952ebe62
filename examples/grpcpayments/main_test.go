package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A small run of the demo: our client's charges are each performed once,
// grpc-go's retry performs the charges whose answers were dropped again.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	rs, err := run(ctx, config{Charges: 200, Seed: 1, Drop: 0.05, Reset: 0.05, Concurrency: 8}, &out, io.Discard)
	require.NoError(t, err)
	require.Len(t, rs, 2)
	ours, builtIn := rs[0], rs[1]
	assert.Equal(t, 200, ours.Executed)
	assert.Zero(t, ours.Duplicates)
	assert.Zero(t, ours.Failures)
	assert.Positive(t, ours.Drops, "the plan dropped answers")
	assert.Positive(t, builtIn.Duplicates, "grpc-go's retry charged again what it could not know was charged")
	assert.Equal(t, builtIn.Executed-200, builtIn.Duplicates)
	assert.True(t, strings.Contains(out.String(), "exactlyonce (key)"))
}

func TestFlags(t *testing.T) {
	assert.Equal(t, 2, realMain([]string{"-n", "0"}, io.Discard, io.Discard))
	assert.Equal(t, 2, realMain([]string{"-drop", "0.6"}, io.Discard, io.Discard))
	assert.Equal(t, 0, realMain([]string{"-h"}, io.Discard, io.Discard))
}
