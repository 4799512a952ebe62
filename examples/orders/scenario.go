package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/examples/internal/opspage"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/opsui"
)

// kind is a kind of consumer.
type kind int

const (
	kindOurs kind = iota
	kindPlain
	kindMarkBefore
)

func (k kind) String() string {
	return [...]string{"exactlyonce", "plain (ack after handler)", "mark before (Watermill-style)"}[k]
}

// Settings of a scenario.
const (
	// consumerName is the durable consumer (JetStream) and the caller of our keys.
	consumerName = "ship"
	// maxInFlight is how many messages an instance handles at once.
	maxInFlight = 32
	// deliveryLimit is the brokers' delivery limit for the plain and
	// mark-before consumers (RabbitMQ 4.0's default for quorum queues),
	// which would cycle a failing message for ever without one. Ours
	// counts deliveries itself (consumer.DefaultMaxDeliveries, the same
	// 20), on a broker without a limit, as its quick start sets it up.
	deliveryLimit = 20
	// ackWait is JetStream's ack deadline, and our Runner's lease: how long
	// the killed instance's messages stay claimed.
	ackWait = 2 * time.Second
	// settleFor is how long a scenario's state must hold to count as settled.
	settleFor = 500 * time.Millisecond
	// scenarioLimit bounds one scenario.
	scenarioLimit = 4 * time.Minute
)

// result is what one kind of consumer did on one broker.
type result struct {
	Broker, Consumer string
	// Published is the number of orders; Copies the messages sent for
	// them, the publisher's retries included.
	Published, Copies int
	// Effects is the number of reservations the warehouse performed,
	// Duplicates those beyond one per order.
	Effects, Duplicates int
	// Lost counts the orders never shipped and not dead-lettered.
	Lost int
	// DeadLettered counts the orders the broker gave up on (dead-lettered,
	// or dropped at the delivery limit) or the consumer terminated.
	DeadLettered int
	// Killed is the instance killed and when; Frozen the handlers it
	// stopped.
	Killed string
	Frozen int
	// Cuts is how many times -cut dropped every connection, Reconnects
	// how many times our consumers consumed again after that.
	Cuts, Reconnects int
	// Settled is false when the scenario hit its time limit.
	Settled bool
	Elapsed time.Duration
}

// scenario is one kind of consumer on one broker.
type scenario struct {
	cfg    config
	kind   kind
	b      broker
	store  func(context.Context) (idempotency.Store, error)
	wh     *warehouse
	faults *faults
	orders []string
	log    io.Writer

	killAt   int
	killed   atomic.Bool
	killNote atomic.Value // string
	release  chan struct{}
	frozen   atomic.Int64

	// marks are the mark-before consumer's marks: seen, never unmarked.
	marks sync.Map

	mu        sync.Mutex
	instances []*instance
	completed map[string]bool // ours: orders whose outcome is stored
	consumers []statser
	cut       *cutter // -cut's proxy, or nil
	wg        sync.WaitGroup

	// page, if not nil, shows our consumers' live instance.
	page *opspage.Page
}

// brokerLimit is the delivery limit the scenario's broker gets: none for
// our consumer, deliveryLimit for the others.
func (s *scenario) brokerLimit() int {
	if s.kind == kindOurs {
		return 0
	}
	return deliveryLimit
}

// runScenario publishes the orders to a fresh stream or queue of b and
// has them shipped by two instances of kind, one killed and restarted.
func runScenario(ctx context.Context, cfg config, b broker, k kind, store func(context.Context) (idempotency.Store, error), log io.Writer,
	page *opspage.Page) (result, error) {
	s := &scenario{
		cfg: cfg, kind: k, b: b, store: store, log: log, page: page,
		wh:        newWarehouse(cfg.Outage, cfg.Orders*6/10),
		faults:    newFaults(cfg.Seed, cfg.Fail),
		killAt:    cfg.Orders / 3,
		release:   make(chan struct{}),
		completed: make(map[string]bool),
	}
	setScenario(b, s)
	for i := range cfg.Orders {
		s.orders = append(s.orders, fmt.Sprintf("order-%06d", i))
	}
	if err := b.setup(ctx); err != nil {
		return result{}, err
	}
	defer b.teardown()
	if cfg.Cut {
		c, err := newCutter(brokerURL(cfg, b), cfg.Orders)
		if err != nil {
			return result{}, err
		}
		defer c.close()
		s.cut = c
	}
	copies, err := s.publish(ctx)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	for _, name := range []string{"A", "B"} {
		if err := s.start(ctx, name); err != nil {
			s.stop()
			return result{}, err
		}
	}
	settled := s.awaitSettled(ctx)
	elapsed := time.Since(start)
	s.stop()
	res := result{Broker: b.name(), Consumer: k.String(), Published: cfg.Orders, Copies: copies,
		Settled: settled, Elapsed: elapsed, Frozen: int(s.frozen.Load())}
	if note, ok := s.killNote.Load().(string); ok {
		res.Killed = note
	}
	res.Cuts = s.cut.cuts()
	for _, c := range s.consumers {
		res.Reconnects += int(c.Stats().Reconnects)
	}
	dead, err := b.deadLettered(ctx)
	if err != nil {
		return result{}, err
	}
	res.Effects, _ = s.wh.totals()
	for _, o := range s.orders {
		switch {
		case s.wh.shipped(o):
		case dead[o]:
			res.DeadLettered++
		default:
			res.Lost++
		}
	}
	_, distinct := s.wh.totals()
	res.Duplicates = res.Effects - distinct
	for o := range dead {
		if s.wh.shipped(o) {
			res.DeadLettered++ // dead-lettered after its effect
		}
	}
	return res, nil
}

