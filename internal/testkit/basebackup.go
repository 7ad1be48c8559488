package testkit

import (
	"fmt"
	"os"
	"path/filepath"
)

// BaseBackup is Snapshot without the replication slots: the copy that
// RestoreSnapshot brings back has the data, the system identifier and the
// timeline of the moment, and no slot, as a restore from pg_basebackup
// (which never copies pg_replslot) or from a storage snapshot taken
// without it. The Maven Central binaries scripts/pg.sh runs have no
// pg_basebackup; emptying pg_replslot of a cleanly stopped copy is what
// pg.sh's standby does too, and what Postgres finds at start is then the
// slots' absence.
func (p *Postgres) BaseBackup() error {
	if err := p.Snapshot(); err != nil {
		return err
	}
	dir := filepath.Join(p.Dir, "snapshot", "pg_replslot")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("base backup: read the copy's slots: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("base backup: remove slot %s from the copy: %w", e.Name(), err)
		}
	}
	return nil
}
