module github.com/exactlyonce/retry/examples

go 1.26.0

require (
	github.com/exactlyonce/retry v0.0.0
	github.com/exactlyonce/retry/amqpconsumer v0.0.0
	github.com/exactlyonce/retry/grpcretry v0.0.0
	github.com/exactlyonce/retry/idempotency/mysqlstore v0.0.0
	github.com/exactlyonce/retry/idempotency/pgstore v0.0.0
	github.com/exactlyonce/retry/idempotency/redisstore v0.0.0
	github.com/exactlyonce/retry/natsconsumer v0.0.0
	github.com/exactlyonce/retry/opsui v0.0.0
	github.com/exactlyonce/retry/otelretry v0.0.0
	github.com/go-sql-driver/mysql v1.10.2
	github.com/jackc/pgx/v5 v5.13.0
	github.com/nats-io/nats.go v1.56.0
	github.com/rabbitmq/amqp091-go v1.17.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.72.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/exporters/stdout/stdoutmetric v1.47.0
	go.opentelemetry.io/otel/exporters/stdout/stdouttrace v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/sdk/metric v1.47.0
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.85.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/felixge/httpsnoop v1.1.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/exactlyonce/retry => ../
	github.com/exactlyonce/retry/amqpconsumer => ../amqpconsumer
	github.com/exactlyonce/retry/grpcretry => ../grpcretry
	github.com/exactlyonce/retry/idempotency/mysqlstore => ../idempotency/mysqlstore
	github.com/exactlyonce/retry/idempotency/pgstore => ../idempotency/pgstore
	github.com/exactlyonce/retry/idempotency/redisstore => ../idempotency/redisstore
	github.com/exactlyonce/retry/natsconsumer => ../natsconsumer
	github.com/exactlyonce/retry/opsui => ../opsui
	github.com/exactlyonce/retry/otelretry => ../otelretry
)
