#!/usr/bin/env bash
# Milvus for the tests (issue 13; docs/deployment.md "Milvus"): the gRPC server of the milvus-lite wheel on 127.0.0.1
# and a free port, data under .services/milvus/. Called by scripts/services.sh:
#   up      start it (no-op when already running), wait until pymilvus answers, write .services/milvus.env
#   down    stop it and remove its state; safe to call any time, also after a crash or a half-done `up`
#   status  say whether it runs, and where
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
STATE=.services/milvus
ENV_FILE=.services/milvus.env
PID_FILE=$STATE/pid
START_TIMEOUT_S=${CE_MILVUS_START_TIMEOUT_S:-120}

# The server's pid, when the pid file names a live milvus_lite server started from this checkout (a recycled pid, or
# another checkout's server, is never ours to kill).
server_pid() {
  [ -f "$PID_FILE" ] || return 1
  local pid; pid=$(cat "$PID_FILE")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "milvus_lite server --data-dir $STATE/data" || return 1
  [ "$(readlink "/proc/$pid/cwd")" = "$(pwd -P)" ] || return 1
  echo "$pid"
}

# Wait until pymilvus lists collections at $1 (the server imports for a few seconds), or the server dies.
wait_ready() {
  "$PY" - "$1" "$START_TIMEOUT_S" "$(cat "$PID_FILE")" <<'EOF'
import os, sys, time
from pymilvus import MilvusClient
uri, deadline, pid = sys.argv[1], time.monotonic() + float(sys.argv[2]), int(sys.argv[3])
while True:
    try:
        client = MilvusClient(uri=uri, timeout=5)
        client.list_collections()
        client.close()
        break
    except Exception as err:  # not listening yet
        try:
            os.kill(pid, 0)
        except OSError:
            sys.exit(f"milvus-lite exited during start: see .services/milvus/server.log ({err})")
        if time.monotonic() > deadline:
            sys.exit(f"milvus-lite did not answer at {uri} in {sys.argv[2]} s: {err}")
        time.sleep(0.5)
EOF
}

stop() {
  local pid
  if pid=$(server_pid); then
    kill -INT "$pid" 2>/dev/null || true  # the server drains in-flight calls (up to 5 s) and closes its data dir
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$STATE" "$ENV_FILE"
}

case "${1:-status}" in
  up)
    if pid=$(server_pid) && [ -f "$ENV_FILE" ]; then
      echo "milvus: already running (pid $pid; $(cat "$ENV_FILE"))"
      exit 0
    fi
    stop  # leftovers of a crash or a failed start
    mkdir -p "$STATE"
    port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # setsid: its own session, so the server outlives this script and a Ctrl-C of the caller's terminal
    setsid "$PY" -m milvus_lite server --data-dir "$STATE/data" --host 127.0.0.1 --port "$port" \
      > "$STATE/server.log" 2>&1 < /dev/null &
    echo $! > "$PID_FILE"
    uri="http://127.0.0.1:$port"
    if ! wait_ready "$uri"; then
      tail -n 20 "$STATE/server.log" >&2 || true
      stop
      exit 1
    fi
    echo "export CE_TEST_MILVUS_URI=$uri" > "$ENV_FILE"
    echo "milvus: up at $uri (pid $(cat "$PID_FILE"), data $STATE/data)"
    ;;
  down)
    stop
    echo "milvus: down"
    ;;
  status)
    if pid=$(server_pid); then
      echo "milvus: running (pid $pid; $(cat "$ENV_FILE" 2>/dev/null || echo 'no env file'))"
    else
      echo "milvus: not running"
      exit 1
    fi
    ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
