package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
)

// natsBroker is NATS JetStream: a stream of the scenario's own (memory
// storage), a durable pull consumer with AckWait ackWait and the
// scenario's delivery limit (none for ours). Messages are published with Nats-Msg-Id = the order, so
// the stream drops a publisher's repeat within its duplicate window.
type natsBroker struct {
	url, stream string
	s           *scenario
	nc          *nats.Conn
	js          jetstream.JetStream
	advisories  []*nats.Subscription

	mu   sync.Mutex
	seqs map[uint64]string // stream sequence -> order
	dead map[string]bool
}

func (b *natsBroker) name() string { return "NATS JetStream" }

func (b *natsBroker) setup(ctx context.Context) error {
	b.stream = fmt.Sprintf("ORDERS_%d", time.Now().UnixNano())
	b.seqs, b.dead = make(map[uint64]string), make(map[string]bool)
	nc, err := nats.Connect(b.url)
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", b.url, err)
	}
	b.nc = nc
	if b.js, err = jetstream.New(nc); err != nil {
		return err
	}
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: b.stream, Subjects: []string{b.stream + ".orders"},
		Storage: jetstream.MemoryStorage}); err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	if _, err := b.js.CreateOrUpdateConsumer(ctx, b.stream, jetstream.ConsumerConfig{Durable: consumerName,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: b.s.brokerLimit(), MaxAckPending: 4 * maxInFlight}); err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	for _, adv := range []string{"MAX_DELIVERIES", "MSG_TERMINATED"} {
		sub, err := nc.Subscribe("$JS.EVENT.ADVISORY.CONSUMER."+adv+"."+b.stream+"."+consumerName, b.advised)
		if err != nil {
			return err
		}
		b.advisories = append(b.advisories, sub)
	}
	return nc.Flush()
}

// advised notes a message the consumer gave up on.
func (b *natsBroker) advised(m *nats.Msg) {
	var a struct {
		Seq uint64 `json:"stream_seq"`
	}
	if json.Unmarshal(m.Data, &a) != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dead[b.seqs[a.Seq]] = true
}

func (b *natsBroker) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, sub := range b.advisories {
		_ = sub.Unsubscribe()
	}
	_ = b.js.DeleteStream(ctx, b.stream)
	b.nc.Close()
}

func (b *natsBroker) publish(ctx context.Context, msgs []message) error {
	const window = 512
	for start := 0; start < len(msgs); start += window {
		var futures []jetstream.PubAckFuture
		for _, m := range msgs[start:min(start+window, len(msgs))] {
			f, err := b.js.PublishMsgAsync(&nats.Msg{Subject: b.stream + ".orders", Data: m.body, Header: nats.Header{}},
				jetstream.WithMsgID(m.id))
			if err != nil {
				return fmt.Errorf("publish: %w", err)
			}
			futures = append(futures, f)
		}
		for i, f := range futures {
			select {
			case ack := <-f.Ok():
				b.mu.Lock()
				b.seqs[ack.Sequence] = msgs[start+i].id
				b.mu.Unlock()
			case err := <-f.Err():
				return fmt.Errorf("publish: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// connect connects inst, through its dialer.
// nats.go reconnects (-cut) until the instance is killed.
func (b *natsBroker) connect(ctx context.Context, inst *instance) (*nats.Conn, jetstream.Consumer, error) {
	nc, err := nats.Connect(b.url, nats.SetCustomDialer(dialerFunc(inst.dial)),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // the cuts' write errors are on purpose
	if err != nil {
		return nil, nil, err
	}
	inst.close = nc.Close
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, err
	}
	cons, err := js.Consumer(ctx, b.stream, consumerName)
	return nc, cons, err
}

// dialerFunc makes a function a nats.CustomDialer.
type dialerFunc func(network, addr string) (net.Conn, error)

func (f dialerFunc) Dial(network, addr string) (net.Conn, error) { return f(network, addr) }

func (b *natsBroker) ours(ctx context.Context, inst *instance, cfg consumer.Config) (statser, func(context.Context) error, error) {
	nc, cons, err := b.connect(ctx, inst)
	if err != nil {
		return nil, nil, err
	}
	c, err := natsconsumer.New(cons, cfg, natsconsumer.WithConn(nc))
	if err != nil {
		return nil, nil, err
	}
	return c, c.Run, nil
}

func (b *natsBroker) simple(ctx context.Context, inst *instance, markBefore bool) (func(context.Context) error, error) {
	_, cons, err := b.connect(ctx, inst)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		var wg sync.WaitGroup
		defer wg.Wait()
		slots := make(chan struct{}, maxInFlight)
		for {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			n := 1
			for n < maxInFlight && len(slots) < cap(slots) {
				slots <- struct{}{}
				n++
			}
			got := 0
			batch, err := cons.Fetch(n, jetstream.FetchMaxWait(time.Second))
			if err == nil {
				for msg := range batch.Messages() {
					got++
					wg.Go(func() {
						defer func() { <-slots }()
						b.s.simpleHandle(inst, msg.Headers().Get(jetstream.MsgIDHeader), markBefore,
							func() { _ = msg.Ack() }, func() { _ = msg.Nak() })
					})
				}
			}
			for range n - got {
				<-slots
			}
			if err != nil || (batch != nil && batch.Error() != nil) {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}, nil
}

func (b *natsBroker) pending(ctx context.Context) (int, error) {
	c, err := b.js.Consumer(ctx, b.stream, consumerName)
	if err != nil {
		return 0, err
	}
	i, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int(i.NumPending) + i.NumAckPending, nil
}

func (b *natsBroker) deadLettered(context.Context) (map[string]bool, error) {
	_ = b.nc.Flush()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]bool, len(b.dead))
	for o := range b.dead {
		out[o] = true
	}
	return out, nil
}
