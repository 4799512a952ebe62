// Package paymentspb is the Go code of payments.proto: a payment service
// whose methods declare their idempotency (descriptor.proto's
// idempotency_level), called by the grpcretry module's tests and example,
// by the gRPC demo (examples/grpcpayments) and by the benchmarks.
package paymentspb

//go:generate sh -c "cd ../internal/protogen && GOWORK=off go run . ../../paymentspb payments.proto"
