package slot

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Failover is how a new slot is created: failover-enabled or not.
type Failover string

// Values of Target.Failover (--slot-failover).
const (
	FailoverAuto Failover = "auto"  // failover-enabled on PostgreSQL 17 and newer
	FailoverOn   Failover = "true"  // failover-enabled; refused before 17
	FailoverOff  Failover = "false" // never
)

// WantFailover says whether t's slot should be failover-enabled on the
// server conn reaches: a slot synchronized to standbys that have
// sync_replication_slots on, which survives their promotion (PostgreSQL 17+).
func WantFailover(ctx context.Context, conn *pgx.Conn, t Target) (bool, error) {
	srv, err := ReadServer(ctx, conn)
	if err != nil {
		return false, fmt.Errorf("read server_version_num: %w", err)
	}
	return wantFailover(srv, t)
}

// wantFailover is WantFailover on a server whose version is already read.
func wantFailover(srv Server, t Target) (bool, error) {
	switch t.Failover {
	case FailoverOff:
		return false, nil
	case FailoverOn:
		if !srv.FailoverSlots() {
			return false, fmt.Errorf("%w: --slot-failover=true needs PostgreSQL 17 or newer (this is %d.%d); before 17 a logical slot does not survive a failover", ErrNotReady, srv.Major(), srv.Minor())
		}
		return true, nil
	}
	return srv.FailoverSlots(), nil
}

// SlotWarnings are what an operator should know of t's slot as it is: one
// that should be failover-enabled and is not, one on a server with a
// standby that it would not survive.
func SlotWarnings(ctx context.Context, conn *pgx.Conn, t Target) ([]string, error) {
	want, err := WantFailover(ctx, conn, t)
	if err != nil {
		return nil, err
	}
	st, err := ReadSlotState(ctx, conn, t)
	if err != nil {
		return nil, err
	}
	var out []string
	switch {
	case want && !st.Failover:
		out = append(out, fmt.Sprintf("slot %q is not failover-enabled, so a standby's promotion loses it; on a replication connection run ALTER_REPLICATION_SLOT %s (FAILOVER true) "+
			"(psql \"dbname=… replication=database\" -c 'ALTER_REPLICATION_SLOT %s (FAILOVER true)'), with sync_replication_slots on the standby", t.Slot, t.Slot, t.Slot))
	case st.Standbys > 0 && !st.Failover:
		out = append(out, fmt.Sprintf("slot %q would not survive a failover to the %d standby(s) streaming from this server (%s)", t.Slot, st.Standbys, failoverHint(st.Server())))
	case st.Standbys > 0 && st.Failover && st.SynchronizedStandbySlots == "" && !st.InRecovery:
		out = append(out, fmt.Sprintf("slot %q may publish events whose rows a promoted standby never received (asynchronous replication): "+
			"set synchronized_standby_slots = '%s' on this server (ALTER SYSTEM SET …; SELECT pg_reload_conf()), so the relay only sees what the standbys have",
			t.Slot, strings.Join(st.StandbySlots, ",")))
	}
	return out, nil
}

func failoverHint(srv Server) string {
	if !srv.FailoverSlots() {
		return "failover slots need PostgreSQL 17 or newer"
	}
	return "--slot-failover=true, sync_replication_slots=on on the standby, synchronized_standby_slots on the primary"
}
