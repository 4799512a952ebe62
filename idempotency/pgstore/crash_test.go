package pgstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// provider is a fake payment provider: it records one effect per downstream
// idempotency key, however often that key is sent.
type provider struct {
	mu      sync.Mutex
	calls   map[string]int    // requests per key
	charges map[string]string // effect per key
	*httptest.Server
}

func newProvider(t *testing.T) *provider {
	p := &provider{calls: map[string]int{}, charges: map[string]string{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		p.mu.Lock()
		defer p.mu.Unlock()
		p.calls[key]++
		ch, ok := p.charges[key]
		if !ok {
			ch = fmt.Sprintf("ch_%d", len(p.charges)+1)
			p.charges[key] = ch
		}
		_, _ = io.WriteString(w, ch)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *provider) stats() (calls, effects int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.calls {
		calls += n
	}
	return calls, len(p.charges)
}

// child is a server process started from the test binary.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	url   string
}

// startChild starts a server process on schema with the given store time
// shift and gate, and waits until it listens.
func startChild(t *testing.T, schema, dep string, shift time.Duration, gate string) *child {
	t.Helper()
	return startChildEnv(t, "server", schema, dep, shift, gate)
}

// startChildMode starts a child process in mode and waits until it is ready.
func startChildMode(t *testing.T, mode, schema, dep string) *child {
	t.Helper()
	return startChildEnv(t, mode, schema, dep, 0, "")
}

func startChildEnv(t *testing.T, mode, schema, dep string, shift time.Duration, gate string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childModeEnv+"="+mode, childSchemaEnv+"="+schema, childDepEnv+"="+dep,
		childShiftEnv+"="+shift.String(), childGateEnv+"="+gate, dsnEnv+"="+dsn())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-readDone
		_ = cmd.Wait()
	})
	c.url = strings.TrimPrefix(c.expect(t, "listening "), "listening ")
	return c
}

// expect returns the child's next line, which must start with prefix. The
// wait is bounded; the child's own progress is the condition.
func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-c.lines:
		require.True(t, ok, "child exited while the test waited for %q", prefix)
		require.True(t, strings.HasPrefix(line, prefix), "child said %q, want %q", line, prefix)
		return line
	case <-time.After(60 * time.Second):
		t.Fatalf("child did not say %q within 60s", prefix)
		return ""
	}
}

// kill ends the child with SIGKILL and waits for it to be gone.
func (c *child) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	for range c.lines {
	}
	err := c.cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())
}

// result is one HTTP exchange with a child.
type result struct {
	status   int
	body     string
	replayed bool
	err      error
}

// post sends the order request with key; the client never retries on its own.
func post(client *http.Client, url, key string) result {
	req, err := http.NewRequest(http.MethodPost, url+"/orders", strings.NewReader(`{"sku":"book","qty":1}`))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Idempotency-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return result{status: res.StatusCode, body: string(b), replayed: res.Header.Get("Idempotent-Replayed") == "true", err: err}
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// A server process is killed (SIGKILL) after it called the payment provider
// and before it completed. The restarted server, whose clock is past the
// lease, takes the stale lease over on the client's retry, calls the provider
// again with the same downstream key, and completes: one charge.
func TestCrashAfterExternalCallRecovers(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool)
	prov := newProvider(t)
	client := newClient(t)
	ctx := context.Background()

	first := startChild(t, schema, prov.URL, 0, gateAfterCall)
	sent := make(chan result, 1)
	go func() { sent <- post(client, first.url, "order-42") }()
	first.expect(t, "called 1")
	first.expect(t, gateAfterCall+" 1")
	first.kill(t)
	require.Error(t, (<-sent).err, "the first request dies with its server")

	var (
		point   []byte
		attempt int64
	)
	require.NoError(t, pool.QueryRow(ctx, "SELECT recovery_point, attempt FROM "+table(schema, "idempotency_keys")).Scan(&point, &attempt))
	assert.Equal(t, "begin:charge", string(point))
	assert.EqualValues(t, 1, attempt)

	// The restarted server sees the database clock two hours on: the lease is stale.
	second := startChild(t, schema, prov.URL, 2*time.Hour, "")
	res := post(client, second.url, "order-42")
	require.NoError(t, res.err)
	assert.Equal(t, http.StatusCreated, res.status, res.body)
	assert.Equal(t, "order order-42#2 charge ch_1", res.body)
	second.expect(t, "called 2")
	second.expect(t, "served 201")

	calls, effects := prov.stats()
	assert.Equal(t, 2, calls, "the retry called the provider again")
	assert.Equal(t, 1, effects, "with the same downstream key: one charge")
	prov.mu.Lock()
	assert.Equal(t, 2, prov.calls[idempotency.DownstreamKey("alice", "order-42", "charge")])
	prov.mu.Unlock()
	assert.False(t, written(t, pool, schema, "order-42#1"))
	assert.True(t, written(t, pool, schema, "order-42#2"))
	assert.Equal(t, 1, countRows(t, pool, schema, "outbox"))

	// A further retry replays the stored response, calling nobody.
	again := post(client, second.url, "order-42")
	require.NoError(t, again.err)
	assert.True(t, again.replayed)
	assert.Equal(t, res.body, again.body)
	calls, _ = prov.stats()
	assert.Equal(t, 2, calls)
}

