package config

import (
	"slices"
	"strings"

	"github.com/outbox-cdc/outbox-cdc/cleanup"
	"github.com/outbox-cdc/outbox-cdc/decode"
	"github.com/outbox-cdc/outbox-cdc/relay"
)

// tableFlags are the settings each table has: on the command line and at
// the config file's top level every table's default (relay.Config's
// Defaults), in the file's tables each table's own. With add,
// --header-column's sources add up instead of replacing each other.
func tableFlags(f *flags, t *relay.Table, add bool) {
	columnFlags(f, &t.Columns, add)
	routeFlags(f, &t.Route)
	f.value(gCleanup, &list[cleanup.Set]{dst: &t.Mark, parse: marks(false), layer: &f.layer}, "mark", "COLUMN=VALUE, repeatable (env: comma-separated): with --cleanup=mark, what a published row's column is set to; VALUE is now(), true, false, an integer or a 'quoted string': --mark status='Published' --mark published_at=now()")
	f.value(gCleanup, &list[cleanup.Set]{dst: &t.MarkDead, parse: marks(true), layer: &f.layer}, "mark-dead", "COLUMN=VALUE, repeatable: with --cleanup=mark, what a dead-lettered row's column is set to; VALUE as --mark's, or reason (the dead letter's reason, such as message_too_large); none: such rows are kept as they are")
	f.str(gSlot, &t.Where, "where", "row filter over the outbox table, such as target_broker = 'partner': the publication carries only the rows matching it (a publication row filter: PostgreSQL 15 and newer), so that several relays on one outbox, each with its own --slot, --publication and Kafka cluster, share its rows out. One boolean expression over the table's own columns: no subquery, no semicolon, no parameter, only immutable built-in functions; it is parsed and rendered from its tokens, never pasted as given. A publication in place whose filter differs is refused, naming the ALTER PUBLICATION to run (setup runs it); empty: every row")
	f.str(gCleanup, &t.Backfill.Where, "backfill-where", "SQL predicate over the outbox table, such as processed_on_utc IS NULL: when run creates the slot, it first publishes every row matching it as of the slot's exported snapshot (in --backfill-order), then streams what commits after; so the rows a polling relay left pending are relayed once, none lost. Runs once per slot; progress is kept in the table outbox_cdc_backfill beside the outbox table, and a backfill cut short resumes on restart, reading exactly the rows the first snapshot saw. One boolean expression over the table's own columns, checked before use against an allow-list: comparisons, AND/OR/NOT, IS [NOT] NULL, IN (…), BETWEEN, LIKE/ILIKE, SIMILAR TO, regular expressions (~ ~* !~ !~*), op ANY/ALL (…), ARRAY[…], CASE, AT TIME ZONE, arithmetic, ||, jsonb's -> ->> #> #>> ? ?| ?& @> <@, the functions lower, upper, length, substr, trim, position, starts_with, abs, round, floor, ceil, now, current_date, current_timestamp, date_trunc, extract, date_part, age, date, to_timestamp, jsonb_typeof, jsonb_array_length, coalesce, nullif and a few more, and casts to text, varchar(n), char(n), int, bigint, smallint, numeric(p,s), boolean, date, time[tz], timestamp[tz] (with or without time zone), interval, uuid, json[b] and arrays of them (text[]); no subquery, no qualified name, no comment; it runs with the relay's role and search_path pg_catalog, in a read-only transaction, so a column of a type from elsewhere (citext) is refused unless cast at once (email::text)")
	f.value(gCleanup, order{&t.Backfill.Order}, "backfill-order", "order the backfill publishes rows in, which per aggregate must follow commit order: commit (each row's commit time; needs track_commit_timestamp = on), timestamp (the timestamp column, then the id: a polling relay's order), id (the id column: ids from a sequence), or auto: commit when track_commit_timestamp is on, else timestamp when the table has that column, else refuse and ask")
}

