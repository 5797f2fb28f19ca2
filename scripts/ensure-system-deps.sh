#!/usr/bin/env bash
# System packages npm cannot provide, installed once (a no-op when present). With no argument, everything the
# tests need: Debian's chromium for the browser tests of the pages pmlake ships (/docs, /charts, the local
# checkout page), two independent ZIP readers (Info-ZIP's `unzip`, Python's zipfile) that check the bulk
# download's archives, `redis-server` for the tests of limits shared across replicas (PMLAKE_REDIS_URL;
# test/helpers/redis.ts starts a throwaway one on loopback) and `postgresql` for the state's PostgreSQL backend,
# the replicas tests and the ingest's lock across machines (PMLAKE_DATABASE_URL; scripts/postgres-local.sh starts
# a throwaway cluster, test/helpers/postgres.ts through it). With arguments, only those (`make cluster` and
# `make bench` name redis-server and postgresql; `make demo` needs none of them).
set -euo pipefail
want=("$@")
[ ${#want[@]} -eq 0 ] && want=(chromium unzip python3 redis-server postgresql)
missing=()
for p in "${want[@]}"; do
  case "$p" in
    chromium | unzip | python3 | redis-server) command -v "$p" >/dev/null 2>&1 || missing+=("$p") ;;
    # Debian keeps PostgreSQL's server binaries off PATH, under /usr/lib/postgresql/<version>/bin.
    postgresql) command -v initdb >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql) ;;
    *)
      echo "ensure-system-deps.sh: unknown package '$p' (chromium, unzip, python3, redis-server, postgresql)" >&2
      exit 2
      ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian packages: ${missing[*]}..." >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "warning: ${missing[*]} not found and cannot be installed (need root + apt-get)" >&2
fi
