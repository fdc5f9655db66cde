#!/usr/bin/env bash
# Fails when the committed generated code is stale: sqlc's query code, the
# OpenAPI spec, and the Go client generated from it.
set -euo pipefail
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

if ! $GO tool sqlc diff >"$tmp/sqlc.diff" 2>&1; then
  echo "sqlc code is stale; run 'make generate':" >&2
  cat "$tmp/sqlc.diff" >&2
  status=1
fi

$GO run ./cmd/openapi-spec >"$tmp/openapi.json"
if ! diff -u httpapi/openapi.json "$tmp/openapi.json" >&2; then
  echo "httpapi/openapi.json is stale; run 'make generate'" >&2
  status=1
fi

$GO run ./cmd/openapi-spec -3.0 >"$tmp/openapi-3.0.json"
if ! diff -u internal/apiclient/openapi-3.0.json "$tmp/openapi-3.0.json" >&2; then
  echo "internal/apiclient/openapi-3.0.json is stale; run 'make generate'" >&2
  status=1
fi

sed "s#^output: .*#output: $tmp/client.gen.go#" internal/apiclient/oapi-codegen.yaml >"$tmp/oapi-codegen.yaml"
$GO tool oapi-codegen -config "$tmp/oapi-codegen.yaml" "$tmp/openapi-3.0.json"
if ! diff -u internal/apiclient/client.gen.go "$tmp/client.gen.go" >&2; then
  echo "internal/apiclient/client.gen.go is stale; run 'make generate'" >&2
  status=1
fi
[ "$status" -eq 0 ] && echo "generated code is fresh"
exit "$status"