// publish sends every order, some twice (a publisher's retry after a lost
// ack), and returns how many messages it sent.
func (s *scenario) publish(ctx context.Context) (int, error) {
	var msgs []message
	for _, o := range s.orders {
		m := message{id: o, body: []byte(`{"order":"` + o + `","qty":1}`)}
		msgs = append(msgs, m)
		if uniform(s.cfg.Seed, "dup:"+o, 0) < s.cfg.Dup {
			msgs = append(msgs, m)
		}
	}
	return len(msgs), s.b.publish(ctx, msgs)
}

// start starts an instance named name.
func (s *scenario) start(ctx context.Context, name string) error {
	inst := &instance{name: name, s: s, done: make(chan struct{})}
	rctx, cancel := context.WithCancel(ctx)
	inst.cancel = cancel
	var run func(context.Context) error
	var err error
	if s.kind == kindOurs {
		run, err = s.startOurs(rctx, inst)
	} else {
		run, err = s.b.simple(rctx, inst, s.kind == kindMarkBefore)
	}
	if err != nil {
		cancel()
		return err
	}
	s.mu.Lock()
	s.instances = append(s.instances, inst)
	s.mu.Unlock()
	s.show()
	s.wg.Go(func() {
		defer close(inst.done)
		if err := run(rctx); err != nil && rctx.Err() == nil && !inst.dead.Load() {
			fmt.Fprintf(s.log, "%s %s instance %s stopped: %v\n", s.b.name(), s.kind, inst.name, err)
		}
	})
	return nil
}

