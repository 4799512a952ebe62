module github.com/exactlyonce/retry/idempotency/storetest/linearize

go 1.26.0

replace github.com/exactlyonce/retry => ../../..

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/benbjohnson/clock v1.3.5
	github.com/exactlyonce/retry v0.0.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)
