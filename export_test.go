package retry

// The defaults the tests of package retry_test compare with (unexported in
// the package: each option's doc comment states its default).
const (
	DefaultAttemptTimeout = defaultAttemptTimeout
	DefaultBackoffBase    = defaultBackoffBase
	DefaultBackoffCap     = defaultBackoffCap
	DefaultBudgetCapacity = defaultBudgetCapacity
	DefaultBudgetFloor    = defaultBudgetFloor
	DefaultBudgetRatio    = defaultBudgetRatio
	DefaultMaxAttempts    = defaultMaxAttempts
	DefaultMaxWait        = defaultMaxWait
)

// NewDefaultBudget is the budget a Transport or a Caller makes for itself.
var NewDefaultBudget = newDefaultBudget
