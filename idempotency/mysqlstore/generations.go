package mysqlstore

import (
	"context"
	"fmt"
	"sync"
)

// generationBlock is how many generations a store takes from the table at
// a time.
const generationBlock = 1024

// generations hands out the generations of a block the store took from the
// generations table. A block is taken by one committed UPDATE, so no two
// stores (or two blocks) share a generation and none is given twice, even
// after a restart: a block a store did not use up is lost, never reused.
type generations struct {
	mu         sync.Mutex
	next, stop int64
}

// newGeneration returns a generation never given before.
func (s *Store) newGeneration(ctx context.Context) (int64, error) {
	g := &s.gens
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.next >= g.stop {
		res, err := s.execAlone(ctx, s.q.nextGenerations, generationBlock)
		if err != nil {
			return 0, fmt.Errorf("take generations: %w", classify(err))
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return 0, fmt.Errorf("take generations: %d rows, %v (did Migrate make the tables?)", n, err)
		}
		stop, err := res.LastInsertId()
		if err != nil {
			return 0, fmt.Errorf("take generations: %w", err)
		}
		g.next, g.stop = stop-generationBlock, stop
	}
	n := g.next
	g.next++
	return n, nil
}
