#!/usr/bin/env bash
# Prints a generator's sum: the SHA-256 of its version and of every file it
# reads and writes, in a fixed order. `make generate` keeps it beside the
# output (db/sqlc.sum, internal/apiclient/client.sum); check-generated runs
# the generator only when the sum it computes differs from the kept one,
# since building sqlc on a fresh machine is minutes of CPU. Any change to an
# input (a query, a migration, the spec) or an output (an edit by hand)
# changes the sum, and then the generator runs and its diff decides.
# Usage: scripts/gen-sum.sh sqlc|oapi-codegen
set -euo pipefail
module() { awk -v m="$1" '$1 == m { print $2 }' go.mod; }
files() { find "$@" -type f | LC_ALL=C sort; }
case "${1:-}" in
sqlc)
  version=$(module github.com/sqlc-dev/sqlc)
  list=$(files sqlc.yaml db/migrations db/sqlcschema queries db/sqlc_db.go db/sqlc_models.go $(ls db/*_sqlc.go))
  ;;
oapi-codegen)
  version=$(module github.com/oapi-codegen/oapi-codegen/v2)
  list=$(files internal/apiclient/oapi-codegen.yaml internal/apiclient/openapi-3.0.json internal/apiclient/client.gen.go)
  ;;
*)
  echo "usage: $0 sqlc|oapi-codegen" >&2
  exit 2
  ;;
esac
{
  echo "$1 $version"
  for f in $list; do sha256sum "$f"; done
} | sha256sum | cut -d' ' -f1
