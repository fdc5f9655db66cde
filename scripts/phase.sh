#!/usr/bin/env bash
# Runs one phase of make test and says what it took: its wall time, and its
# CPU time (user + sys of the commands it ran and waited for; servers that
# detach, such as the tests' PostgreSQL, are not counted). When
# SLUICE_PHASE_LOG names a file, a line "name status wall user sys" is
# appended to it, from which .ci/run prints its table (scripts/phase-table.sh).
# Usage: scripts/phase.sh NAME COMMAND [ARG...]; exits with the command's status.
set -uo pipefail
name=$1
shift
start=$(date +%s.%N)
"$@"
status=$?
end=$(date +%s.%N)
# The second line of `times` is the children's user and sys, as 1m2.345s;
# it runs in this shell (a subshell would have no children), into a file.
tf=$(mktemp)
times >"$tf"
read -r cpu_user cpu_sys < <(tail -n 1 "$tf" | awk '
  function sec(s,   m) { m = s; sub(/m.*/, "", m); sub(/^[0-9]+m/, "", s); sub(/s$/, "", s); return m * 60 + s }
  { printf "%.1f %.1f\n", sec($1), sec($2) }')
rm -f "$tf"
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
word=ok
[ "$status" -eq 0 ] || word="FAILED (exit $status)"
echo "== phase $name: $word, ${wall} s wall, $(awk -v u="$cpu_user" -v s="$cpu_sys" 'BEGIN { printf "%.1f", u + s }') s CPU (user $cpu_user, sys $cpu_sys)"
if [ -n "${SLUICE_PHASE_LOG:-}" ]; then
  # A phase that scripts/background.sh started, or one inside it, is marked
  # with a *: it ran beside the phases that followed it.
  [ -z "${SLUICE_PHASE_BACKGROUND:-}" ] || name="$name*"
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$wall" "$cpu_user" "$cpu_sys" >>"$SLUICE_PHASE_LOG"
fi
exit "$status"