// startOurs makes our consumer for inst: its own Runner (on the shared
// store, gated by inst's life) and retry budget for the warehouse.
func (s *scenario) startOurs(ctx context.Context, inst *instance) (func(context.Context) error, error) {
	store, err := s.store(ctx)
	if err != nil {
		return nil, err
	}
	runner := idempotency.NewRunner(gate(store, &inst.dead), idempotency.WithLease(ackWait),
		idempotency.WithObserver(s.observe))
	inst.budget = retry.NewBudget(0.1, 1, 20)
	cfg := consumer.Config{
		Runner: runner, Name: consumerName, Handler: s.oursHandler(inst), MaxInFlight: maxInFlight,
		DependsOn: []*retry.Budget{inst.budget}, Logger: quietLogger(), Observer: s.cfg.telemetry.observer(s.b.name()),
	}
	c, run, err := s.b.ours(ctx, inst, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.telemetry.observeStats(s.b.name()+"/"+consumerName+"/"+inst.name, c); err != nil {
		return nil, err
	}
	inst.runner, inst.consumer = runner, c
	s.mu.Lock()
	s.consumers = append(s.consumers, c)
	s.mu.Unlock()
	return run, nil
}

// show points the operator page at the Runner of the latest live
// instance of ours, with every instance's budget and consumer.
func (s *scenario) show() {
	if s.page == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var opts opsui.Config
	for _, inst := range s.instances {
		if inst.consumer == nil {
			continue
		}
		if !inst.dead.Load() {
			opts.Runner = inst.runner
		}
		name := s.b.name() + " " + inst.name
		budget := inst.budget
		opts.Clients = append(opts.Clients, opsui.Client{Name: name + " → warehouse", Budget: budget,
			Dependencies: func() []retry.DependencyStats {
				st := budget.DependencyStats()
				st.Name = "warehouse"
				return []retry.DependencyStats{st}
			}})
		opts.Consumers = append(opts.Consumers, opsui.Consumer{Name: name, Stats: inst.consumer.Stats})
	}
	if opts.Runner != nil {
		s.page.Show(opts)
	}
}

// observe notes the orders whose outcome is stored.
func (s *scenario) observe(_ context.Context, o idempotency.Observation) {
	if o.Err != nil {
		return
	}
	switch o.Outcome {
	case idempotency.OutcomeExecuted, idempotency.OutcomeTakenOver, idempotency.OutcomeReconciled:
		s.mu.Lock()
		s.completed[o.Key] = true
		s.mu.Unlock()
	}
}

// oursHandler ships an order: the warehouse call is a recovery step whose
// downstream key the warehouse deduplicates by, made with retry.Do on the
// instance's budget, which rides through the warehouse's outage.
func (s *scenario) oursHandler(inst *instance) consumer.Handler {
	return func(ctx context.Context, m *consumer.Message) error {
		e := idempotency.FromContext(ctx)
		return s.ship(inst, m.Key, func() error {
			_, err := e.Step(ctx, "reserve", func(ctx context.Context, key string) ([]byte, error) {
				return nil, retry.Do(ctx, func(context.Context) error { return s.wh.reserve(m.Key, key) },
					retry.WithBudget(inst.budget))
			})
			return err
		})
	}
}

// ship is every kind's handler: an injected failure before the warehouse
// call or after it, the call, and the kill point between the call and the
// end (the ack, for the plain consumer).
func (s *scenario) ship(inst *instance, order string, reserve func() error) error {
	if !inst.alive() {
		return errKilled
	}
	before, after := s.faults.next(order)
	if before {
		return errFlaky
	}
	if err := reserve(); err != nil {
		return err
	}
	if s.cut != nil {
		performed, _ := s.wh.totals()
		s.cut.maybeCut(performed)
	}
	s.maybeKill(inst)
	if !inst.alive() {
		return errKilled
	}
	if after {
		return errFlaky
	}
	return nil
}

// simpleHandle is the plain and mark-before consumers' handling of one
// delivery: the mark-before one acks what it marked before, marks, and
// never unmarks; both ack after the handler, and nak when it failed.
func (s *scenario) simpleHandle(inst *instance, id string, markBefore bool, ack, nak func()) {
	if markBefore {
		if _, seen := s.marks.LoadOrStore(id, true); seen {
			ack()
			return
		}
	}
	err := s.ship(inst, id, func() error { return s.wh.reserve(id, "") })
	switch {
	case errors.Is(err, errKilled):
	case err != nil:
		nak()
	default:
		ack()
	}
}

// maybeKill kills inst, once, at the first handler past its warehouse call
// once a third of the orders shipped, and starts another instance.
func (s *scenario) maybeKill(inst *instance) {
	performed, _ := s.wh.totals()
	if performed < s.killAt || !s.killed.CompareAndSwap(false, true) {
		return
	}
	s.killNote.Store(fmt.Sprintf("instance %s at reservation %d", inst.name, performed))
	inst.kill()
	s.show()
	go func() {
		if err := s.start(context.Background(), inst.name+"'"); err != nil {
			fmt.Fprintf(s.log, "restart of %s failed: %v\n", inst.name, err)
		}
	}()
}

// awaitSettled waits until every order is settled: the broker holds
// nothing for the consumer and, for ours, every outcome is stored; it
// reports false at the scenario's time limit.
func (s *scenario) awaitSettled(ctx context.Context) bool {
	deadline := time.Now().Add(scenarioLimit)
	var since time.Time
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if s.settledNow(ctx) {
			if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) >= settleFor {
				return true
			}
		} else {
			since = time.Time{}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// settledNow reports whether the scenario looks settled now.
func (s *scenario) settledNow(ctx context.Context) bool {
	pending, err := s.b.pending(ctx)
	if err != nil || pending > 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, inst := range s.instances {
		if !inst.dead.Load() && inst.inHand.Load() > 0 {
			return false
		}
	}
	if s.kind != kindOurs {
		return true
	}
	var parked uint64
	for _, c := range s.consumers {
		parked += c.Stats().Parked
	}
	return len(s.completed)+int(parked) >= len(s.orders)
}

// stop ends every instance and releases the killed one's handlers.
func (s *scenario) stop() {
	s.mu.Lock()
	insts := s.instances
	s.mu.Unlock()
	for _, inst := range insts {
		inst.cancel()
	}
	close(s.release)
	s.wg.Wait()
	for _, inst := range insts {
		if inst.close != nil && !inst.dead.Load() {
			inst.close()
		}
	}
}
