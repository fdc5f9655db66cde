#!/usr/bin/env bash
# Prints the phases scripts/phase.sh logged to FILE as a table: each phase's
# status, wall time and CPU time (user + sys), in the order they ended, and
# the sums of the phases that ran one after the other. A phase marked * ran
# in the background, beside the others (a strand's name, then its parts).
# Usage: scripts/phase-table.sh FILE
set -euo pipefail
log=$1
[ -s "$log" ] || { echo "no phase ran"; exit 0; }
awk -F'\t' '
  BEGIN { printf "%-16s %-10s %9s %9s %9s %9s\n", "phase", "status", "wall s", "CPU s", "user s", "sys s" }
  {
    st = $2 == 0 ? "ok" : "FAILED " $2
    printf "%-16s %-10s %9.1f %9.1f %9.1f %9.1f\n", $1, st, $3, $4 + $5, $4, $5
    if ($1 !~ /\*$/) { w += $3; u += $4; s += $5 } else bg = 1
  }
  END {
    printf "%-16s %-10s %9.1f %9.1f %9.1f %9.1f\n", "in line", "", w, u + s, u, s
    if (bg) print "* in the background, beside the phases in line"
  }
' "$log"
