package integration

import (
	"context"
	"strings"
	"testing"
)

// serverVersion is server_version_num of the suite's Postgres.
func serverVersion(t *testing.T, o *outbox) int {
	t.Helper()
	var v int
	if err := o.db.QueryRow(context.Background(), `SELECT current_setting('server_version_num')::int`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSlotFailoverByVersion: the slot run creates is failover-enabled on
// PostgreSQL 17 and newer (--slot-failover=auto), and not before; asked for
// on an older server, it is refused with one line; status and check say
// where the slot stands.
func TestSlotFailoverByVersion(t *testing.T) {
	o := newOutbox(t, "failover", defaultColumns)
	version := serverVersion(t, o)
	if version < 170000 {
		code, out := runOnce(t, o.args("--slot-failover", "true", "--http-addr", "")...)
		if code != 1 || !strings.Contains(lastLine(out), "--slot-failover=true needs PostgreSQL 17 or newer") {
			t.Errorf("--slot-failover=true on %d: exit %d, %q", version, code, lastLine(out))
		}
	}
	startRelay(t, o.args()...)
	var failover bool
	if err := o.db.QueryRow(context.Background(), `SELECT coalesce((to_jsonb(s) ->> 'failover')::bool, false) FROM pg_replication_slots s WHERE slot_name = $1`, o.name).Scan(&failover); err != nil {
		t.Fatal(err)
	}
	if want := version >= 170000; failover != want {
		t.Errorf("server %d: slot failover = %v, want %v", version, failover, want)
	}
	_, out := runOnce(t, "status", "--postgres-url", pg.URL, "--table", "public."+o.name, "--slot", o.name, "--publication", o.name)
	want := "failover:      no: logical slots do not survive a failover before PostgreSQL 17"
	if version >= 170000 {
		want = "failover:      yes: failover-enabled, 0 physical standby(s) streaming"
	}
	if !strings.Contains(out, want) {
		t.Errorf("status lacks %q:\n%s", want, out)
	}
	_, out = runOnce(t, append([]string{"check"}, without(without(o.args(), "--status-interval"), "--http-addr")...)...)
	if !strings.Contains(out, "slot failover: ") {
		t.Errorf("check has no slot failover item:\n%s", out)
	}
	t.Logf("PostgreSQL %d: slot failover %v", version, failover)
}
