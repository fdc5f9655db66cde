#!/usr/bin/env bash
# make test: its phases, each a make target timed by scripts/phase.sh, which
# prints the phase's wall and CPU time when it ends (and logs them to
# $SLUICE_PHASE_LOG, from which .ci/run prints a table).
#
# In line: tools, vet, build, tests. Two strands run beside them, because
# the tests mostly wait (on processes starting, probes, timeouts) and leave
# a CPU idle for minutes:
# - browser: Chromium for the console's browser test, mostly a download.
#   The tests wait for it.
# - generated: the generators' build (sqlc's is the largest single build of
#   the run), the generated-code check and the contract check, at a lower
#   priority (nice 4: about a third of the CPU while the line wants both),
#   so that they mostly take the CPU the line leaves. At nice 10 (a tenth)
#   the strand's 90 s of CPU took 830 s of wall clock beside the tests and
#   ended after them, the run's last phase.
# A strand's output is printed when it is waited for. Every strand is
# waited for, also after a failure, so that none outlives make test and
# every failure is reported; the first failure's status is make test's.
# Usage (from the Makefile): MAKE=... scripts/test.sh
set -uo pipefail
make=${MAKE:-make}
logs=bin/.strands
mkdir -p "$logs"
status=0
fail() { [ "$status" -ne 0 ] || status=$1; }

# strand NAME COMMAND...: runs a phase in the background, its output to a log.
strand() {
  local name=$1
  shift
  SLUICE_PHASE_BACKGROUND=1 scripts/phase.sh "$name" "$@" >"$logs/$name.log" 2>&1 </dev/null &
  echo "== phase $name: started beside the phases in line"
}
# join NAME PID: waits for a strand and prints its output.
join() {
  local st=0
  wait "$2" || st=$?
  cat "$logs/$1.log"
  rm -f "$logs/$1.log"
  return "$st"
}

# PostgreSQL, git and Terraform first: the browser's apt-get would hold the
# package lock.
scripts/phase.sh tools $make ensure-tools || exit $?

strand browser $make ensure-browser
browser=$!
strand generated nice -n 4 $make test-generated
generated=$!

scripts/phase.sh vet $make vet || fail $?
[ "$status" -ne 0 ] || scripts/phase.sh build $make build || fail $?
join browser "$browser" || fail $?
[ "$status" -ne 0 ] || scripts/phase.sh tests $make test-go || fail $?
join generated "$generated" || fail $?
exit "$status"
