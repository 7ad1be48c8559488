package sink

import "fmt"

// keySpans records, for each key, the range of its event numbers each
// partition holds, to check that a key moved to another partition (a
// topic grown) never has its events interleave across the two.
type keySpans map[string]map[int32]*struct{ lo, hi uint32 }

// add records event n of key in partition p.
func (s keySpans) add(key string, p int32, n uint32) {
	if s[key] == nil {
		s[key] = map[int32]*struct{ lo, hi uint32 }{}
	}
	if r := s[key][p]; r == nil {
		s[key][p] = &struct{ lo, hi uint32 }{n, n}
	} else {
		r.lo, r.hi = min(r.lo, n), max(r.hi, n)
	}
}

// check reports each interleaving to problem and returns how many keys
// are in more than one partition.
func (s keySpans) check(problem func(string)) (moved int) {
	for key, ps := range s {
		moved += min(len(ps)-1, 1)
		for p, a := range ps {
			for q, b := range ps {
				if p != q && a.lo < b.lo && a.hi > b.lo {
					problem(fmt.Sprintf("key %s: events %d–%d in partition %d interleave with %d–%d in partition %d", key, a.lo, a.hi, p, b.lo, b.hi, q))
				}
			}
		}
	}
	return moved
}
