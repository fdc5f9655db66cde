#!/usr/bin/env bash
# The API contract, checked with third-party tools from npm: both spec
# documents pass two validators (swagger-cli and Redocly), the TypeScript
# types generated from the spec are fresh, and the typed example
# type-checks with tsc --strict. Needs npm; without it, says so and passes,
# since make test must work on a machine with only Go.
set -euo pipefail
dir=internal/apiclient/ts
if ! command -v npm >/dev/null 2>&1; then
  echo "check-contract: skipped, npm is not installed (apt-get install npm to run it)"
  exit 0
fi
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$dir" && npx --no-install openapi-typescript ../../../httpapi/openapi.json -o "$tmp/schema.d.ts" >/dev/null)
if ! diff -u "$dir/schema.d.ts" "$tmp/schema.d.ts" >&2; then
  echo "$dir/schema.d.ts is stale; run 'make generate'" >&2
  exit 1
fi
(cd "$dir" && npx --no-install tsc --noEmit -p .)
(cd "$dir" && npm run -s validate 2>&1 | grep -E 'valid|error|warning' | grep -v '^$')
echo "check-contract: both spec documents valid (swagger-cli, Redocly); TypeScript types fresh; example type-checks"
