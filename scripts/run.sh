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

# The demo service: cmd/hello, built as v1 and v2 (make demo-artifacts).
# The example services pin v1; v2 is there to deploy.
v1=""
if [ -x bin/hello-v1 ] && [ -x bin/hello-v2 ]; then
  v1="sha256:$(sha256sum bin/hello-v1 | cut -d' ' -f1)"
  v2="sha256:$(sha256sum bin/hello-v2 | cut -d' ' -f1)"
fi

# With no repository configured, serve the example intent repository: a bare
# Git repository made once from examples/intent (sluice pushes deploy pins to
# it), and a clone of it to edit, commit and push from.
if [ -z "${SLUICE_GITOPS_REPO_URL:-}" ]; then
  remote="$data_dir/example-intent.git"
  work="$data_dir/example-intent"
  gitc() { git -c init.defaultBranch=main -c user.name=sluice -c user.email=sluice@localhost "$@"; }
  if [ ! -d "$remote" ]; then
    if [ -d "$work/.git" ]; then
      # A checkout from an earlier version of this script: make it the clone.
      gitc clone -q --bare "$work" "$remote"
      git -C "$work" remote remove origin 2>/dev/null || true
      git -C "$work" remote add origin "$remote"
    else
      mkdir -p "$work"
      cp -R examples/intent/. "$work/"
      if [ -n "$v1" ]; then
        placeholder=sha256:0000000000000000000000000000000000000000000000000000000000000001
        sed -i "s/$placeholder/$v1/" "$work"/services/*.json
      fi
      gitc -C "$work" init -q
      gitc -C "$work" add -A
      gitc -C "$work" commit -q -m "Example desired state"
      gitc clone -q --bare "$work" "$remote"
      git -C "$work" remote add origin "$remote"
    fi
  fi
  export SLUICE_GITOPS_REPO_URL="$(cd "$remote" && pwd)"
  export SLUICE_GITOPS_SYNC_INTERVAL_SEC="${SLUICE_GITOPS_SYNC_INTERVAL_SEC:-60}"
  echo "  intent repository: $SLUICE_GITOPS_REPO_URL (edit in $work: git pull, commit, git push origin main)" >&2
fi

cat >&2 <<MSG

  sluice:    http://$listen
  River UI:  http://$listen/riverui/   (any user name; the token as password)
  token:     $token   (admin; kept in $token_file)

  export SLUICE_URL=http://$listen SLUICE_TOKEN=\$(cat $token_file)
  $bin journal

  Services sluice starts run under their own supervisor and keep running
  after sluice stops; stop one with: $bin service stop NAME

MSG
export SLUICE_DATA_DIR=$data_dir SLUICE_LISTEN=$listen SLUICE_BOOTSTRAP_TOKEN=$token
if [ -z "$v1" ]; then
  exec "$bin" serve
fi

# Serve, store the demo artifacts once it is ready, and stop with it.
"$bin" serve &
serve_pid=$!
trap 'kill -TERM $serve_pid 2>/dev/null; wait $serve_pid' INT TERM
export SLUICE_URL=http://$listen SLUICE_TOKEN=$token
ready=""
for _ in $(seq 1 600); do
  if "$bin" status >/dev/null 2>&1; then ready=1; break; fi
  kill -0 $serve_pid 2>/dev/null || break
  sleep 0.1
done
if [ -n "$ready" ]; then  "$bin" artifact push bin/hello-v1 >/dev/null 2>&1 && "$bin" artifact push bin/hello-v2 >/dev/null 2>&1 &&
  cat >&2 <<MSG

  demo service: hello (http://127.0.0.1:18081/), artifacts stored:
    v1  $v1   (pinned by the example repository)
    v2  $v2
  try:
    $bin sync --wait
    $bin converge hello
    $bin deploy hello $v2
    $bin rollback hello
    $bin services
    $bin service status -v hello

MSG
fi
wait $serve_pid
