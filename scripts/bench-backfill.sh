#!/usr/bin/env bash
# A backfill of ROWS outbox rows (100,000 by default) in each delivery, on a
# throwaway Postgres and Kafka (scripts/pg.sh, scripts/kafka.sh), ROUNDS
# rounds (3) with the order rotated; each run backfills through a slot of
# its own into topics of its own, and is stopped once its backfill is done.
# A run of each mode first warms the broker up, not counted. Prints, per run, the backfill's own time (its "backfill done" line), the
# relay's CPU seconds until then (/proc/PID/stat) and its peak RSS.
#
#   scripts/bench-backfill.sh                  at-least-once and exactly-once
#   MODES="alo eos:--transaction-interval=250ms" scripts/bench-backfill.sh
#
# A mode is alo or eos, with extra relay flags after ":" (comma-separated).
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-100000}
ROUNDS=${ROUNDS:-3}
read -r -a modes <<<"${MODES:-alo eos}"
bin=$(mktemp -d)/outbox-cdc
go build -o "$bin" ./cmd/outbox-cdc
pg_out=$(scripts/pg.sh start)
pg_dir=$(sed -n 's/^dir=//p' <<<"$pg_out")
pg_url=$(sed -n 's/^url=//p' <<<"$pg_out")
trap 'scripts/pg.sh stop "$pg_dir" >/dev/null 2>&1 || true' EXIT
kafka_out=$(scripts/kafka.sh start)
kafka_dir=$(sed -n 's/^dir=//p' <<<"$kafka_out")
brokers=$(sed -n 's/^brokers=//p' <<<"$kafka_out")
trap 'scripts/pg.sh stop "$pg_dir" >/dev/null 2>&1 || true; scripts/kafka.sh stop "$kafka_dir" >/dev/null 2>&1 || true' EXIT
psql -q -v ON_ERROR_STOP=1 -v rows="$ROWS" "$pg_url" <<'SQL'
CREATE TABLE outbox (id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
  event_type text NOT NULL, payload jsonb NOT NULL, headers jsonb, created_at timestamptz NOT NULL DEFAULT now());
INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
  SELECT gen_random_uuid(), 'Order', (i % 1000)::text, 'Placed', jsonb_build_object('n', i, 'pad', repeat('x', 150))
  FROM generate_series(1, :rows) i;
CREATE PUBLICATION bench_backfill FOR TABLE outbox;
SQL
ticks=$(getconf CLK_TCK)
logs=$(mktemp -d)

# run NAME MODE: one backfill through slot NAME.
run() {
	local name=$1 mode=${2%%:*} flags=() extra
	[[ $2 == *:* ]] && IFS=, read -r -a flags <<<"${2#*:}"
	[[ $mode == eos ]] && flags=(--delivery exactly-once --checkpoint-topic "$name.checkpoints" "${flags[@]}")
	: >"$logs/$name.log"
	"$bin" run --postgres-url "$pg_url" --kafka-brokers "$brokers" --table public.outbox --publication bench_backfill \
		--slot "$name" --topic "$name.{aggregate_type}" --backfill-where true --http-addr 127.0.0.1:0 "${flags[@]}" \
		>"$logs/$name.log" 2>&1 &
	local pid=$! cpu rss took
	for _ in $(seq 1200); do
		grep -q 'backfill done' "$logs/$name.log" && break
		kill -0 "$pid" 2>/dev/null || { tail -5 "$logs/$name.log"; exit 1; }
		sleep 0.1
	done
	cpu=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
	kill -TERM "$pid"
	wait "$pid" || true
	took=$(sed -n 's/.*backfill done.*took=\([^ ]*\).*/\1/p' "$logs/$name.log")
	printf '%-40s round %d  took %-8s cpu %5.2f s  peak rss %5.1f MiB\n' "$2" "$3" "$took" \
		"$(bc -l <<<"$cpu / $ticks")" "$(bc -l <<<"$rss / 1024")"
}

# The broker is slow at first (its JVM, and the transaction state log the
# first exactly-once run creates: a first run took two or three times the
# others): a run of each mode, not counted, warms it up.
for i in "${!modes[@]}"; do run "bf_warmup_$i" "${modes[$i]}" 0 >/dev/null; done
for round in $(seq "$ROUNDS"); do
	for k in "${!modes[@]}"; do
		i=$(((k + round) % ${#modes[@]}))
		run "bf_${round}_$i" "${modes[$i]}" "$round"
	done
done
