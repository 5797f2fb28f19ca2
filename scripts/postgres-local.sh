#!/usr/bin/env bash
# A throwaway PostgreSQL on loopback, for the tests (test/helpers/postgres.ts calls this script) and for humans
# (and a future `make cluster`):
#   scripts/postgres-local.sh start <dir> <port>   initdb into <dir>/data when it holds no cluster yet, start the
#                                                  server on 127.0.0.1:<port> (socket in <dir>), create database
#                                                  `pmlake`, print its URL on stdout
#   scripts/postgres-local.sh stop <dir> [<port>]  stop the server (fast shutdown); <dir> stays for a restart
# Debian's `postgresql` package (scripts/ensure-system-deps.sh installs it) keeps its server binaries off PATH,
# under /usr/lib/postgresql/<version>/bin: PMLAKE_PG_BIN names the directory, else PATH's pg_ctl, else the newest
# version there. PostgreSQL refuses to run as root: as root the cluster belongs to PMLAKE_PG_OS_USER (default
# `postgres`, which the Debian package creates) and every server command runs through runuser (or su).
# Only for tests and local clusters: fsync off (a crash may lose the cluster, which is thrown away anyway), the
# superuser `pmlake` with a password generated into <dir>/password (scram on TCP), trust on the socket in <dir>
# (mode 0700, only its owner reaches it).
set -euo pipefail

usage() {
  echo "usage: $0 start|stop <dir> <port>" >&2
  exit 2
}
[ $# -ge 2 ] || usage
cmd=$1
dir=$2
port=${3:-}

bindir=${PMLAKE_PG_BIN:-}
if [ -z "$bindir" ]; then
  if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
    bindir=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
  else
    # The newest installed major version (sort -V: 9.6 < 10 < 15 < 16).
    bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  fi
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/pg_ctl" ] || [ ! -x "$bindir/initdb" ]; then
  echo "PostgreSQL server binaries not found: run \`bash scripts/ensure-system-deps.sh\` (Debian package postgresql) or set PMLAKE_PG_BIN" >&2
  exit 1
fi

# Who runs the server: ourselves, or a system user when we are root.
as_owner() { "$@"; }
owner=$(id -un)
if [ "$(id -u)" = "0" ]; then
  owner=${PMLAKE_PG_OS_USER:-postgres}
  if ! id -u "$owner" >/dev/null 2>&1; then
    echo "running as root, and user '$owner' does not exist to run PostgreSQL (set PMLAKE_PG_OS_USER)" >&2
    exit 1
  fi
  if command -v runuser >/dev/null 2>&1; then
    as_owner() { runuser -u "$owner" -- "$@"; }
  else
    as_owner() { su -s /bin/sh "$owner" -c "$(printf '%q ' "$@")"; }
  fi
fi

data="$dir/data"
case "$cmd" in
  start)
    [[ "$port" =~ ^[0-9]+$ ]] || usage
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    data="$dir/data"
    chmod 0700 "$dir"
    [ "$owner" = "$(id -un)" ] || chown "$owner" "$dir"
    if ! as_owner test -w "$dir"; then
      echo "user '$owner' cannot write $dir (a parent directory closed to it?)" >&2
      exit 1
    fi
    if [ ! -f "$data/PG_VERSION" ]; then
      [ -f "$dir/password" ] || (umask 077 && od -An -N18 -tx1 /dev/urandom | tr -d ' \n' >"$dir/password")
      [ "$owner" = "$(id -un)" ] || chown "$owner" "$dir/password"
      # --no-sync: a throwaway cluster needs no fsync of its fresh files (initdb takes ~1 s instead of several).
      as_owner "$bindir/initdb" -D "$data" -U pmlake --pwfile="$dir/password" -E UTF8 --locale=C \
        --auth-host=scram-sha-256 --auth-local=trust --no-sync >"$dir/initdb.log" 2>&1 ||
        {
          cat "$dir/initdb.log" >&2
          exit 1
        }
    fi
    # -w: pg_ctl returns once the server accepts connections (or fails after -t seconds, with the log).
    if as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
      : # already running (a second `start`): only print the URL
    elif ! as_owner "$bindir/pg_ctl" -D "$data" -l "$dir/postgres.log" -w -t 30 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k '$dir' -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >/dev/null; then
      tail -n 20 "$dir/postgres.log" >&2 || true
      exit 1
    fi
    if [ -z "$(as_owner "$bindir/psql" -h "$dir" -p "$port" -U pmlake -d postgres -XAtqc "SELECT 1 FROM pg_database WHERE datname = 'pmlake'")" ]; then
      as_owner "$bindir/createdb" -h "$dir" -p "$port" -U pmlake pmlake
    fi
    echo "postgresql://pmlake:$(cat "$dir/password")@127.0.0.1:$port/pmlake"
    ;;
  stop)
    [ -f "$data/postmaster.pid" ] || exit 0
    as_owner "$bindir/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null
    ;;
  *) usage ;;
esac
