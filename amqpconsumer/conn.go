package amqpconsumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	retry "github.com/exactlyonce/retry"
)

// Defaults of a Conn.
const (
	// DefaultRedialBase and DefaultRedialCap shape the full-jitter backoff
	// between the dials of a Conn whose connection was lost.
	DefaultRedialBase = 100 * time.Millisecond
	DefaultRedialCap  = 5 * time.Second
	// DefaultDialTimeout bounds one dial of Dial's connections, the AMQP
	// handshake included.
	DefaultDialTimeout = 10 * time.Second
	// DefaultHeartbeat is the heartbeat interval of Dial's connections.
	DefaultHeartbeat = 10 * time.Second
)

// ErrConnClosed is matched by the errors of a Conn's users once the Conn
// is closed.
var ErrConnClosed = errors.New("amqpconsumer: the connection was closed")

// DialFunc opens an AMQP connection; ctx ends when the Conn is closed.
type DialFunc func(ctx context.Context) (*amqp.Connection, error)

// SetupFunc declares the caller's topology (exchanges, queues, bindings)
// on ch. A Conn calls it on every channel it opens, before the channel is
// used, so that what a broker lost in a restart (a classic queue that was
// not durable, say) is there again; it must be idempotent, as AMQP's
// declarations are. It must not close ch.
type SetupFunc func(ch *amqp.Channel) error

// ConnOption configures a Conn.
type ConnOption func(*connSettings)

type connSettings struct {
	setup   SetupFunc
	backoff retry.Backoff
	logger  *slog.Logger
}

// WithSetup gives the function that declares the caller's topology on
// every channel the Conn opens (see SetupFunc).
func WithSetup(setup SetupFunc) ConnOption {
	return func(s *connSettings) { s.setup = setup }
}

// WithRedialBackoff sets the wait between the dials of a lost connection
// (default retry.FullJitter(DefaultRedialBase, DefaultRedialCap)).
func WithRedialBackoff(b retry.Backoff) ConnOption {
	return func(s *connSettings) { s.backoff = b }
}

// WithConnLogger sets where the Conn reports failed dials (Warn) and
// restored connections (Info) (default slog.Default()).
func WithConnLogger(l *slog.Logger) ConnOption {
	return func(s *connSettings) { s.logger = l }
}

// Conn is an AMQP connection that comes back: after it is lost (the
// broker restarted, the network dropped it), the first of its users to
// need it dials again, through retry.Do with full-jitter backoff, until
// the broker answers or the Conn is closed; one dial at a time, the other
// users waiting for its outcome. Consumers (NewConsumer) and publishers
// (NewPublisher) made from a Conn open their channels on it and open them
// again, with the caller's topology (WithSetup), after any loss. It is
// safe for concurrent use.
type Conn struct {
	dial DialFunc
	set  connSettings

	life context.Context // ends when the Conn is closed
	end  context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	conn    *amqp.Connection // nil before the first dial and while redialing
	ready   chan struct{}    // closed when the dial in progress ends
	dialing bool
	closed  bool

	dials atomic.Uint64
}

// Dial returns a Conn to the broker at url (amqp://user:pass@host:port/vhost),
// with heartbeats every DefaultHeartbeat and each dial bounded by
// DefaultDialTimeout. It does not connect: the Conn's first user does,
// waiting for the broker if it is down. Only a url that does not parse
// fails.
func Dial(url string, opts ...ConnOption) (*Conn, error) {
	if _, err := amqp.ParseURI(url); err != nil {
		return nil, fmt.Errorf("amqpconsumer: %w", err)
	}
	return NewConn(func(ctx context.Context) (*amqp.Connection, error) {
		return amqp.DialConfig(url, amqp.Config{
			Heartbeat: DefaultHeartbeat,
			Locale:    "en_US",
			Dial:      dialContext(ctx, DefaultDialTimeout),
		})
	}, opts...), nil
}

// dialContext dials as amqp.DefaultDial does (a deadline for the
// handshake, which amqp091-go clears once the connection is open), and
// gives up when ctx ends.
func dialContext(ctx context.Context, timeout time.Duration) func(network, addr string) (net.Conn, error) {
	return func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
			_ = c.Close()
			return nil, err
		}
		return c, nil
	}
}

