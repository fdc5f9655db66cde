#!/usr/bin/env bash
# make run: serve sluice on its embedded PostgreSQL, with an admin token kept
# in the data dir (created once, mode 0600) and printed with the URL.
set -euo pipefail
bin=$1
data_dir=$2
listen=$3

# Under root, the embedded PostgreSQL runs as the postgres user, which must be
# able to reach the data dir. A checkout under a private home (such as /root)
# is not reachable: use /var/lib/sluice then, and say so.
if [ "$(id -u)" -eq 0 ] && [ -z "${SLUICE_DATA_DIR_FORCED:-}" ]; then
  mkdir -p "$data_dir"
  pg_user=postgres
  id "$pg_user" >/dev/null 2>&1 || pg_user=nobody
  if ! runuser -u "$pg_user" -- test -x "$(cd "$data_dir" && pwd)"; then
    echo "note: user $pg_user cannot reach $(cd "$data_dir" && pwd); using /var/lib/sluice as the data dir" >&2
    data_dir=/var/lib/sluice
    mkdir -p "$data_dir"
    chmod 755 "$data_dir"
  fi
fi
mkdir -p "$data_dir"
token_file="$data_dir/admin-token"
if [ ! -s "$token_file" ]; then
  (umask 077 && printf 'sluice_%s\n' "$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')" >"$token_file")
fi
token=$(cat "$token_file")

# With no repository configured, serve the example intent repository from a
# local Git repository made once from examples/intent.
if [ -z "${SLUICE_GITOPS_REPO_URL:-}" ]; then
  example="$data_dir/example-intent"
  if [ ! -d "$example/.git" ]; then
    mkdir -p "$example"
    cp -R examples/intent/. "$example/"
    git -C "$example" -c init.defaultBranch=main init -q
    git -C "$example" add -A
    git -C "$example" -c user.name=sluice -c user.email=sluice@localhost commit -q -m "Example desired state"
  fi
  export SLUICE_GITOPS_REPO_URL="$(cd "$example" && pwd)"
  export SLUICE_GITOPS_SYNC_INTERVAL_SEC="${SLUICE_GITOPS_SYNC_INTERVAL_SEC:-60}"
  echo "  intent repository: $SLUICE_GITOPS_REPO_URL (from examples/intent; commit there and run: bin/sluice sync --wait)" >&2
fi

cat >&2 <<MSG

  sluice:    http://$listen
  River UI:  http://$listen/riverui/   (any user name; the token as password)
  token:     $token   (admin; kept in $token_file)

  export SLUICE_URL=http://$listen SLUICE_TOKEN=\$(cat $token_file)
  $bin journal

MSG
export SLUICE_DATA_DIR=$data_dir SLUICE_LISTEN=$listen SLUICE_BOOTSTRAP_TOKEN=$token
exec "$bin" serve
