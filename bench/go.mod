module github.com/exactlyonce/retry/bench

go 1.26.0

replace github.com/exactlyonce/retry => ../

require (
	github.com/avast/retry-go/v4 v4.7.0
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/exactlyonce/retry v0.0.0-00010101000000-000000000000
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/sethvargo/go-retry v0.5.0
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/time v0.16.0 // indirect
)
