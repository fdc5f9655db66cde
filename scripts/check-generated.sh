#!/usr/bin/env bash
# Fails when the committed generated code is stale: sqlc's query code, the
# OpenAPI spec, the Go client generated from it, and the web console's built
# files (these need npm; without it that part says so and is skipped, since
# make test must work on a machine with only Go).
set -euo pipefail
GO=${GO:-go}
# The generators make builds into ./bin (make tools); run alone, the script
# falls back to go tool, which builds them into the Go cache.
SQLC=${SQLC:-$GO tool sqlc}
OAPI_CODEGEN=${OAPI_CODEGEN:-$GO tool oapi-codegen}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

# build TOOL: the generator at $TOOL, built by make when it is missing.
build() {
  if [ -n "${MAKE:-}" ] && [ ! -x "$1" ]; then $MAKE -s "$1"; fi
}

# sqlc runs only when its sum changed (scripts/gen-sum.sh says why).
if [ "$(scripts/gen-sum.sh sqlc)" = "$(cat db/sqlc.sum 2>/dev/null)" ]; then
  echo "sqlc: its inputs and outputs are those make generate summed in db/sqlc.sum; not run"
else
  build "$SQLC"
  if ! $SQLC diff >"$tmp/sqlc.diff" 2>&1; then
    echo "sqlc code is stale; run 'make generate':" >&2
    cat "$tmp/sqlc.diff" >&2
    status=1
  else
    echo "sqlc code is fresh, but db/sqlc.sum is not its sum; run 'make generate'" >&2
    status=1
  fi
fi

# Built once for both documents: each go run would link it again.
$GO build -o "$tmp/openapi-spec" ./cmd/openapi-spec
"$tmp/openapi-spec" >"$tmp/openapi.json"
if ! diff -u httpapi/openapi.json "$tmp/openapi.json" >&2; then
  echo "httpapi/openapi.json is stale; run 'make generate'" >&2
  status=1
fi

"$tmp/openapi-spec" -3.0 >"$tmp/openapi-3.0.json"
if ! diff -u internal/apiclient/openapi-3.0.json "$tmp/openapi-3.0.json" >&2; then
  echo "internal/apiclient/openapi-3.0.json is stale; run 'make generate'" >&2
  status=1
fi

# The client, from the spec just compared: oapi-codegen runs only when its
# sum changed.
if [ "$status" -eq 0 ] && [ "$(scripts/gen-sum.sh oapi-codegen)" = "$(cat internal/apiclient/client.sum 2>/dev/null)" ]; then
  echo "oapi-codegen: its inputs and outputs are those make generate summed in internal/apiclient/client.sum; not run"
else
  build "$OAPI_CODEGEN"
  sed "s#^output: .*#output: $tmp/client.gen.go#" internal/apiclient/oapi-codegen.yaml >"$tmp/oapi-codegen.yaml"
  $OAPI_CODEGEN -config "$tmp/oapi-codegen.yaml" "$tmp/openapi-3.0.json"
  if ! diff -u internal/apiclient/client.gen.go "$tmp/client.gen.go" >&2; then
    echo "internal/apiclient/client.gen.go is stale; run 'make generate'" >&2
    status=1
  elif [ "$(scripts/gen-sum.sh oapi-codegen)" != "$(cat internal/apiclient/client.sum 2>/dev/null)" ]; then
    echo "internal/apiclient/client.gen.go is fresh, but internal/apiclient/client.sum is not its sum; run 'make generate'" >&2
    status=1
  fi
fi
# The console: type-checked against the committed API types, then rebuilt
# with the locked packages and compared with internal/console/dist. It is
# built in a copy of its sources (beside the API types it imports), since
# npm ci first deletes node_modules: in internal/console itself it would
# pull playwright-core from under the browser test that make test runs at
# the same time.
if command -v npm >/dev/null 2>&1; then
  tree=$tmp/tree
  mkdir -p "$tree/internal/console" "$tree/internal/apiclient/ts"
  cp -R internal/console/package.json internal/console/package-lock.json internal/console/tsconfig.json \
    internal/console/build.mjs internal/console/src "$tree/internal/console/"
  cp internal/apiclient/ts/schema.d.ts "$tree/internal/apiclient/ts/"
  (cd "$tree/internal/console" && npm ci --no-audit --no-fund --loglevel=error >/dev/null &&
    npx --no-install tsc --noEmit -p . && node build.mjs "$tmp/console")
  if ! diff -rq internal/console/dist "$tmp/console" >&2; then
    echo "internal/console/dist is stale; run 'make console'" >&2
    status=1
  fi
else
  echo "check-generated: the console's freshness skipped, npm is not installed (apt-get install npm to check it)"
fi
[ "$status" -eq 0 ] && echo "generated code is fresh"
exit "$status"
