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
	"github.com/exactlyonce/retry/backoff"
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

// closeTimeout bounds Conn.Close's wait for the broker's answer to the
// connection's close (and the close of a channel that is not a stopping
// consumer's); past it, the connection is closed hard.
const closeTimeout = time.Second

// ErrConnClosed is matched by the errors of a Conn's users once the Conn
// is closed.
var ErrConnClosed = errors.New("amqpconsumer: the connection was closed")

// ErrRefused is matched by the error of an operation the broker refused,
// which doing again would not change: a dial refused for its credentials
// or its vhost (AMQP 403 ACCESS_REFUSED, 530 NOT_ALLOWED), which a Conn
// does not dial again, so that Run and Publish return it; a publish whose
// channel the broker closed in answer (404 NOT_FOUND: no such exchange;
// 403; 406 PRECONDITION_FAILED: a message over the size limit, say),
// which a Publisher does not send again. The error also wraps the
// broker's *amqp.Error, with its code and reason.
var ErrRefused = errors.New("amqpconsumer: the broker refused")

// DialFunc opens an AMQP connection; ctx ends when the Conn is closed,
// and the dial must then end soon (its handshake included): Close waits
// for it.
type DialFunc func(ctx context.Context) (*amqp.Connection, error)

// dialFunc opens an AMQP connection and returns its socket, when it knows
// it (nil otherwise), to be closed hard when the connection does not
// answer its close.
type dialFunc func(ctx context.Context) (*amqp.Connection, net.Conn, error)

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
	backoff backoff.Backoff
	logger  *slog.Logger
}

// WithSetup gives the function that declares the caller's topology on
// every channel the Conn opens (see SetupFunc).
func WithSetup(setup SetupFunc) ConnOption {
	return func(s *connSettings) { s.setup = setup }
}

// WithRedialBackoff sets the wait between the dials of a lost connection
// (default backoff.FullJitter(DefaultRedialBase, DefaultRedialCap)).
func WithRedialBackoff(b backoff.Backoff) ConnOption {
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
	dial dialFunc
	set  connSettings

	life context.Context // ends when the Conn is closed
	end  context.CancelFunc
	wg   sync.WaitGroup

	mu     sync.Mutex
	conn   *amqp.Connection // nil before the first dial and while redialing
	raw    net.Conn         // conn's socket, when known
	round  *dialRound       // the dial in progress, nil when none
	closed bool
	// Since when the dials fail (zero while they do not), how many
	// failed, and the last one's error.
	downSince time.Time
	failed    int
	lastErr   error

	dials atomic.Uint64
}

// dialRound is one run of the redial loop, which its users wait for.
type dialRound struct {
	done  chan struct{} // closed when the loop ends
	began time.Time
	err   error // set before done is closed: the broker's refusal, if it refused
}

