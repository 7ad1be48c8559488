#!/usr/bin/env bash
# Throwaway Apicurio Registry (in-memory H2 storage) for tests that need a
# Confluent-compatible schema registry, on 127.0.0.1 only. Its ready-to-run
# Quarkus build comes from Maven Central through mvn
# (io.apicurio:apicurio-registry-app:VERSION:tar.gz:all, cached in ~/.m2 and
# unpacked in $OUTBOX_CDC_CACHE); nothing is built here.
#
# Apicurio 3.x is compiled for Java 21, so it needs a JDK 21 or newer (the
# machine's Temurin 25 in /usr/lib/jvm will do); 2.6.x runs on Java 17:
# APICURIO_VERSION=2.6.13.Final. APICURIO_JAVA names the java binary to use.
#
#   scripts/apicurio.sh fetch       resolve and unpack the registry (done by start)
#   scripts/apicurio.sh start       start it on free ports; prints dir=, url=,
#                                   ccompat=, pid= lines. ccompat= is the base
#                                   of the Confluent API (GET $ccompat/subjects)
#   scripts/apicurio.sh stop DIR    stop it and remove DIR
#
# Every start is empty: storage is an in-memory H2 database. Deletes through
# the API are enabled (3.x disables them by default) so tests can clean up.
# APICURIO_JAVA_OPTS replaces the JVM options (default -Xmx512m).
set -euo pipefail

APICURIO_VERSION=${APICURIO_VERSION:-3.3.3}
cache=${OUTBOX_CDC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-cdc}
home="$cache/apicurio-$APICURIO_VERSION"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

# need_java prints the major Java version that APICURIO_VERSION needs.
need_java() {
  case "$APICURIO_VERSION" in 1.* | 2.*) echo 17 ;; *) echo 21 ;; esac
}

# find_java prints the first java binary that is new enough: APICURIO_JAVA,
# JAVA_HOME, the one on PATH, then any JDK under /usr/lib/jvm.
find_java() {
  local need j v
  need=$(need_java)
  for j in ${APICURIO_JAVA:-} ${JAVA_HOME:+$JAVA_HOME/bin/java} "$(command -v java || true)" /usr/lib/jvm/*/bin/java; do
    [ -x "$j" ] || continue
    v=$("$j" -XshowSettings:properties -version 2>&1 | awk '/java.specification.version/ {print $3}')
    v=${v#1.}
    if [ "${v%%.*}" -ge "$need" ] 2>/dev/null; then echo "$j"; return 0; fi
  done
  echo "apicurio.sh: Apicurio $APICURIO_VERSION needs Java $need or newer; none found (set APICURIO_JAVA, or use APICURIO_VERSION=2.6.13.Final on Java 17)" >&2
  exit 1
}

# launcher prints the jar that starts the registry: quarkus-run.jar in 3.x
# (fast-jar layout), *-runner.jar in 2.x (legacy layout).
launcher() {
  if [ -f "$home/quarkus-run.jar" ]; then echo "$home/quarkus-run.jar"; return 0; fi
  local r
  for r in "$home"/*-runner.jar; do [ -f "$r" ] && { echo "$r"; return 0; }; done
  return 1
}

fetch() {
  launcher >/dev/null && return 0
  command -v mvn >/dev/null || { echo "apicurio.sh: mvn not found (apt-get install maven)" >&2; exit 1; }
  local tmp="$home.tmp.$$"
  mkdir -p "$tmp"
  mvn -q -B -C dependency:copy -Dtransitive=false -DoutputDirectory="$tmp" \
    -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all" >&2 \
    || { echo "apicurio.sh: mvn could not resolve Apicurio Registry $APICURIO_VERSION from Maven Central" >&2; rm -rf "$tmp"; exit 1; }
  tar -xzf "$tmp/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz" -C "$tmp" \
    && rm -f "$tmp/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz" \
    || { echo "apicurio.sh: could not unpack the registry" >&2; rm -rf "$tmp"; exit 1; }
  rm -rf "$home" && mv "$tmp" "$home"
}

start_server() {
  local dir=$1 java jar port mport url pid
  java=$(find_java)
  jar=$(launcher) || { echo "apicurio.sh: no launcher jar in $home" >&2; exit 1; }
  port=$(free_port)
  mport=$(free_port)
  url="http://127.0.0.1:$port"
  # shellcheck disable=SC2086
  (cd "$dir" && exec env \
    QUARKUS_HTTP_HOST=127.0.0.1 QUARKUS_HTTP_PORT="$port" \
    QUARKUS_MANAGEMENT_HOST=127.0.0.1 QUARKUS_MANAGEMENT_PORT="$mport" \
    APICURIO_REST_DELETION_ARTIFACT_ENABLED=true \
    APICURIO_REST_DELETION_ARTIFACT_VERSION_ENABLED=true \
    APICURIO_REST_DELETION_GROUP_ENABLED=true \
    APICURIO_STORAGE_SNAPSHOT_LOCATION="$dir" APICURIO_IMPORT_WORK_DIR="$dir" \
    setsid "$java" ${APICURIO_JAVA_OPTS:--Xmx512m} -Djava.awt.headless=true -jar "$jar" \
    >"$dir/server.log" 2>&1 </dev/null) &
  pid=$!
  echo "$pid" >"$dir/pid"
  await_start "apicurio.sh: registry" "$pid" 480 "$dir/server.log" curl -fs -o /dev/null "$url/apis/ccompat/v7/subjects"
  echo "dir=$dir"
  echo "url=$url"
  echo "ccompat=$url/apis/ccompat/v7"
  echo "pid=$pid"
}

cmd=${1:-}
case "$cmd" in
  fetch) fetch ;;
  start)
    fetch
    command -v curl >/dev/null || { echo "apicurio.sh: curl not found (apt-get install curl)" >&2; exit 1; }
    dir=$(mktemp -d /tmp/outbox-cdc-apicurio.XXXXXX)
    start_server "$dir"
    ;;
  stop)
    stop_dir "${2:?usage: apicurio.sh stop DIR}" /tmp/outbox-cdc-apicurio.
    ;;
  *)
    echo "usage: scripts/apicurio.sh fetch | start | stop DIR" >&2
    exit 2
    ;;
esac
