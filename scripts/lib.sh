# shellcheck shell=bash
# Functions shared by the scripts that run a throwaway server for the demo
# and the tests (kafka.sh, apicurio.sh), so that each starts, waits for and
# stops its server the same way. Sourced, not run: . "$here/lib.sh"

# free_port prints a TCP port that is free on 127.0.0.1 now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# await_start WHO PID TRIES LOG CHECK... runs the readiness check CHECK
# every 0.25 s, TRIES times at most, while PID lives, and returns once it
# succeeds. A server that dies or is never ready is killed, and the script
# exits 1 after printing "WHO did not start" and the last lines of LOG: a
# caller sees why at once, not a timeout of its own.
await_start() {
  local who=$1 pid=$2 tries=$3 log=$4
  shift 4
  for _ in $(seq 1 "$tries"); do
    if "$@"; then return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  echo "$who did not start; its log:" >&2
  tail -n 30 "$log" >&2
  kill -9 "$pid" 2>/dev/null || true
  exit 1
}

# stop_dir DIR PREFIX stops the server whose id DIR/pid holds, if there is
# one: SIGCONT first (a server a test paused with SIGSTOP cannot act on
# SIGTERM), then SIGTERM, up to 10 s to exit, then SIGKILL. It then removes
# DIR if the script made it (DIR starts with PREFIX), never a directory
# named by mistake.
stop_dir() {
  local dir=$1 prefix=$2 pid
  if [ -f "$dir/pid" ]; then
    pid=$(cat "$dir/pid")
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  case "$dir" in "$prefix"*) rm -rf "$dir" ;; esac
}
