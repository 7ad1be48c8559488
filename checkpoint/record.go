package checkpoint

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
)

// FormatVersion is the version Encode writes: MAJOR.MINOR. A minor version
// only adds optional fields, which an older reader ignores; a major version
// changes what a field means, and Decode refuses one it does not know
// rather than guess where to resume.
const FormatVersion = "1.1"

// formatMajor is the major version of FormatVersion: the one Decode reads.
const formatMajor = 1

// Record is the exactly-once checkpoint: the last Postgres transaction a
// committed Kafka transaction holds, written in that same Kafka
// transaction, so that a restart skips exactly what Kafka already has.
type Record struct {
	// Version is the format a decoded record was written in; Encode ignores
	// it and writes FormatVersion.
	Version  string
	Slot     string
	Database string
	// SystemID and Timeline say which history CommitLSN and EndLSN belong
	// to: a promoted standby shares the system identifier but starts a new
	// timeline, and reuses the LSNs past its switch point for other
	// transactions, so a position is meaningless without them.
	SystemID string
	Timeline int32
	// CommitLSN is the last included transaction's commit record; EndLSN is
	// the end of that record (pgoutput Commit's TransactionEndLSN), the
	// position to confirm or start from so that Postgres skips the
	// transaction.
	CommitLSN  pglogrepl.LSN
	EndLSN     pglogrepl.LSN
	Xid        uint32
	CommitTime time.Time
	// Host and PID name the instance that wrote the record, for the operator
	// who finds two relays fighting over one slot.
	Host string
	PID  int
	// Backfill is the progress of a backfill this transaction carried
	// rows of (since 1.1); nil for a transaction of the stream.
	Backfill *Backfill
}

// Key is the record key of a slot's checkpoints: one key per slot, so that
// compaction keeps each slot's last checkpoint and nothing else. It names
// the system identifier and the slot because a slot name is unique only
// within one Postgres cluster: two clusters (staging and production, say)
// sharing a checkpoint topic may both have a slot "outbox_cdc". A physical
// standby carries its primary's system identifier, so after a failover the
// new primary's relay finds the old checkpoint and Resume decides by its
// timeline. The database is implied by the slot (a slot belongs to one
// database) and the timeline is left out on purpose: a key per timeline
// would hide the old checkpoint from that decision and leave stale keys
// behind for ever. Slot names hold only [a-z0-9_], so "/" is unambiguous.
func Key(systemID, slot string) string {
	return systemID + "/" + slot
}

// Key returns the record key r is stored under.
func (r Record) Key() string { return Key(r.SystemID, r.Slot) }

// wireRecord is Record as JSON: short names, LSNs in Postgres's own text
// form so that kcat shows what pg_replication_slots shows.
type wireRecord struct {
	Version    string    `json:"v"`
	Slot       string    `json:"slot"`
	Database   string    `json:"db"`
	SystemID   string    `json:"sysid"`
	Timeline   int32     `json:"tli"`
	CommitLSN  string    `json:"commit_lsn"`
	EndLSN     string    `json:"end_lsn"`
	Xid        uint32    `json:"xid"`
	CommitTime time.Time `json:"commit_time"`
	Host       string    `json:"host,omitempty"`
	PID        int       `json:"pid,omitempty"`
	// Backfill, since 1.1: an older reader ignores it.
	Backfill *wireBackfill `json:"backfill,omitempty"`
}

// Encode returns r's value: compact JSON in FormatVersion.
func (r Record) Encode() ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	b, err := json.Marshal(wireRecord{
		Version: FormatVersion, Slot: r.Slot, Database: r.Database, SystemID: r.SystemID, Timeline: r.Timeline,
		CommitLSN: r.CommitLSN.String(), EndLSN: r.EndLSN.String(), Xid: r.Xid, CommitTime: r.CommitTime.UTC(),
		Host: r.Host, PID: r.PID, Backfill: r.Backfill.wire(),
	})
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return b, nil
}

// Decode reads a value Encode wrote, in any 1.x format. A record of another
// major version is refused with ErrUnsupportedVersion, and one that is not a
// checkpoint with ErrBadRecord: resuming from a position whose meaning is
// unknown could skip transactions.
func Decode(value []byte) (Record, error) {
	var head struct {
		Version *string `json:"v"`
	}
	if err := json.Unmarshal(value, &head); err != nil {
		return Record{}, fmt.Errorf("decode checkpoint: %w: %w", ErrBadRecord, err)
	}
	if head.Version == nil {
		return Record{}, fmt.Errorf("decode checkpoint: %w: no format version (\"v\")", ErrBadRecord)
	}
	major, err := majorVersion(*head.Version)
	if err != nil {
		return Record{}, fmt.Errorf("decode checkpoint: %w: %w", ErrBadRecord, err)
	}
	if major != formatMajor {
		return Record{}, fmt.Errorf("decode checkpoint: %w %s: this outbox-cdc reads %d.x; run a version that reads it, or delete the key to trust the slot",
			ErrUnsupportedVersion, *head.Version, formatMajor)
	}
	var w wireRecord
	if err := json.Unmarshal(value, &w); err != nil {
		return Record{}, fmt.Errorf("decode checkpoint: %w: %w", ErrBadRecord, err)
	}
	r := Record{Version: w.Version, Slot: w.Slot, Database: w.Database, SystemID: w.SystemID, Timeline: w.Timeline,
		Xid: w.Xid, CommitTime: w.CommitTime, Host: w.Host, PID: w.PID}
	if r.CommitLSN, err = pglogrepl.ParseLSN(w.CommitLSN); err != nil {
		return Record{}, fmt.Errorf("decode checkpoint: %w: commit_lsn: %w", ErrBadRecord, err)
	}
	if r.EndLSN, err = pglogrepl.ParseLSN(w.EndLSN); err != nil {
		return Record{}, fmt.Errorf("decode checkpoint: %w: end_lsn: %w", ErrBadRecord, err)
	}
	if r.Backfill, err = w.Backfill.backfill(); err != nil {
		return Record{}, fmt.Errorf("decode checkpoint: %w: %w", ErrBadRecord, err)
	}
	if err := r.validate(); err != nil {
		return Record{}, fmt.Errorf("decode checkpoint: %w: %w", ErrBadRecord, err)
	}
	return r, nil
}

// majorVersion reads MAJOR from "MAJOR.MINOR".
func majorVersion(v string) (int, error) {
	majorText, minorText, ok := strings.Cut(v, ".")
	major, errMajor := strconv.Atoi(majorText)
	minor, errMinor := strconv.Atoi(minorText)
	if !ok || errMajor != nil || errMinor != nil || major < 0 || minor < 0 {
		return 0, fmt.Errorf("format version %q is not MAJOR.MINOR", v)
	}
	return major, nil
}

// validate refuses a record no relay could resume from.
func (r Record) validate() error {
	switch {
	case r.SystemID == "":
		return fmt.Errorf("no system identifier")
	case r.Slot == "":
		return fmt.Errorf("no slot")
	case r.Timeline < 1:
		return fmt.Errorf("timeline %d: timelines start at 1", r.Timeline)
	case r.EndLSN == 0:
		return fmt.Errorf("no end LSN")
	case r.CommitLSN > r.EndLSN:
		// Equal for a non-transactional message, reported at its end.
		return fmt.Errorf("commit LSN %s is past end LSN %s", r.CommitLSN, r.EndLSN)
	}
	return r.Backfill.validate()
}
