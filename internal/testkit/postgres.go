package testkit

import "strconv"

// Postgres is a running throwaway cluster with wal_level=logical.
type Postgres struct {
	Dir  string
	URL  string // superuser, trust auth, 127.0.0.1
	Port int
	PID  int
}

func newPostgres(kv map[string]string) *Postgres {
	pid, _ := strconv.Atoi(kv["pid"])
	port, _ := strconv.Atoi(kv["port"])
	return &Postgres{Dir: kv["dir"], URL: kv["url"], Port: port, PID: pid}
}

// StartPostgres initdbs and starts a new cluster on a free loopback port,
// of the major version PG_VERSION names (scripts/pg.sh's default if unset).
func StartPostgres() (*Postgres, error) {
	kv, err := script(nil, "pg.sh", "start")
	if err != nil {
		return nil, err
	}
	return newPostgres(kv), nil
}

// StartPostgresVersion is StartPostgres for PostgreSQL major (say "13"),
// whatever PG_VERSION says.
func StartPostgresVersion(major string) (*Postgres, error) {
	kv, err := script([]string{"PG_VERSION=" + major}, "pg.sh", "start")
	if err != nil {
		return nil, err
	}
	return newPostgres(kv), nil
}

// StartStandby starts a physical standby of primary streaming through the
// physical slot named slot (created on primary), with hot_standby_feedback
// and, on PostgreSQL 17 and newer, sync_replication_slots on: the
// primary's failover-enabled logical slots are kept in step on it. The
// standby is a cold copy: primary is restarted (same port, new PID).
func StartStandby(primary *Postgres, slot string) (*Postgres, error) {
	kv, err := script(nil, "pg.sh", "standby", primary.Dir, slot)
	if err != nil {
		return nil, err
	}
	primary.PID, _ = strconv.Atoi(kv["primary_pid"])
	return newPostgres(kv), nil
}

// Crash stops the cluster as a crash does (immediate shutdown, no
// checkpoint), keeping its directory.
func (p *Postgres) Crash() error {
	_, err := script(nil, "pg.sh", "crash", p.Dir)
	return err
}

// Snapshot stops the cluster with a fast shutdown, keeps a copy of its data
// directory (a storage snapshot), and starts it again on the same port (a
// new PID).
func (p *Postgres) Snapshot() error {
	kv, err := script(nil, "pg.sh", "snapshot", p.Dir)
	if err != nil {
		return err
	}
	p.PID, _ = strconv.Atoi(kv["pid"])
	return nil
}

// RestoreSnapshot stops the cluster and starts it again, on the same port,
// from the copy Snapshot kept: the database goes back in time, with its
// system identifier, its timeline and its slots as they were then, as
// after a restore from a storage snapshot.
func (p *Postgres) RestoreSnapshot() error {
	kv, err := script(nil, "pg.sh", "restore", p.Dir)
	if err != nil {
		return err
	}
	p.PID, _ = strconv.Atoi(kv["pid"])
	return nil
}

// Promote ends a standby's recovery: it becomes a primary.
func (p *Postgres) Promote() error {
	_, err := script(nil, "pg.sh", "promote", p.Dir)
	return err
}

// Stop stops the cluster and removes its directory.
func (p *Postgres) Stop() error {
	_, err := script(nil, "pg.sh", "stop", p.Dir)
	return err
}

// Restart stops the cluster with a fast shutdown and starts it again on the
// same port and data.
func (p *Postgres) Restart() error {
	if _, err := script(nil, "pg.sh", "stop-server", p.Dir); err != nil {
		return err
	}
	kv, err := script(nil, "pg.sh", "restart", p.Dir)
	if err != nil {
		return err
	}
	p.PID, _ = strconv.Atoi(kv["pid"])
	return nil
}
