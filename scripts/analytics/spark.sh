#!/usr/bin/env bash
# Apache Spark for the analytics-engine test (test/integration/engine_test.go,
# OUTBOX_CDC_TEST_ENGINE=1): pyspark from PyPI in a venv, and Spark's Kafka
# source with its dependencies from Maven Central through mvn, both cached in
# $OUTBOX_CDC_CACHE (~/.cache/outbox-cdc); it runs on the machine's Java 17.
# Nothing is fetched at run time (no --packages, no Ivy).
#
#   scripts/analytics/spark.sh fetch   install and resolve (once; later runs
#                                      return at once); prints python= and jars=
#   scripts/analytics/spark.sh count BROKERS TOPIC OUT [--mode binary]
#                                      runs count_by_type.py on TOPIC (fetching
#                                      first if need be); its JSON result in OUT
set -euo pipefail

# 3.5.7 is the newest 3.5.x whose Kafka source Maven Central serves here
# (3.5.8 and 3.5.9 answer 404); keep in step with scripts/analytics/pom.xml.
SPARK_VERSION=3.5.7
here=$(cd "$(dirname "$0")" && pwd)
cache=${OUTBOX_CDC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-cdc}
home="$cache/spark-$SPARK_VERSION"
venv="$home/venv"
jars="$home/jars"

fetch_pyspark() {
  [ -f "$venv/.complete" ] && return 0
  command -v python3 >/dev/null || { echo "spark.sh: python3 not found (apt-get install python3 python3-venv)" >&2; exit 1; }
  command -v java >/dev/null || { echo "spark.sh: java not found (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
  rm -rf "$venv"
  python3 -m venv "$venv" >&2 || { echo "spark.sh: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install -q --disable-pip-version-check "pyspark==$SPARK_VERSION" >&2 \
    || { echo "spark.sh: pip could not install pyspark $SPARK_VERSION from PyPI" >&2; rm -rf "$venv"; exit 1; }
  touch "$venv/.complete"
}

# fetch_jars resolves spark-sql-kafka-0-10 and keeps only the artifacts
# that the pyspark package does not already carry in any version (it has
# Spark, Hadoop's client, slf4j, the compression codecs): two versions of a
# class on one classpath is a lottery.
fetch_jars() {
  [ -f "$jars/.complete" ] && return 0
  command -v mvn >/dev/null || { echo "spark.sh: mvn not found (apt-get install maven)" >&2; exit 1; }
  local tmp="$jars.tmp.$$" bundled j stem
  mkdir -p "$tmp"
  mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$tmp" -DincludeScope=runtime >&2 \
    || { echo "spark.sh: mvn could not resolve spark-sql-kafka-0-10 $SPARK_VERSION from Maven Central" >&2; rm -rf "$tmp"; exit 1; }
  bundled=$("$venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  for j in "$tmp"/*.jar; do
    stem=$(basename "$j") && stem=${stem%-*} # snappy-java-1.1.8.4.jar: snappy-java
    if compgen -G "$bundled/$stem-[0-9]*.jar" >/dev/null; then rm "$j"; fi
  done
  touch "$tmp/.complete"
  rm -rf "$jars" && mv "$tmp" "$jars"
}

case "${1:-}" in
  fetch)
    fetch_pyspark
    fetch_jars
    echo "python=$venv/bin/python"
    echo "jars=$jars"
    ;;
  count)
    [ $# -ge 4 ] || { echo "usage: spark.sh count BROKERS TOPIC OUT [count_by_type.py options]" >&2; exit 2; }
    fetch_pyspark
    fetch_jars
    PYTHONDONTWRITEBYTECODE=1 exec "$venv/bin/python" "$here/count_by_type.py" --brokers "$2" --topic "$3" --out "$4" --jars "$jars" "${@:5}"
    ;;
  *)
    echo "usage: scripts/analytics/spark.sh fetch | count BROKERS TOPIC OUT [options]" >&2
    exit 2
    ;;
esac