// The original holder is paused (SIGSTOP) inside its completion transaction,
// after its local write. A second server takes the lease over, resumes after
// the saved recovery point without calling the provider again, and
// completes. When the original wakes, its completion fails with
// ErrLeaseLost and its local write and outbox message roll back.
func TestPausedHolderCannotOverwrite(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool)
	prov := newProvider(t)
	client := newClient(t)

	first := startChild(t, schema, prov.URL, 0, gateBeforeComplete)
	sent := make(chan result, 1)
	go func() { sent <- post(client, first.url, "order-7") }()
	first.expect(t, "called 1")
	first.expect(t, gateBeforeComplete+" 1")
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGSTOP))

	second := startChild(t, schema, prov.URL, 2*time.Hour, "")
	res := post(client, second.url, "order-7")
	require.NoError(t, res.err)
	assert.Equal(t, http.StatusCreated, res.status, res.body)
	assert.Equal(t, "order order-7#2 charge ch_1", res.body)
	second.expect(t, "served 201")

	// Wake the original holder and let it try to complete.
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGCONT))
	_, err := io.WriteString(first.stdin, "go\n")
	require.NoError(t, err)
	first.expect(t, "served 409")
	late := <-sent
	require.NoError(t, late.err)
	assert.Equal(t, http.StatusConflict, late.status)
	assert.Contains(t, late.body, "idempotency_lease_lost")

	calls, effects := prov.stats()
	assert.Equal(t, 1, calls, "the recovery point saved the result: no second call")
	assert.Equal(t, 1, effects)
	assert.False(t, written(t, pool, schema, "order-7#1"), "the late holder's write rolled back")
	assert.True(t, written(t, pool, schema, "order-7#2"))
	assert.Equal(t, 1, countRows(t, pool, schema, "outbox"))
	replay := post(client, second.url, "order-7")
	require.NoError(t, replay.err)
	assert.Equal(t, res.body, replay.body)
	assert.True(t, replay.replayed)
	var status int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT status FROM "+table(schema, "idempotency_keys")).Scan(&status))
	assert.Equal(t, int(idempotency.StateCompleted), status)
}

// A relay process is killed with SIGKILL in the middle of a batch (its
// receiver has taken some messages and holds the next request). Its
// transaction dies with it, so a new relay delivers the whole batch again
// with the same ids: nothing is lost.
func TestRelayKilledMidBatch(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool)
	s, err := pgstore.New(pool, pgstore.WithSchema(schema))
	require.NoError(t, err)
	ids := enqueue(t, s, 10)

	k := newSink()
	hold := make(chan struct{}) // the receiver stalls the 4th delivery until the relay is dead
	held := make(chan struct{})
	var n atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if n.Add(1) == 4 {
			close(held)
			<-hold
			return
		}
		_ = k.deliver(r.Context(), pgstore.OutboxMessage{ID: r.Header.Get("Idempotency-Key")})
	}))
	defer recv.Close()
	defer close(hold)

	relay := startChildMode(t, "relay", schema, recv.URL)
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("the relay did not deliver 4 messages within 60s")
	}
	relay.kill(t)
	// The dead relay's transaction is rolled back by the server; wait for
	// that real condition, bounded.
	waitFor(t, func() bool { return pending(t, s, schema) == 10 && !locked(t, pool, schema) })

	delivered, err := (&pgstore.Relay{Store: s, Deliver: k.deliver}).RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 10, delivered)
	assert.Zero(t, pending(t, s, schema))
	for i, id := range ids {
		want := 1
		if i < 3 {
			want = 2 // taken before the kill, and again
		}
		assert.Equal(t, want, k.count(id), "message %d", i)
	}
}

// locked reports whether some outbox row is still locked by another connection.
func locked(t *testing.T, pool *pgxpool.Pool, schema string) bool {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM (SELECT 1 FROM "+
		table(schema, "outbox")+" FOR UPDATE SKIP LOCKED) x").Scan(&n))
	return n != countRows(t, pool, schema, "outbox")
}
