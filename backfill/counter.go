package backfill

import "sync"

// Counter counts a backfill's rows acknowledged in read order. Rows are
// numbered from 0 as they are read and handed over; Kafka acknowledges
// them in any order; Acked says how many are acknowledged together with
// every row before them, which is how far a resume may skip. The zero
// Counter is ready; it is safe for concurrent use (the sink's completions
// ack while the reader asks).
type Counter struct {
	mu    sync.Mutex
	acked uint64              // rows 0 … acked-1 are all acknowledged
	ahead map[uint64]struct{} // rows acknowledged past a row that is not
}

// Ack records that row n is acknowledged. Acking a row twice is ignored.
func (c *Counter) Ack(n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < c.acked {
		return
	}
	if n > c.acked {
		if c.ahead == nil {
			c.ahead = map[uint64]struct{}{}
		}
		c.ahead[n] = struct{}{}
		return
	}
	c.acked++
	for {
		if _, ok := c.ahead[c.acked]; !ok {
			return
		}
		delete(c.ahead, c.acked)
		c.acked++
	}
}

// Acked returns how many rows are acknowledged with every row before them.
func (c *Counter) Acked() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked
}
