package dlq

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Range is an inclusive range of offsets in one partition.
type Range struct {
	From int64 `json:"from"`
	To   int64 `json:"to"` // negative: to the end of the partition
}

// All is every offset of a partition.
var All = Range{From: 0, To: -1}

func (r Range) contains(offset int64) bool {
	return offset >= r.From && (r.To < 0 || offset <= r.To)
}

func (r Range) String() string {
	if r.To < 0 {
		return fmt.Sprintf("%d-", r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// Selection says which dead letters a command works on: those with one of
// Reasons (any reason when empty), in Partitions' ranges when given, or else
// in Offsets of every partition.
type Selection struct {
	Reasons    []string
	Offsets    Range           // of every partition, unless Partitions is set
	Partitions map[int32]Range // only these partitions, each with its own range
}

// Everything selects every dead letter.
var Everything = Selection{Offsets: All}

// rangeOf returns the offsets selected in partition p, and false when none.
func (s Selection) rangeOf(p int32) (Range, bool) {
	if len(s.Partitions) == 0 {
		return s.Offsets, true
	}
	r, ok := s.Partitions[p]
	return r, ok
}

// matches reports whether a dead letter with this reason is selected.
func (s Selection) matches(reason string) bool {
	return len(s.Reasons) == 0 || slices.Contains(s.Reasons, reason)
}

// ParseOffsets parses --offsets: comma-separated P (all of partition P),
// P:N (offset N), P:FROM-TO (inclusive) or P:FROM- (to the end).
func ParseOffsets(s string) (map[int32]Range, error) {
	out := map[int32]Range{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ps, rs, hasRange := strings.Cut(part, ":")
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("%q: want PARTITION, PARTITION:OFFSET, PARTITION:FROM-TO or PARTITION:FROM-", part)
		}
		r := All
		if hasRange {
			if r, err = parseRange(rs); err != nil {
				return nil, fmt.Errorf("%q: %w", part, err)
			}
		}
		if _, dup := out[int32(p)]; dup {
			return nil, fmt.Errorf("partition %d is given twice", p)
		}
		out[int32(p)] = r
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no partition given")
	}
	return out, nil
}

func parseRange(s string) (Range, error) {
	from, to, isRange := strings.Cut(s, "-")
	f, err := strconv.ParseInt(from, 10, 64)
	if err != nil || f < 0 {
		return Range{}, fmt.Errorf("offset %q: want a number from 0", from)
	}
	r := Range{From: f, To: f}
	switch {
	case !isRange:
	case to == "":
		r.To = -1
	default:
		if r.To, err = strconv.ParseInt(to, 10, 64); err != nil || r.To < f {
			return Range{}, fmt.Errorf("offset %q: want a number from %d", to, f)
		}
	}
	return r, nil
}
