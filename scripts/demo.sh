#!/usr/bin/env bash
# The whole job end to end on throwaway local servers: build outbox-cdc, start
# PostgreSQL and Kafka, create the outbox table, check the setup, run
# outbox-cdc, insert sample events in two transactions (and one rolled back),
# print what arrives in Kafka, the relay's metrics and the slot's status,
# stop outbox-cdc with SIGTERM, and tear everything down.
set -euo pipefail
cd "$(dirname "$0")/.."

pg_dir= kafka_dir= relay_pid=
cleanup() {
  [ -n "$relay_pid" ] && kill -9 "$relay_pid" 2>/dev/null || true
  [ -n "$kafka_dir" ] && scripts/kafka.sh stop "$kafka_dir" || true
  [ -n "$pg_dir" ] && scripts/pg.sh stop "$pg_dir" || true
}
trap cleanup EXIT

echo "== building outbox-cdc"
mkdir -p bin
go build -o bin/outbox-cdc ./cmd/outbox-cdc
go build -o bin/sql ./internal/tools/sql # runs SQL as psql would, without needing it

echo "== starting PostgreSQL (wal_level=logical) and Kafka (KRaft)"
pg_out=$(scripts/pg.sh start)
pg_dir=$(sed -n 's/^dir=//p' <<<"$pg_out")
pg_url=$(sed -n 's/^url=//p' <<<"$pg_out")
kafka_out=$(scripts/kafka.sh start)
kafka_dir=$(sed -n 's/^dir=//p' <<<"$kafka_out")
brokers=$(sed -n 's/^brokers=//p' <<<"$kafka_out")
echo "   postgres: $pg_url"
echo "   kafka:    $brokers"

echo "== creating the outbox table and publication (sql/publication.sql)"
bin/sql "$pg_url" <sql/publication.sql

echo "== outbox-cdc check"
bin/outbox-cdc check --postgres-url "$pg_url" --kafka-brokers "$brokers" | sed 's/^/   /'

echo "== starting outbox-cdc"
log=$(mktemp /tmp/outbox-cdc-demo.XXXXXX.log)
http_addr=127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
bin/outbox-cdc --postgres-url "$pg_url" --kafka-brokers "$brokers" --http-addr "$http_addr" >"$log" 2>&1 &
relay_pid=$!
for _ in $(seq 1 100); do
  [ "$(bin/sql -c "SELECT active FROM pg_replication_slots WHERE slot_name = 'outbox_cdc'" "$pg_url")" = t ] && break
  kill -0 "$relay_pid" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done

echo "== inserting 5 events in two transactions, and 1 in a transaction rolled back"
bin/sql "$pg_url" <<'SQL'
BEGIN;
INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES
  (gen_random_uuid(), 'order', 'order-1', 'OrderCreated', '{"order": 1, "total": 42.50}', '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'),
  (gen_random_uuid(), 'order', 'order-1', 'OrderPaid',    '{"order": 1}', NULL),
  (gen_random_uuid(), 'customer', 'cust-7', 'CustomerRegistered', '{"customer": 7, "name": "Zoë"}', NULL);
COMMIT;
BEGIN;
INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES
  (gen_random_uuid(), 'order', 'order-2', 'OrderCreated', '{"order": 2, "total": 9.99}'),
  (gen_random_uuid(), 'order', 'order-1', 'OrderShipped', '{"order": 1}');
COMMIT;
BEGIN;
INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES
  (gen_random_uuid(), 'order', 'order-3', 'NeverHappened', '{"rolled": "back"}');
ROLLBACK;
SQL

echo "== consuming from Kafka (topics outbox.event.order, outbox.event.customer)"
go run ./internal/tools/tail -brokers "$brokers" -topics outbox.event.order,outbox.event.customer -n 5

echo "== metrics (http://$http_addr/metrics, outbox_cdc_* lines without histogram buckets)"
python3 - "$http_addr" <<'PY' | sed 's/^/   /'
import sys, urllib.request
body = urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=10).read().decode()
for line in body.splitlines():
    if line.startswith("outbox_cdc_") and "_bucket" not in line:
        print(line)
print("readyz:", urllib.request.urlopen("http://%s/readyz" % sys.argv[1], timeout=10).read().decode().strip())
PY

echo "== outbox-cdc status"
bin/outbox-cdc status --postgres-url "$pg_url" | sed 's/^/   /'

echo "== stopping outbox-cdc with SIGTERM"
kill -TERM "$relay_pid"
code=0
wait "$relay_pid" || code=$?
relay_pid=
echo "   exit code $code; slot confirmed at $(bin/sql -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'outbox_cdc'" "$pg_url") (WAL now at $(bin/sql -c 'SELECT pg_current_wal_lsn()' "$pg_url"))"
echo "== outbox-cdc log"
sed 's/^/   /' "$log"
rm -f "$log"
[ "$code" = 0 ]