// Dial returns a Conn to the broker at url (amqp://user:pass@host:port/vhost),
// with heartbeats every DefaultHeartbeat and each dial bounded by
// DefaultDialTimeout. It does not connect: the Conn's first user does,
// waiting for the broker if it is down. Only a url that does not parse
// fails. Closing the Conn cuts a dial in progress, its AMQP handshake
// included.
func Dial(url string, opts ...ConnOption) (*Conn, error) {
	if _, err := amqp.ParseURI(url); err != nil {
		return nil, fmt.Errorf("amqpconsumer: %w", err)
	}
	return newConn(func(ctx context.Context) (*amqp.Connection, net.Conn, error) {
		var (
			raw    net.Conn
			unhook func() bool
		)
		dial := dialContext(ctx, DefaultDialTimeout)
		conn, err := amqp.DialConfig(url, amqp.Config{
			Heartbeat: DefaultHeartbeat,
			Locale:    "en_US",
			Dial: func(network, addr string) (net.Conn, error) {
				c, err := dial(network, addr)
				if err != nil {
					return nil, err
				}
				// ctx covers the handshake as well: its end closes the socket.
				raw, unhook = c, context.AfterFunc(ctx, func() { _ = c.Close() })
				return c, nil
			},
		})
		if unhook != nil && !unhook() {
			// ctx ended during the handshake, and closed the socket (which
			// amqp091-go may have taken for a refusal of the credentials).
			if err == nil {
				_ = conn.CloseDeadline(time.Now())
			}
			return nil, nil, ctx.Err()
		}
		if err != nil {
			return nil, nil, err
		}
		return conn, raw, nil
	}, opts), nil
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
// with a TLS configuration, say). It does not connect: see Dial. dial must
// end soon once its context ends, its handshake included (give
// amqp.Config a Dial func that closes the socket then): Close waits for it.
func NewConn(dial DialFunc, opts ...ConnOption) *Conn {
	return newConn(func(ctx context.Context) (*amqp.Connection, net.Conn, error) {
		conn, err := dial(ctx)
		return conn, nil, err
	}, opts)
}

func newConn(dial dialFunc, opts []ConnOption) *Conn {
	set := connSettings{
		backoff: backoff.FullJitter(DefaultRedialBase, DefaultRedialCap),
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

// Close closes the connection and ends the dial in progress, its
// handshake included; the Conn's users then fail with ErrConnClosed. It
// waits for the dial to end, and for the broker's answer to the close up
// to a second, after which it closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closed = true
	conn, raw := c.conn, c.raw
	c.conn, c.raw = nil, nil
	c.mu.Unlock()
	c.end()
	c.wg.Wait()
	if conn == nil {
		return nil
	}
	if err := shut(conn, raw, closeTimeout); err != nil {
		return fmt.Errorf("amqpconsumer: close: %w", err)
	}
	return nil
}

// shut closes conn, waiting up to wait for the broker's answer; then it
// closes raw, conn's socket, when known. A connection already closed is
// no error.
func shut(conn *amqp.Connection, raw net.Conn, wait time.Duration) error {
	if conn.IsClosed() {
		return nil
	}
	done := make(chan error, 1)
	// CloseDeadline sets the deadline on the socket: a broker that does
	// not answer ends the close at it.
	go func() { done <- conn.CloseDeadline(time.Now().Add(wait)) }()
	t := time.NewTimer(wait + 100*time.Millisecond)
	defer t.Stop()
	var err error
	select {
	case err = <-done:
	case <-t.C:
		// A read deadline the heartbeats reset: close the socket itself.
		if raw == nil {
			return fmt.Errorf("the broker did not answer the close within %v", wait)
		}
		_ = raw.Close()
		err = <-done
	}
	if errors.Is(err, amqp.ErrClosed) {
		return nil
	}
	return err
}

// drop closes conn hard, one of the Conn's connections that does not
// answer (a stopping consumer's channel did not close in time).
func (c *Conn) drop(conn *amqp.Connection) {
	c.mu.Lock()
	var raw net.Conn
	if c.conn == conn {
		raw = c.raw
	}
	c.mu.Unlock()
	_ = shut(conn, raw, 0)
}

// connection returns the connection, once there is one open: it starts a
// dial when there is none and waits for it until ctx ends. It returns the
// broker's refusal of the dial it waited for (see ErrRefused), and when
// ctx ends while the dials fail, ctx's error with the last failure's.
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
		if c.round == nil {
			c.conn, c.raw = nil, nil
			c.round = &dialRound{done: make(chan struct{}), began: time.Now()}
			c.wg.Add(1)
			go c.redial(c.round)
		}
		round := c.round
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, c.unreachable(round, ctx.Err())
		case <-round.done:
			if round.err != nil {
				return nil, round.err
			}
		}
	}
}

