#!/usr/bin/env bash
# Writes the newest sync table into docs/benchmarks.md, between its two
# "bench-sync" marker lines, with what the figures were measured on: the
# date, the cores and CPU, Go, git, PostgreSQL and its settings, and the file
# system of the repositories. The rest of the document (the analysis) is
# left as it is. Usage: scripts/bench-doc.sh RAW TABLE, where RAW is the go
# test output of BenchmarkSync10k and TABLE the table printed from it.
set -euo pipefail
raw=$1 table=$2
doc=docs/benchmarks.md
begin='<!-- bench-sync: written by make bench-sync from here -->'
end='<!-- bench-sync: to here -->'

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
env_line=$(grep -m1 '^bench-env: ' "$raw" | sed 's/^bench-env: //' || true)
block=$(mktemp)
{
  echo "$begin"
  echo
  echo "The newest \`make bench-sync\`, as it printed it:"
  echo
  echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' with uncommitted changes')"
  echo "- $(nproc) cores${cpu:+ ($cpu)}, $(awk '/^MemTotal/ { printf "%.0f GB RAM", $2 / 1048576 }' /proc/meminfo)"
  echo "- $(go version | sed 's/^go version //'), $(git --version)"
  echo "- ${env_line:-PostgreSQL settings not printed}"
  echo
  echo '```'
  sed '/^$/d' "$table"
  echo '```'
  echo
  echo "$end"
} > "$block"

if grep -qF "$begin" "$doc" && grep -qF "$end" "$doc"; then
  awk -v b="$begin" -v e="$end" -v f="$block" '
    $0 == b { while ((getline line < f) > 0) print line; skip = 1; next }
    $0 == e { skip = 0; next }
    !skip' "$doc" > "$doc.new"
else
  { cat "$doc"; echo; cat "$block"; } > "$doc.new"
fi
mv "$doc.new" "$doc"
rm -f "$block"
echo "wrote the table into $doc"
