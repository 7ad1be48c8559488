#!/usr/bin/env bash
# Throwaway three-broker Apache Kafka cluster (KRaft) for the cluster tests,
# on 127.0.0.1 only: three brokers (nodes 1-3) and a controller of their own
# (node 0, a separate process, so that losing two brokers does not lose the
# quorum: the controller still shrinks in-sync replica sets and moves
# leaders), with the production defaults the tests need: replication factor
# 3, min.insync.replicas=2, auto-creation off, unclean election off. Same
# jars as scripts/kafka.sh.
#
#   scripts/kafka-cluster.sh start            format and start three nodes;
#                                              prints dir=, brokers=, and pidN=, portN= lines
#   scripts/kafka-cluster.sh kill DIR N       SIGKILL broker N (1-3), keeping its data
#   scripts/kafka-cluster.sh stop-node DIR N  stop node N cleanly (SIGTERM: it hands its leaderships over)
#   scripts/kafka-cluster.sh start-node DIR N start node N again
#   scripts/kafka-cluster.sh stop DIR         stop all and remove DIR
#
# Clients connect to each node's EXTERNAL listener; the nodes replicate over
# INTERNAL. KAFKA_CLUSTER_ADVERTISE="host:port host:port host:port" makes the
# nodes advertise those EXTERNAL addresses (a proxy's) instead of their own.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
"$here/kafka.sh" fetch
KAFKA_VERSION=${KAFKA_VERSION:-$(sed -n 's/^DEFAULT_KAFKA_VERSION=\([^ ]*\).*/\1/p' "$here/kafka.sh")}
cache=${OUTBOX_CDC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-cdc}
libs="$cache/kafka-$KAFKA_VERSION/libs"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start_node() { # DIR N: start node N in the background
  local dir=$1 n=$2
  local nd="$dir/node$n"
  : >"$nd/server.log"
  setsid java -Xms96m -Xmx320m -XX:+UseG1GC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j.configuration="file:$dir/log4j.properties" \
    -cp "$libs/*" kafka.Kafka "$nd/server.properties" >>"$nd/server.log" 2>&1 </dev/null &
  echo $! >"$nd/pid"
}

wait_node() { # DIR N: wait until node N has started
  local nd="$1/node$2" pid
  pid=$(cat "$nd/pid")
  for _ in $(seq 1 360); do
    grep -q "Kafka Server started" "$nd/server.log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  echo "kafka-cluster.sh: node $2 did not start; its log:" >&2
  tail -n 30 "$nd/server.log" >&2
  return 1
}

report() {
  local dir=$1 brokers=""
  for n in 1 2 3; do brokers="$brokers,127.0.0.1:$(cat "$dir/node$n/port")"; done
  echo "dir=$dir"
  echo "brokers=${brokers#,}"
  for n in 1 2 3; do
    echo "pid$n=$(cat "$dir/node$n/pid")"
    echo "port$n=$(cat "$dir/node$n/port")"
  done
}

kill_node() {
  local pid
  pid=$(cat "$1/node$2/pid")
  kill -CONT "$pid" 2>/dev/null || true
  kill -"$3" "$pid" 2>/dev/null || true
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
}

cmd=${1:-}
case "$cmd" in
  start)
    dir=$(mktemp -d /tmp/outbox-cdc-kafka-cluster.XXXXXX)
    read -r -a advertise <<<"${KAFKA_CLUSTER_ADVERTISE:-}"
    mkdir -p "$dir/node0"
    cport=$(free_port)
    echo "$cport" >"$dir/node0/port"
    voters="0@127.0.0.1:$cport"
    cat >"$dir/node0/server.properties" <<PROPS
process.roles=controller
node.id=0
controller.quorum.voters=$voters
listeners=CONTROLLER://127.0.0.1:$cport
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT
log.dirs=$dir/node0/data
broker.session.timeout.ms=6000
PROPS
    for n in 1 2 3; do
      mkdir -p "$dir/node$n"
      free_port >"$dir/node$n/port"
      free_port >"$dir/node$n/iport"
    done
    for n in 1 2 3; do
      nd="$dir/node$n"
      port=$(cat "$nd/port")
      adv=${advertise[$((n - 1))]:-127.0.0.1:$port}
      cat >"$nd/server.properties" <<PROPS
process.roles=broker
node.id=$n
controller.quorum.voters=$voters
listeners=EXTERNAL://127.0.0.1:$port,INTERNAL://127.0.0.1:$(cat "$nd/iport")
advertised.listeners=EXTERNAL://$adv,INTERNAL://127.0.0.1:$(cat "$nd/iport")
controller.listener.names=CONTROLLER
listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=INTERNAL
log.dirs=$nd/data
num.partitions=3
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
auto.create.topics.enable=false
unclean.leader.election.enable=false
replica.lag.time.max.ms=5000
group.initial.rebalance.delay.ms=0
log.flush.interval.messages=9223372036854775807
PROPS
    done
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
    id=$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
    for n in 0 1 2 3; do
      java -cp "$libs/*" -Dlog4j.configuration="file:$dir/log4j.properties" kafka.tools.StorageTool format \
        -t "$id" -c "$dir/node$n/server.properties" >"$dir/node$n/format.log" 2>&1 \
        || { echo "kafka-cluster.sh: storage format of node $n failed:" >&2; cat "$dir/node$n/format.log" >&2; exit 1; }
    done
    for n in 0 1 2 3; do start_node "$dir" "$n"; done
    for n in 0 1 2 3; do
      wait_node "$dir" "$n" || { for m in 0 1 2 3; do kill_node "$dir" "$m" 9; done; exit 1; }
    done
    report "$dir"
    ;;
  kill)
    kill_node "${2:?usage: kafka-cluster.sh kill DIR N}" "${3:?}" 9
    ;;
  stop-node)
    kill_node "${2:?usage: kafka-cluster.sh stop-node DIR N}" "${3:?}" TERM
    ;;
  start-node)
    dir=${2:?usage: kafka-cluster.sh start-node DIR N}
    start_node "$dir" "${3:?}"
    wait_node "$dir" "$3"
    report "$dir"
    ;;
  stop)
    dir=${2:?usage: kafka-cluster.sh stop DIR}
    for n in 1 2 3 0; do [ -f "$dir/node$n/pid" ] && kill_node "$dir" "$n" TERM; done
    case "$dir" in /tmp/outbox-cdc-kafka-cluster.*) rm -rf "$dir" ;; esac
    ;;
  *)
    echo "usage: scripts/kafka-cluster.sh start | kill DIR N | stop-node DIR N | start-node DIR N | stop DIR" >&2
    exit 2
    ;;
esac
