package consumer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"weak"

	"github.com/exactlyonce/retry/idempotency"
)

// ErrReplaced is matched by the error of Run on a Consumer that a newer
// Consumer of its name on the same Runner replaced (see New).
var ErrReplaced = errors.New("consumer: replaced by a newer Consumer of its name on the Runner")

// registration is what a Runner has registered under a consumer's name:
// it runs a stored message with the consumer that holds the name now.
type registration struct {
	mu      sync.Mutex
	current *Consumer
}

// regKey names a registration: a Runner, without keeping it alive, and a
// consumer's name.
type regKey struct {
	runner weak.Pointer[idempotency.Runner]
	name   string
}

var (
	registryMu sync.Mutex
	// registry maps a regKey to its weak.Pointer[registration]: the
	// Runner's registered Work holds the registration, so both go when
	// the Runner does.
	registry = map[regKey]weak.Pointer[registration]{}
)

// register registers c's handler with its Runner under its name, or
// passes the name's registration to c when an earlier Consumer of the name
// holds it and is not running.
func register(c *Consumer) (err error) {
	k := regKey{runner: weak.Make(c.cfg.Runner), name: c.cfg.Name}
	registryMu.Lock()
	defer registryMu.Unlock()
	if wp, ok := registry[k]; ok {
		if reg := wp.Value(); reg != nil {
			return reg.pass(c)
		}
	}
	reg := &registration{current: c}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("consumer: register %q with the Runner: %v", c.cfg.Name, p)
		}
	}()
	c.cfg.Runner.Register(c.cfg.Name, reg.resume)
	registry[k] = weak.Make(reg)
	runtime.AddCleanup(c.cfg.Runner, func(k regKey) {
		registryMu.Lock()
		delete(registry, k)
		registryMu.Unlock()
	}, k)
	c.reg = reg
	return nil
}

// pass gives the registration to c unless its consumer is running.
func (reg *registration) pass(c *Consumer) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.current.running.Load() > 0 {
		return fmt.Errorf("consumer: %q runs on this Runner already; stop it before making another", c.cfg.Name)
	}
	reg.current, c.reg = c, reg
	return nil
}

// start counts a Run of c, unless a newer Consumer replaced c; done
// uncounts it.
func (reg *registration) start(c *Consumer) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.current != c {
		return fmt.Errorf("consumer %s: %w", c.cfg.Name, ErrReplaced)
	}
	c.running.Add(1)
	return nil
}

func (reg *registration) done(c *Consumer) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	c.running.Add(-1)
}

// resume is the registered Work: the current consumer's.
func (reg *registration) resume(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
	reg.mu.Lock()
	c := reg.current
	reg.mu.Unlock()
	return c.resume(ctx, e)
}
