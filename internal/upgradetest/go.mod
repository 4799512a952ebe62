module github.com/exactlyonce/retry/internal/upgradetest

go 1.26.0

replace (
	github.com/exactlyonce/retry => ../../
	github.com/exactlyonce/retry/idempotency/mysqlstore => ../../idempotency/mysqlstore
	github.com/exactlyonce/retry/idempotency/pgstore => ../../idempotency/pgstore
	github.com/exactlyonce/retry/idempotency/redisstore => ../../idempotency/redisstore
)

require (
	github.com/exactlyonce/retry v0.0.0
	github.com/exactlyonce/retry/idempotency/mysqlstore v0.0.0
	github.com/exactlyonce/retry/idempotency/pgstore v0.0.0
	github.com/exactlyonce/retry/idempotency/redisstore v0.0.0
	github.com/go-sql-driver/mysql v1.10.2
	github.com/jackc/pgx/v5 v5.12.0
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)
