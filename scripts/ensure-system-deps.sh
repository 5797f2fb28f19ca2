#!/usr/bin/env bash
# System packages the tests need that npm cannot provide: Debian's chromium for the browser tests of the
# pages pmlake ships (/docs, the local checkout page). Installed once; a no-op when present.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian chromium for browser tests..." >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "warning: chromium not found and cannot be installed (need root + apt-get)" >&2
  fi
fi
