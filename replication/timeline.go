package replication

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
)

// Switches are the points at which the server's timeline branched from
// each of its ancestors, from its timeline history file: Switches[t] is
// the LSN where timeline t ended in the server's history. WAL of timeline
// t below that point is the server's own history; past it, timeline t
// wrote WAL the server never had (a failed primary's last transactions),
// and the server's own LSNs there name other transactions.
type Switches map[int32]pglogrepl.LSN

// parseHistory reads a timeline history file: a line per ancestor,
// "timeline<TAB>switch LSN<TAB>reason", comments (#) and blank lines
// aside (Postgres's readTimeLineHistory).
func parseHistory(content []byte) (Switches, error) {
	out := Switches{}
	sc := bufio.NewScanner(bytes.NewReader(content))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("timeline history line %d: want a timeline and its switch point", n)
		}
		tli, err := strconv.ParseInt(f[0], 10, 32)
		if err != nil || tli < 1 {
			return nil, fmt.Errorf("timeline history line %d: timeline %q", n, f[0])
		}
		at, err := pglogrepl.ParseLSN(f[1])
		if err != nil {
			return nil, fmt.Errorf("timeline history line %d: switch point: %w", n, err)
		}
		out[int32(tli)] = at
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("timeline history: %w", err)
	}
	return out, nil
}

// TimelineHistory runs TIMELINE_HISTORY.
func (c pgConn) TimelineHistory(ctx context.Context, timeline int32) ([]byte, error) {
	r, err := pglogrepl.TimelineHistory(ctx, c.PgConn, timeline)
	if err != nil {
		return nil, err
	}
	return r.Content, nil
}

// Switches reads where timeline (the server's, from System) branched from
// each of its ancestors: none on the first timeline. Ask before Start.
func (s *Stream) Switches(ctx context.Context, timeline int32) (Switches, error) {
	if s.streaming {
		return nil, errors.New("timeline history: the connection is streaming; ask before Start")
	}
	if timeline <= 1 {
		return Switches{}, nil
	}
	content, err := s.conn.TimelineHistory(ctx, timeline)
	if err != nil {
		return nil, fmt.Errorf("read the history of timeline %d: %w", timeline, err)
	}
	return parseHistory(content)
}
