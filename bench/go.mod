module github.com/exactlyonce/retry/bench

go 1.26.0

require (
	github.com/avast/retry-go/v4 v4.7.0
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/exactlyonce/retry v0.0.0
	github.com/exactlyonce/retry/grpcretry v0.0.0
	github.com/exactlyonce/retry/idempotency/mysqlstore v0.0.0
	github.com/exactlyonce/retry/idempotency/pgstore v0.0.0
	github.com/exactlyonce/retry/idempotency/redisstore v0.0.0
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/go-sql-driver/mysql v1.10.2
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sethvargo/go-retry v0.5.0
	github.com/stretchr/testify v1.12.1
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
)

replace (
	github.com/exactlyonce/retry => ../
	github.com/exactlyonce/retry/grpcretry => ../grpcretry
	github.com/exactlyonce/retry/idempotency/mysqlstore => ../idempotency/mysqlstore
	github.com/exactlyonce/retry/idempotency/pgstore => ../idempotency/pgstore
	github.com/exactlyonce/retry/idempotency/redisstore => ../idempotency/redisstore
)
