module github.com/exactlyonce/retry/idempotency/mysqlstore

go 1.26.0

require (
	github.com/exactlyonce/retry v0.0.0
	github.com/go-sql-driver/mysql v1.10.2
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/exactlyonce/retry => ../..