// unreachable returns the error of a wait for round that ctx ended (its
// error ctxErr): why there is no connection, wrapping ctxErr.
func (c *Conn) unreachable(round *dialRound, ctxErr error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastErr == nil {
		return &unreachableError{fmt.Errorf("no answer to the dial begun at %s: %w",
			round.began.Format(timeFormat), ctxErr)}
	}
	return &unreachableError{fmt.Errorf("broker unreachable since %s (%d failed dials): %w: %w",
		c.downSince.Format(timeFormat), c.failed, c.lastErr, ctxErr)}
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// unreachableError is connection's error when its context ended while
// the Conn dialed.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// redial dials until a connection opens, the broker refuses it or the
// Conn is closed.
func (c *Conn) redial(round *dialRound) {
	defer c.wg.Done()
	attempt := 0
	var refusal error
	err := retry.Do(c.life, func(ctx context.Context) error {
		attempt++
		conn, raw, err := c.dial(ctx)
		if err != nil {
			if c.life.Err() != nil {
				return retry.Permanent(ErrConnClosed)
			}
			c.mu.Lock()
			if c.failed == 0 {
				c.downSince = time.Now()
			}
			c.failed++
			c.lastErr = err
			c.mu.Unlock()
			if dialRefused(err) {
				refusal = fmt.Errorf("%w the connection: %w", ErrRefused, err)
				c.set.logger.Error("amqpconsumer: the broker refused the connection", slog.Int("attempt", attempt), slog.Any("error", err))
				return retry.Permanent(refusal)
			}
			c.set.logger.Warn("amqpconsumer: dial failed", slog.Int("attempt", attempt), slog.Any("error", err))
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			_ = shut(conn, raw, 0)
			return retry.Permanent(ErrConnClosed)
		}
		c.conn, c.raw = conn, raw
		c.downSince, c.failed, c.lastErr = time.Time{}, 0, nil
		return nil
	}, retry.WithMaxAttempts(math.MaxInt), retry.WithBackoff(c.set.backoff))
	if err == nil && c.dials.Add(1) > 1 {
		c.set.logger.Info("amqpconsumer: connection restored", slog.Int("attempts", attempt))
	}
	c.mu.Lock()
	round.err = refusal
	c.round = nil
	close(round.done)
	c.mu.Unlock()
}

// dialRefused reports whether err, a dial's, is the broker's refusal of
// the connection: its credentials (amqp091-go's ErrCredentials, when the
// broker closed the socket at the login) or its vhost.
func dialRefused(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && (ae.Code == amqp.AccessRefused || ae.Code == amqp.NotAllowed)
}

// channel opens a channel on the connection (waiting for one, see
// connection) and runs the caller's setup on it.
func (c *Conn) channel(ctx context.Context) (*amqp.Channel, *amqp.Connection, error) {
	conn, err := c.connection(ctx)
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, nil, fmt.Errorf("amqpconsumer: open a channel: %w", err)
	}
	if c.set.setup != nil {
		if err := c.set.setup(ch); err != nil {
			lost := ch.IsClosed() || conn.IsClosed()
			c.closeChannel(ch, conn, time.Now().Add(closeTimeout))
			err = fmt.Errorf("amqpconsumer: setup: %w", err)
			if !lost && !connectionLost(err) {
				err = retry.Permanent(err)
			}
			return nil, nil, err
		}
	}
	return ch, conn, nil
}

// closeChannel closes ch, a channel on conn, waiting for the broker's
// answer until deadline; past it, it closes conn hard, which does not
// answer, when it is the Conn's (c not nil). A channel on a connection of
// the caller's (New's) is left to close in the background.
func (c *Conn) closeChannel(ch *amqp.Channel, conn *amqp.Connection, deadline time.Time) {
	if ch.IsClosed() {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ch.Close()
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	if c == nil || conn == nil {
		return
	}
	c.drop(conn)
	// The connection's end ends the channel's close.
	t.Reset(closeTimeout)
	select {
	case <-done:
	case <-t.C:
	}
}

// connectionLost reports whether err says the connection or the channel
// was lost (a failure worth opening them again for), rather than that the
// broker refused what was asked of it.
func connectionLost(err error) bool {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		if !ae.Server {
			// amqp091-go's own: a read or a write failed (501), the
			// connection or the channel is closed (504).
			return true
		}
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
	return !errors.Is(err, ErrConnClosed) && !errors.Is(err, ErrRefused) && !isRefusal(err)
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
