module github.com/exactlyonce/retry/internal/drill

go 1.26.0

replace (
	github.com/exactlyonce/retry => ../../
	github.com/exactlyonce/retry/idempotency/pgstore => ../../idempotency/pgstore
)

require (
	github.com/exactlyonce/retry v0.0.0
	github.com/exactlyonce/retry/idempotency/pgstore v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.12.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)
