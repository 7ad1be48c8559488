#!/usr/bin/env bash
# Debezium's PostgreSQL connector on Kafka Connect standalone, for the
# side-by-side benchmark only (go run ./cmd/outbox-bench -compare). Its jars
# come from Maven Central through mvn (cached in ~/.m2 and in
# $OUTBOX_CDC_CACHE); it runs on the machine's Java 17.
#
#   scripts/debezium.sh fetch    resolve the jars; prints libs=DIR
set -euo pipefail

DEBEZIUM_VERSION=3.3.2.Final # keep in step with scripts/debezium/pom.xml
here=$(cd "$(dirname "$0")" && pwd)
cache=${OUTBOX_CDC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-cdc}
libs="$cache/debezium-$DEBEZIUM_VERSION/libs"

case "${1:-}" in
  fetch)
    if [ ! -f "$libs/.complete" ]; then
      command -v mvn >/dev/null || { echo "debezium.sh: mvn not found (apt-get install maven)" >&2; exit 1; }
      tmp="$libs.tmp.$$"
      mkdir -p "$tmp"
      mvn -q -B -f "$here/debezium/pom.xml" dependency:copy-dependencies -DoutputDirectory="$tmp" -DincludeScope=runtime >&2 \
        || { echo "debezium.sh: mvn could not resolve Debezium $DEBEZIUM_VERSION from Maven Central" >&2; rm -rf "$tmp"; exit 1; }
      touch "$tmp/.complete"
      rm -rf "$libs" && mv "$tmp" "$libs"
    fi
    echo "libs=$libs"
    ;;
  *)
    echo "usage: scripts/debezium.sh fetch" >&2
    exit 2
    ;;
esac
