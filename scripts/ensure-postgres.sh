#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries are installed: sluice's embedded
# database and the tests' private cluster run them. Installs Debian's package
# when run as root; otherwise prints the one command that would.
set -euo pipefail

have_pg() {
  command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1
}

if have_pg; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "PostgreSQL is not installed. Install it with:  sudo apt-get install -y postgresql" >&2
  echo "(or point sluice at a server you run with SLUICE_DATABASE_URL, and the tests with SLUICE_TEST_DATABASE_URL)" >&2
  exit 1
fi
echo "Installing PostgreSQL from Debian's packages..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq postgresql >/dev/null
have_pg || { echo "apt-get install postgresql did not provide pg_ctl" >&2; exit 1; }
