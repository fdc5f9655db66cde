#!/usr/bin/env bash
# Runs a phase of make test in the background, beside the phases that follow
# it, and waits for it where its result is needed: make test installs
# Chromium (a download, mostly waiting on the network) while vet compiles.
#
#   scripts/background.sh start NAME COMMAND [ARG...]   start it, timed by scripts/phase.sh
#   scripts/background.sh wait NAME                     print its output, exit with its status
#
# Its output and status wait in bin/.background/NAME.{log,status}.
set -euo pipefail
dir=bin/.background
verb=$1 name=$2
shift 2
case $verb in
start)
  mkdir -p "$dir"
  rm -f "$dir/$name.status"
  (
    status=0
    scripts/phase.sh "$name" "$@" >"$dir/$name.log" 2>&1 </dev/null || status=$?
    echo "$status" >"$dir/$name.status.tmp"
    mv "$dir/$name.status.tmp" "$dir/$name.status"
  ) >/dev/null 2>&1 </dev/null &
  echo "== phase $name: started in the background (output when make test needs it)"
  ;;
wait)
  [ -e "$dir/$name.log" ] || { echo "background phase $name was never started" >&2; exit 1; }
  while [ ! -e "$dir/$name.status" ]; do sleep 0.2; done
  cat "$dir/$name.log"
  status=$(cat "$dir/$name.status")
  rm -f "$dir/$name.log" "$dir/$name.status"
  exit "$status"
  ;;
*)
  echo "usage: $0 start|wait NAME [COMMAND...]" >&2
  exit 2
  ;;
esac
