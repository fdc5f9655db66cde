#!/usr/bin/env bash
# Prints a new, empty directory for `make test` to use as TMPDIR: under
# $SLUICE_TEST_TMPDIR when set, else under /dev/shm when it is a tmpfs that
# allows executables and has room, else under ${TMPDIR:-/tmp}.
#
# Why: every test creates a database from a template and a Git repository or
# two, and those are file creations and copies. On a virtual disk they cost
# hundreds of milliseconds of kernel time each (CREATE DATABASE took 480-590 ms
# here, against 18-50 ms on tmpfs), and the suite is CPU-bound on 2 cores.
# The test cluster already runs with fsync=off: nothing in it must survive the
# machine, only the processes the tests kill.
set -euo pipefail

need_kb=$((4 * 1024 * 1024)) # 4 GiB free: the suite's peak is well under 1 GiB

base=${SLUICE_TEST_TMPDIR:-}
if [ -z "$base" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  opts=$(awk '$2 == "/dev/shm" && $3 == "tmpfs" { print $4 }' /proc/mounts 2>/dev/null | tail -n 1)
  free_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
  if [ -n "$opts" ] && [[ ",$opts," != *,noexec,* ]] && [ "${free_kb:-0}" -ge "$need_kb" ]; then
    base=/dev/shm
  fi
fi
base=${base:-${TMPDIR:-/tmp}}
mkdir -p "$base"
# Short, since unix socket paths under it have a 107-byte limit; traversable,
# since the test cluster runs as the postgres user when the tests run as root.
dir=$(mktemp -d "$base/sl.XXXXXX")
chmod 0755 "$dir"
echo "$dir"