func columnFlags(f *flags, c *decode.Columns, add bool) {
	f.str(gColumns, &c.ID, "column-id", "column holding the event id (sent as header id)")
	f.str(gColumns, &c.AggregateType, "column-aggregate-type", "column holding the aggregate type (header aggregate_type, topic routing); empty: the table has none")
	f.str(gColumns, &c.AggregateID, "column-aggregate-id", "column whose text form is the Kafka message key (the aggregate id, or any column: id keys by event); empty: the table has none, and every record has a null key")
	f.value(gColumns, nullKey{&c.NullKey}, "null-key", "a NULL or empty key column: dead-letter (the row is invalid, see --on-invalid) or allow (a null key: records spread over partitions as the Java client spreads them)")
	f.str(gColumns, &c.EventType, "column-event-type", "column holding the event type (header event_type)")
	f.str(gColumns, &c.Payload, "column-payload", "column whose value becomes the Kafka message value, byte for byte")
	f.value(gColumns, enum[decode.NullPayload]{&c.NullPayload}, "null-payload", "a NULL payload column: dead-letter (the row is invalid, see --on-invalid) or tombstone (a record with the row's key and headers and a null value, which a compacted topic reads as the key's deletion: for KTables and upsert sinks); a row whose key is NULL or empty is still dead-lettered (reason null_column), even with --null-key=allow, as a tombstone without a key deletes nothing")
	f.str(gColumns, &c.Partition, "column-partition", "optional integer column naming each record's partition (0 to the topic's count - 1); NULL: the key's partition, as without it; a value out of range is dead-lettered (reason partition_out_of_range), one that is not an integer too (invalid_partition). One aggregate's events keep their order only if the writer puts them all in one partition; empty: none")
	f.str(gColumns, &c.Headers, "column-headers", "optional jsonb column; each string member becomes a Kafka header (absent column: unused)")
	f.str(gColumns, &c.Timestamp, "column-timestamp", "optional timestamp column for the message time (absent column: commit time)")
	f.value(gColumns, &list[decode.HeaderColumn]{dst: &c.HeaderColumns, parse: headerColumns, layer: &f.layer, add: add}, "header-column", "COLUMN or COLUMN:HEADER, repeatable (env: comma-separated; the environment's and the command line's add up): a further column sent as a header in its text form, such as correlation_id, tenant_id or traceparent; NULL is left out")
}

func routeFlags(f *flags, r *relay.Route) {
	f.str(gRoute|gAdmit, &r.Topic, "topic", "Kafka topic template; {aggregate_type} and {event_type} are replaced from the row, {COLUMN} by that column's text form ({topic}, {type}), anything else is literal; also the topic of --message-prefix messages")
	f.str(gRoute|gAdmit, &r.Regex, "topic-regex", "rewrite routed topic names that this regular expression (RE2) matches whole into --topic-replacement, like Debezium's route.topic.regex; empty: names as routed")
	f.str(gRoute|gAdmit, &r.Replacement, "topic-replacement", "what --topic-regex's matches become; $1 or ${1} stand for its groups")
	f.str(gRoute|gAdmit, &r.Allow, "topic-allow", "allow-list of topics: a regular expression (RE2) that every routed topic name (after --topic-regex) must match whole, such as 'outbox\\.event\\.(Order|Invoice)'; an event routed to another topic is dead-lettered (reason topic_not_allowed), so a value in a row cannot create or fill a topic of its choosing. Whatever it allows, no event is ever routed to --dlq-topic, --checkpoint-topic (in either delivery mode) or a name beginning with __ (Kafka's own topics): reason topic_not_allowed, and a fixed --topic naming one is refused at start; empty: any other name, bounded only by --max-topics")
	f.integer(gRoute, &r.Spec.Partitions, "topic-partitions", "partitions of a topic outbox-cdc creates; 0: the broker's num.partitions")
	f.integer(gRoute, &r.Spec.ReplicationFactor, "topic-replication-factor", "replication factor of a topic outbox-cdc creates; 0: the broker's default.replication.factor. Production: 3, with --topic-config min.insync.replicas=2")
	f.value(gRoute, &configMap{dst: &r.Spec.Configs, layer: &f.layer}, "topic-config", "KEY=VALUE, repeatable (env: comma-separated): a config of a topic outbox-cdc creates, such as min.insync.replicas=2, cleanup.policy=delete, retention.ms=604800000, compression.type=producer")
}

// tables builds the table list from --table (each with the defaults) and
// the config file's tables (each with the defaults and its own settings).
// A table in both takes the file's settings. When --table was not set, the
// file's tables replace its default.
func (p *parser) tables() error {
	r := &p.c.Relay
	var fromFile []relay.Table
	if p.file != nil {
		var err error
		if fromFile, err = p.file.tables(r); err != nil {
			return err
		}
	}
	r.Tables = nil
	if p.set["table"] || len(fromFile) == 0 {
		for _, name := range strings.Split(p.fl.raw.table, ",") {
			if name = strings.TrimSpace(name); name != "" {
				r.Tables = append(r.Tables, r.Table(name))
			}
		}
	}
	for _, ft := range fromFile {
		i := slices.IndexFunc(r.Tables, func(t relay.Table) bool { return t.Qualified() == ft.Qualified() })
		if i >= 0 {
			r.Tables[i] = ft
		} else {
			r.Tables = append(r.Tables, ft)
		}
	}
	return nil
}
