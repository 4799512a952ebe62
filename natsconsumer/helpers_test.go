package natsconsumer_test

import (
	"sync"
)

// effects counts the effects a handler performed, per key.
type effects struct {
	mu   sync.Mutex
	runs map[string]int
}

func (e *effects) add(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runs == nil {
		e.runs = make(map[string]int)
	}
	e.runs[key]++
	return e.runs[key]
}

func (e *effects) count(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[key]
}

// total returns the number of effects and of keys with one.
func (e *effects) total() (all, distinct int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.runs {
		all += n
		distinct++
	}
	return all, distinct
}
