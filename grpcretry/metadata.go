package grpcretry

// Metadata and trailer names. gRPC metadata names are lower case.
const (
	// KeyMetadata is the metadata that carries the idempotency key: the
	// HTTP half's Idempotency-Key header, in gRPC's lower case. The value
	// is the same as the header's: a Structured Field string by default, a
	// plain token with retry.WithTokenKeys.
	KeyMetadata = "idempotency-key"
	// ReplayedTrailer is set to "true" in the trailers of every call the
	// server interceptor answers from its store: the stored outcome of an
	// earlier call with the same key. The client never retries a replayed
	// failure: a retry would get the same one.
	ReplayedTrailer = "idempotent-replayed"
	// PushbackTrailer is pushback.Header in gRPC's lower case: a
	// server whose own retries gave up (see PushbackUnaryServerInterceptor)
	// says so, and the client does not retry.
	PushbackTrailer = "retry-pushback"
	// PushbackMsTrailer is gRPC's retry pushback (gRFC A6): a number of
	// milliseconds is a floor for the next wait; a negative or malformed
	// value means do not retry.
	PushbackMsTrailer = "grpc-retry-pushback-ms"
	// ErrorDomain is the domain of the google.rpc.ErrorInfo details of the
	// statuses the server interceptor makes itself (see the package
	// documentation); their Reason is one of the Reason* constants.
	ErrorDomain = "exactlyonce"
)

// Reasons of the google.rpc.ErrorInfo details the server interceptor
// attaches to the statuses it makes: package idempotency's problem codes
// in upper case.
const (
	ReasonKeyMissing     = "IDEMPOTENCY_KEY_MISSING"
	ReasonKeyInvalid     = "IDEMPOTENCY_KEY_INVALID"
	ReasonKeyMismatch    = "IDEMPOTENCY_KEY_MISMATCH"
	ReasonInProgress     = "IDEMPOTENCY_KEY_IN_PROGRESS"
	ReasonLeaseLost      = "IDEMPOTENCY_LEASE_LOST"
	ReasonCallerUnknown  = "CALLER_UNKNOWN"
	ReasonStoreFailed    = "IDEMPOTENCY_STORE_FAILED"
	ReasonTxFailed       = "TRANSACTION_ROLLED_BACK"
	ReasonResponseTooBig = "RESPONSE_TOO_LARGE"
	ReasonPanicked       = "HANDLER_PANICKED"
)
