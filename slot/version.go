package slot

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Server is what the PostgreSQL server a connection reaches can do, by its
// version. It is the one place that knows which release brought what, so
// that callers ask for a fact by name instead of comparing numbers, and a
// new version's quirk is one method here.
//
// It holds only facts the code branches on. What differs between versions
// but is read without asking the version stays in its query: a slot's
// invalidation_reason and conflicting (to_jsonb of the row, NULL where a
// version lacks the column), idle_replication_slot_timeout
// (current_setting with missing_ok), pg_logical_emit_message's flush
// argument (its signature, from pg_proc).
type Server struct {
	// Num is server_version_num: 170002 for 17.2, 90624 for 9.6.24.
	Num int
}

// MinServerVersion is the oldest PostgreSQL (as server_version_num)
// outbox-cdc streams from: it asks pgoutput for logical decoding messages
// (its heartbeats, and events emitted as messages), an option PostgreSQL 14
// added; 13 refuses START_REPLICATION with it.
const MinServerVersion = 140000

// MinRowFilterVersion is the oldest PostgreSQL (server_version_num) with
// publication row filters (CREATE PUBLICATION … WHERE), which --where
// becomes.
const MinRowFilterVersion = 150000

// minFailoverVersion is the oldest PostgreSQL (server_version_num) whose
// logical slots can be failover-enabled: synchronized to standbys that
// have sync_replication_slots on, so that they survive a promotion.
const minFailoverVersion = 170000

// ReadServer reads the version of the server conn reaches, for callers
// that read nothing else of the server. One whose query already reads
// other settings scans server_version_num into Num in that query instead,
// so that the version costs no round trip of its own. The error is the
// query's, for the caller to say what it was reading the version for.
func ReadServer(ctx context.Context, conn *pgx.Conn) (Server, error) {
	var s Server
	err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&s.Num)
	return s, err
}

// Supported reports whether outbox-cdc can stream from the server (see
// MinServerVersion).
func (s Server) Supported() bool { return s.Num >= MinServerVersion }

// RowFilters reports whether the server has publication row filters,
// which --where becomes (15+).
func (s Server) RowFilters() bool { return s.Num >= MinRowFilterVersion }

// FailoverSlots reports whether the server's logical slots can be
// failover-enabled (17+): before, a logical slot does not survive a
// failover.
func (s Server) FailoverSlots() bool { return s.Num >= minFailoverVersion }

// Major is the server's major version as messages print it: 17 for 17.2.
// (Before 10, two numbers named a major version; Unsupported spells those.)
func (s Server) Major() int { return s.Num / 10000 }

// Minor is the server's minor version, from PostgreSQL 10 on: 2 for 17.2.
func (s Server) Minor() int { return s.Num % 10000 }

// Unsupported says why outbox-cdc cannot stream from the server, or ""
// when it can.
func (s Server) Unsupported() string {
	if s.Supported() {
		return ""
	}
	major := fmt.Sprint(s.Major())
	if s.Num < 100000 { // 9.6 and older: two numbers name a major version
		major = fmt.Sprintf("%d.%d", s.Num/10000, s.Num/100%100)
	}
	return fmt.Sprintf("PostgreSQL %s is not supported: outbox-cdc needs PostgreSQL %d or newer (pgoutput's messages option, which it uses, arrived in %d)",
		major, MinServerVersion/10000, MinServerVersion/10000)
}
