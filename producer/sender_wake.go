package producer

// How a sender is woken: an answer, a retry due, a partition handed over,
// Close and Flush signal it at once; a message queued (enqueue) signals it
// only when it waits for one, through its state, without a lock.

// A sender's states: working (looking at its partitions or sending), or
// waiting, idle (any message wakes it) or pacing (only a full batch
// does); poked and pokedFull are working with a message, or a full batch,
// queued meanwhile, which it must look at before it waits.
const (
	working int32 = iota
	idling
	pacing
	poked
	pokedFull
)

func (s *sender) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// wakeUp has the sender look at its partitions again.
func (s *sender) wakeUp() {
	s.state.Store(working)
	s.signal()
}

// enqueued tells s that a message was queued to one of its partitions
// (full: a full batch waits there now). It wakes s only when s waits for
// it, without a lock: a sender still looking is poked, and looks again
// before it waits (rest).
func (s *sender) enqueued(full bool) {
	for {
		switch st := s.state.Load(); {
		case st == idling || st == pacing && full:
			if s.state.CompareAndSwap(st, working) {
				s.signal()
				return
			}
		case st == working:
			to := poked
			if full {
				to = pokedFull
			}
			if s.state.CompareAndSwap(st, to) {
				return
			}
		case st == poked && full:
			if s.state.CompareAndSwap(st, pokedFull) {
				return
			}
		default:
			return
		}
	}
}

// rest has s wait as idle or pacing (to), unless a message it must look at
// first was queued since it began to look (false).
func (s *sender) rest(to int32) bool {
	for {
		st := s.state.Load()
		if st == pokedFull || st == poked && to == idling {
			s.state.Store(working)
			return false
		}
		if s.state.CompareAndSwap(st, to) {
			return true
		}
	}
}
