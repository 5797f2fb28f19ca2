#!/usr/bin/env bash
# System packages the tests need that npm cannot provide: Debian's chromium for the browser tests of the
# pages pmlake ships (/docs, the local checkout page), and two independent ZIP readers (Info-ZIP's `unzip`,
# Python's zipfile) that check the bulk download's archives, and `redis-server` for the tests of limits shared
# across replicas (PMLAKE_REDIS_URL; test/helpers/redis.ts starts a throwaway one on loopback), and `postgresql`
# for the state's PostgreSQL backend, the replicas tests, `make cluster` and the ingest's lock across machines
# (PMLAKE_DATABASE_URL; scripts/postgres-local.sh starts a throwaway cluster, test/helpers/postgres.ts through it).
# Installed once; a no-op when present.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v unzip >/dev/null 2>&1 || missing+=(unzip)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# Debian keeps PostgreSQL's server binaries off PATH, under /usr/lib/postgresql/<version>/bin.
command -v initdb >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian packages for the tests: ${missing[*]}..." >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "warning: ${missing[*]} not found and cannot be installed (need root + apt-get)" >&2
fi
