#!/usr/bin/env bash
# Throwaway single-node Apache Kafka broker (KRaft) for the demo and the tests,
# on 127.0.0.1 only. Its jars come from Maven Central through mvn (cached in
# ~/.m2 and in $OUTBOX_CDC_CACHE); it runs on the machine's Java 17.
#
#   scripts/kafka.sh fetch         resolve the jars (done by start when needed)
#   scripts/kafka.sh start         format a new broker on free ports and start it;
#                                  prints dir=, brokers=, pid= lines
#   scripts/kafka.sh restart DIR   start the broker in DIR again, same ports and data
#   scripts/kafka.sh stop-server DIR   kill the broker (SIGKILL), keeping DIR
#   scripts/kafka.sh stop DIR      stop it and remove DIR
#
# Extra broker settings: KAFKA_EXTRA_PROPS="key=value key=value", and
# KAFKA_EXTRA_PROPS_FILE (appended as is, for values with spaces).
# KAFKA_EXTRA_LISTENERS="SASL_SSL://127.0.0.1:PORT SSL://127.0.0.1:PORT" adds
# listeners (each named after its security protocol), advertised as given.
# KAFKA_FORMAT_ARGS are extra storage-format arguments, such as
# "--add-scram SCRAM-SHA-512=[name=u,password=p]".
set -euo pipefail

# The broker's version: KAFKA_VERSION from the environment (make
# test-kafka4 sets a 4.x), else this default, pom.xml's too.
DEFAULT_KAFKA_VERSION=3.9.1 # keep in step with scripts/kafka/pom.xml
KAFKA_VERSION=${KAFKA_VERSION:-$DEFAULT_KAFKA_VERSION}
here=$(cd "$(dirname "$0")" && pwd)
cache=${OUTBOX_CDC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-cdc}
libs="$cache/kafka-$KAFKA_VERSION/libs"
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

fetch() {
  [ -f "$libs/kafka_2.13-$KAFKA_VERSION.jar" ] && return 0
  command -v mvn >/dev/null || { echo "kafka.sh: mvn not found (apt-get install maven)" >&2; exit 1; }
  command -v java >/dev/null || { echo "kafka.sh: java not found (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
  local tmp="$libs.tmp.$$"
  mkdir -p "$tmp"
  mvn -q -B -C -f "$here/kafka/pom.xml" dependency:copy-dependencies -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$tmp" -DincludeScope=runtime >&2 \
    || { echo "kafka.sh: mvn could not resolve Kafka $KAFKA_VERSION from Maven Central" >&2; rm -rf "$tmp"; exit 1; }
  rm -rf "$libs" && mv "$tmp" "$libs"
}

start_server() {
  local dir=$1 port
  port=$(cat "$dir/port")
  : >"$dir/server.log"
  setsid java -Xms256m -Xmx768m -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j.configuration="file:$dir/log4j.properties" \
    -cp "$libs/*" kafka.Kafka "$dir/server.properties" >>"$dir/server.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  await_start "kafka.sh: broker" "$pid" 240 "$dir/server.log" grep -qs "Kafka Server started" "$dir/server.log"
  echo "dir=$dir"
  echo "brokers=127.0.0.1:$port"
  echo "pid=$pid"
}

cmd=${1:-}
case "$cmd" in
  fetch) fetch ;;
  start)
    fetch
    dir=$(mktemp -d /tmp/outbox-cdc-kafka.XXXXXX)
    port=$(free_port)
    cport=$(free_port)
    echo "$port" >"$dir/port"
    cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=3
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
auto.create.topics.enable=true
group.initial.rebalance.delay.ms=0
log.flush.interval.messages=9223372036854775807
PROPS
    for kv in ${KAFKA_EXTRA_PROPS:-}; do echo "$kv" >>"$dir/server.properties"; done
    if [ -n "${KAFKA_EXTRA_LISTENERS:-}" ]; then
      listeners="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
      advertised="PLAINTEXT://127.0.0.1:$port"
      protocols="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
      for l in $KAFKA_EXTRA_LISTENERS; do
        listeners="$listeners,$l"
        advertised="$advertised,$l"
        protocols="$protocols,${l%%://*}:${l%%://*}"
      done
      printf 'listeners=%s\nadvertised.listeners=%s\nlistener.security.protocol.map=%s\n' "$listeners" "$advertised" "$protocols" >>"$dir/server.properties"
    fi
    if [ -n "${KAFKA_EXTRA_PROPS_FILE:-}" ]; then cat "$KAFKA_EXTRA_PROPS_FILE" >>"$dir/server.properties"; fi
    cat >"$dir/log4j.properties" <<'L4J'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=WARN
log4j.logger.kafka.server.KafkaRaftServer=INFO
log4j.logger.state.change.logger=WARN
L4J
    set -f # KAFKA_FORMAT_ARGS may hold [brackets]
    # shellcheck disable=SC2086
    java -cp "$libs/*" -Dlog4j.configuration="file:$dir/log4j.properties" kafka.tools.StorageTool format \
      -t "$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)" \
      -c "$dir/server.properties" ${KAFKA_FORMAT_ARGS:-} >"$dir/format.log" 2>&1 \
      || { echo "kafka.sh: storage format failed:" >&2; cat "$dir/format.log" >&2; exit 1; }
    start_server "$dir"
    ;;
  restart)
    dir=${2:?usage: kafka.sh restart DIR}
    start_server "$dir"
    ;;
  stop-server)
    dir=${2:?usage: kafka.sh stop-server DIR}
    pid=$(cat "$dir/pid")
    kill -9 "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    ;;
  stop)
    stop_dir "${2:?usage: kafka.sh stop DIR}" /tmp/outbox-cdc-kafka.
    ;;
  *)
    echo "usage: scripts/kafka.sh fetch | start | restart DIR | stop-server DIR | stop DIR" >&2
    exit 2
    ;;
esac