// NewConn returns a Conn whose connections dial opens (amqp.DialConfig
// with a TLS configuration, say). It does not connect: see Dial.
func NewConn(dial DialFunc, opts ...ConnOption) *Conn {
	set := connSettings{
		backoff: retry.FullJitter(DefaultRedialBase, DefaultRedialCap),
		logger:  slog.Default(),
	}
	for _, o := range opts {
		if o != nil {
			o(&set)
		}
	}
	life, end := context.WithCancel(context.Background())
	return &Conn{dial: dial, set: set, life: life, end: end}
}

// Redials returns how many times the Conn connected again after its
// first connection.
func (c *Conn) Redials() uint64 { return max(c.dials.Load(), 1) - 1 }

// Close closes the connection and ends the dial in progress; the Conn's
// users then fail with ErrConnClosed. It waits for the dial to end.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closed = true
	conn := c.conn
	c.conn = nil
	c.mu.Unlock()
	c.end()
	c.wg.Wait()
	if conn != nil && !conn.IsClosed() {
		return conn.Close()
	}
	return nil
}

// connection returns the connection, once there is one open: it starts a
// dial when there is none and waits for it until ctx ends.
func (c *Conn) connection(ctx context.Context) (*amqp.Connection, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrConnClosed
		}
		if c.conn != nil && !c.conn.IsClosed() {
			conn := c.conn
			c.mu.Unlock()
			return conn, nil
		}
		if !c.dialing {
			c.dialing = true
			c.conn = nil
			c.ready = make(chan struct{})
			c.wg.Add(1)
			go c.redial()
		}
		ready := c.ready
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ready:
		}
	}
}

// redial dials until a connection opens or the Conn is closed.
func (c *Conn) redial() {
	defer c.wg.Done()
	attempt := 0
	err := retry.Do(c.life, func(ctx context.Context) error {
		attempt++
		conn, err := c.dial(ctx)
		if err != nil {
			c.set.logger.Warn("amqpconsumer: dial failed", slog.Int("attempt", attempt), slog.Any("error", err))
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			_ = conn.Close()
			return retry.Permanent(ErrConnClosed)
		}
		c.conn = conn
		return nil
	}, retry.WithMaxAttempts(math.MaxInt), retry.WithBackoff(c.set.backoff))
	if err == nil && c.dials.Add(1) > 1 {
		c.set.logger.Info("amqpconsumer: connection restored", slog.Int("attempts", attempt))
	}
	c.mu.Lock()
	c.dialing = false
	close(c.ready)
	c.mu.Unlock()
}

// channel opens a channel on the connection (waiting for one, see
// connection) and runs the caller's setup on it.
func (c *Conn) channel(ctx context.Context) (*amqp.Channel, error) {
	conn, err := c.connection(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("amqpconsumer: open a channel: %w", err)
	}
	if c.set.setup != nil {
		if err := c.set.setup(ch); err != nil {
			lost := ch.IsClosed() || conn.IsClosed()
			_ = ch.Close()
			err = fmt.Errorf("amqpconsumer: setup: %w", err)
			if !lost && !connectionLost(err) {
				err = retry.Permanent(err)
			}
			return nil, err
		}
	}
	return ch, nil
}

// connectionLost reports whether err says the connection or the channel
// was lost (a failure worth opening them again for), rather than that the
// broker refused what was asked of it.
func connectionLost(err error) bool {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp.AccessRefused, amqp.NotFound, amqp.PreconditionFailed, amqp.NotAllowed, amqp.NotImplemented, amqp.FrameError, amqp.SyntaxError, amqp.CommandInvalid:
			return false
		}
		return true
	}
	var ne net.Error
	return errors.Is(err, amqp.ErrClosed) || errors.As(err, &ne) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// classify is the retry.Do classifier of the operations on a Conn: a lost
// connection or channel is worth another attempt, a refusal is not.
func classify(err error) bool {
	return !errors.Is(err, ErrConnClosed) && !isRefusal(err)
}

// isRefusal reports whether err is the broker's refusal of an operation.
func isRefusal(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && !connectionLost(err)
}

// reopen is the policy of the loops that open a Conn's channels again and
// re-send publishes: until ctx ends, with the Conn's backoff.
func (c *Conn) reopen() []retry.Option {
	return []retry.Option{
		retry.WithMaxAttempts(math.MaxInt),
		retry.WithBackoff(c.set.backoff),
		retry.WithClassifier(classify),
	}
}
