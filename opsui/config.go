package opsui

import (
	"net/http"

	"github.com/benbjohnson/clock"
	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/protocol"
)

// DefaultPath is where a service usually mounts the page.
const DefaultPath = "/debug/exactlyonce"

// Action is what a request to the page wants to do; Config.Authorize is
// asked for each.
type Action int

const (
	// ActionView: read a page or its JSON twin.
	ActionView Action = iota + 1
	// ActionRetry: run a parked execution again (Runner.RetryParked).
	ActionRetry
	// ActionDiscard: delete a parked execution (Runner.DiscardParked).
	ActionDiscard
	// ActionResume: run a stalled execution now (Runner.ResumeStalled).
	ActionResume
)

// String returns "view", "retry", "discard" or "resume".
func (a Action) String() string {
	switch a {
	case ActionView:
		return "view"
	case ActionRetry:
		return "retry"
	case ActionDiscard:
		return "discard"
	case ActionResume:
		return "resume"
	default:
		return "unknown"
	}
}

// Config configures a Handler: Authorize is required, its other zero
// fields take the defaults.
type Config struct {
	// Authorize decides whether r may do a; a non-nil error refuses it
	// with 403 and the error's text. Required: without it every request is
	// refused. It is asked once per request, with ActionView for every GET
	// and with the action for every POST, so that who may look need not
	// be who may act.
	Authorize func(r *http.Request, a Action) error
	// Runner is the Runner whose executions the page shows and acts on.
	// Its store must implement idempotency.Lister (every store of this
	// module does) for the lists; without a Runner the page shows only
	// the clients.
	Runner *idempotency.Runner
	// Path is where the handler is mounted, without a trailing slash
	// ("": DefaultPath). The handler serves Path and everything under it.
	Path string
	// Clients are the retrying clients whose dependencies and budgets the
	// page shows.
	Clients []Client
	// Consumers are the consumers whose counts the page shows.
	Consumers []Consumer
	// Clock is the clock of the dependency samples (nil: the system clock).
	Clock clock.Clock
}

// Client is a retrying client the page shows: its dependencies and its
// budget. TransportClient and CallerClient make one.
type Client struct {
	// Name names the client on the page.
	Name string
	// Dependencies returns what the client knows of each dependency
	// (Transport.Dependencies or protocol.Caller.Dependencies).
	Dependencies func() []retry.DependencyStats
	// Budget is the client's retry budget, or nil.
	Budget *retry.Budget
}

// TransportClient returns the Client of a Transport: its hosts and its
// budget.
func TransportClient(name string, t *retry.Transport) Client {
	return Client{Name: name, Dependencies: t.Dependencies, Budget: t.Budget()}
}

// CallerClient returns the Client of a protocol.Caller: its targets and its
// budget.
func CallerClient(name string, c *protocol.Caller) Client {
	return Client{Name: name, Dependencies: c.Dependencies, Budget: c.Budget()}
}

// Consumer is a consumer the page shows.
type Consumer struct {
	// Name names the consumer on the page.
	Name string
	// Stats returns its counts (consumer.Consumer.Stats).
	Stats func() consumer.Stats
}
