// Package integration_test runs the grpcretry interceptors with the
// modules users combine them with: the PostgreSQL store (pgstore, against
// a real server) and OpenTelemetry (otelretry).
package integration_test
