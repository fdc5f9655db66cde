#!/usr/bin/env bash
# Prints the phases scripts/phase.sh logged to FILE as a table: each phase's
# status, wall time and CPU time (user + sys), and their sums. Usage:
# scripts/phase-table.sh FILE
set -euo pipefail
log=$1
[ -s "$log" ] || { echo "no phase ran"; exit 0; }
awk -F'\t' '
  BEGIN { printf "%-16s %-10s %9s %9s %9s %9s\n", "phase", "status", "wall s", "CPU s", "user s", "sys s" }
  {
    st = $2 == 0 ? "ok" : "FAILED " $2
    printf "%-16s %-10s %9.1f %9.1f %9.1f %9.1f\n", $1, st, $3, $4 + $5, $4, $5
    w += $3; u += $4; s += $5
  }
  END { printf "%-16s %-10s %9.1f %9.1f %9.1f %9.1f\n", "phases", "", w, u + s, u, s }
' "$log"
