#!/usr/bin/env bash
# Makes sure the tools sluice and its tests run are installed: PostgreSQL's
# server binaries (the embedded database and the tests' private cluster),
# git (the example repository and the tests' remotes), Terraform, wrk when
# SLUICE_ENSURE_WRK=1 (make bench), and, when SLUICE_ENSURE_BROWSER=1 (make
# test, never make run), Chromium for the web console's browser test where
# npm is installed (without npm that test skips, as check-contract does) and,
# as root, systemd-container for the systemd runtime's tests, and Podman,
# runc, Debian's registry and Docker's daemon for the container runtime's,
# and docker-compose for the compose runtime's.
# Installs Debian's packages when run as root; otherwise prints the one
# command that would.
set -euo pipefail

have_pg() {
  command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1
}

# Terraform (infrastructure units; their tests): SLUICE_TERRAFORM_BIN, or
# terraform on PATH, or ./bin/terraform (the Makefile puts ./bin on PATH).
# Where it is missing, build v1.5.7, the last MPL-licensed release, from the
# Go module proxy into ./bin: about three minutes on two cores, once.
if [ -n "${SLUICE_TERRAFORM_BIN:-}" ]; then
  [ -x "$SLUICE_TERRAFORM_BIN" ] || { echo "SLUICE_TERRAFORM_BIN=$SLUICE_TERRAFORM_BIN is not an executable file" >&2; exit 1; }
elif ! command -v terraform >/dev/null 2>&1 && [ ! -x bin/terraform ]; then
  echo "Terraform is missing: building v1.5.7 into ./bin with go install (about 3 minutes, once)..." >&2
  GOBIN="$PWD/bin" go install github.com/hashicorp/terraform@v1.5.7
fi

have_chromium() {
  [ -n "${SLUICE_CHROMIUM:-}" ] && return 0
  [ -x /usr/lib/chromium/chromium-headless-shell ] || [ -x /usr/lib/chromium/chromium ] ||
    command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1
}

missing=()
have_pg || missing+=(postgresql)
command -v git >/dev/null 2>&1 || missing+=(git)
# wrk, the load generator of make bench's API reads: only when the bench asks.
if [ "${SLUICE_ENSURE_WRK:-}" = 1 ] && ! command -v wrk >/dev/null 2>&1; then missing+=(wrk); fi
browser=()
if [ "${SLUICE_ENSURE_BROWSER:-}" = 1 ] && command -v npm >/dev/null 2>&1 &&
  [ "${SLUICE_SKIP_BROWSER_TESTS:-}" != 1 ] && ! have_chromium; then
  # The headless shell: Chromium without its desktop half (no GTK), which is
  # all a headless test drives, and a smaller download.
  browser=(chromium-headless-shell)
fi
# systemd-container (systemd-nspawn, 1.5 MB) boots the real systemd the
# systemd runtime's tests drive. Only as root: a container needs it, and
# without root those tests skip saying so.
if [ "${SLUICE_ENSURE_BROWSER:-}" = 1 ] && [ "$(id -u)" -eq 0 ] && ! command -v systemd-nspawn >/dev/null 2>&1; then
  browser+=(systemd-container)
fi
# Podman (rootful, with runc: crun refuses hybrid cgroups) serves the Engine
# API the container runtime's tests drive. Only as root, like nspawn; its
# recommends (CNI plugins, conmon's helpers) are what a bridge network needs.
engine=()
if [ "${SLUICE_ENSURE_BROWSER:-}" = 1 ] && [ "$(id -u)" -eq 0 ]; then
  command -v podman >/dev/null 2>&1 || engine+=(podman)
  command -v runc >/dev/null 2>&1 || engine+=(runc)
fi
# Debian's docker-registry (the CNCF distribution registry) is the tests'
# registry, but its install script starts a default service: the package is
# downloaded and unpacked into ./bin/docker-registry, never installed, and the
# tests run usr/bin/docker-registry from there with a config of their own.
registry=bin/docker-registry/usr/bin/docker-registry
want_registry=0
if [ "${SLUICE_ENSURE_BROWSER:-}" = 1 ] && [ "$(id -u)" -eq 0 ] && [ ! -x "$registry" ]; then
  want_registry=1
fi
# Docker's daemon (docker.io 20.10, and the containerd it starts) is the
# second engine the container runtime's tests drive, but docker.io's install
# script starts a default daemon (iptables on, /var/lib/docker): like the
# registry, both packages are downloaded and unpacked into ./bin/dockerd,
# never installed, and the tests start usr/sbin/dockerd from there with every
# path in a directory of their own. runc is Podman's (above); tini is left
# out (docker-init serves only `--init`, which the runtime never asks for).
# dockerd links libdevmapper, which Podman depends on too.
dockerd=bin/dockerd/usr/sbin/dockerd
want_dockerd=0
if [ "${SLUICE_ENSURE_BROWSER:-}" = 1 ] && [ "$(id -u)" -eq 0 ]; then
  [ -x "$dockerd" ] && [ -x bin/dockerd/usr/bin/containerd ] || want_dockerd=1
  dpkg-query -W -f='${Status}' libdevmapper1.02.1 2>/dev/null | grep -q 'ok installed' || engine+=(libdevmapper1.02.1)
fi
# docker-compose (1.29.2, Compose v1) is the Compose the compose runtime's
# tests drive against Podman's socket: Debian packages no v2 plugin. Its
# package starts no daemon; without its recommends (docker.io) nothing else
# comes with it.
compose=()
if [ "${SLUICE_ENSURE_BROWSER:-}" = 1 ] && [ "$(id -u)" -eq 0 ] && ! command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose)
fi
[ ${#missing[@]} -eq 0 ] && [ ${#browser[@]} -eq 0 ] && [ ${#engine[@]} -eq 0 ] && [ ${#compose[@]} -eq 0 ] && [ $want_registry = 0 ] && [ $want_dockerd = 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "Missing: ${missing[*]} ${browser[*]}. Install with:  sudo apt-get install -y ${missing[*]} ${browser[*]}" >&2
  [ ${#browser[@]} -gt 0 ] && echo "(or skip the console's browser test with SLUICE_SKIP_BROWSER_TESTS=1)" >&2
  echo "(or point sluice at a PostgreSQL you run with SLUICE_DATABASE_URL, and the tests with SLUICE_TEST_DATABASE_URL)" >&2
  exit 1
fi
pkgs="${missing[*]} ${browser[*]} ${engine[*]}"
[ -z "${pkgs// /}" ] || echo "Installing ${pkgs} from Debian's packages..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
[ ${#engine[@]} -eq 0 ] || apt-get install -y -qq "${engine[@]}" >/dev/null
if [ ${#compose[@]} -gt 0 ]; then
  echo "Installing docker-compose (Compose v1) from Debian's packages, without its recommends..." >&2
  apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
  command -v docker-compose >/dev/null 2>&1 || { echo "apt-get install docker-compose did not provide docker-compose" >&2; exit 1; }
fi
if [ $want_registry = 1 ]; then
  echo "Unpacking Debian's docker-registry into ./bin/docker-registry (not installed: no service of it starts)..." >&2
  dl=$(mktemp -d)
  # apt downloads as its sandbox user, who must own the directory.
  chown _apt "$dl" 2>/dev/null || true
  (cd "$dl" && apt-get download -qq docker-registry >/dev/null)
  rm -rf bin/docker-registry && mkdir -p bin/docker-registry
  dpkg-deb -x "$dl"/docker-registry_*.deb bin/docker-registry
  rm -rf "$dl"
  [ -x "$registry" ] || { echo "the docker-registry package did not hold usr/bin/docker-registry" >&2; exit 1; }
fi
if [ $want_dockerd = 1 ]; then
  echo "Unpacking Docker's daemon and containerd into ./bin/dockerd (not installed: no daemon of it starts)..." >&2
  dl=$(mktemp -d)
  chown _apt "$dl" 2>/dev/null || true
  (cd "$dl" && apt-get download -qq docker.io containerd >/dev/null) ||
    { rm -rf "$dl"; echo "apt-get download docker.io containerd failed" >&2; exit 1; }
  rm -rf bin/dockerd && mkdir -p bin/dockerd
  for deb in "$dl"/docker.io_*.deb "$dl"/containerd_*.deb; do dpkg-deb -x "$deb" bin/dockerd; done
  rm -rf "$dl"
  for tool in usr/sbin/dockerd usr/sbin/docker-proxy usr/bin/containerd usr/bin/containerd-shim-runc-v2; do
    [ -x "bin/dockerd/$tool" ] || { echo "the docker.io and containerd packages did not hold $tool" >&2; exit 1; }
  done
fi
[ ${#missing[@]} -eq 0 ] || apt-get install -y -qq "${missing[@]}" >/dev/null
# Chromium only drives the browser test, and nspawn only boots a test's
# systemd: none of their recommends.
[ ${#browser[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${browser[@]}" >/dev/null
have_pg || { echo "apt-get install postgresql did not provide pg_ctl" >&2; exit 1; }
case " ${browser[*]} " in *" chromium-headless-shell "*) have_chromium || { echo "apt-get install chromium-headless-shell did not provide it" >&2; exit 1; } ;; esac
for tool in "${engine[@]}"; do command -v "$tool" >/dev/null 2>&1 || { echo "apt-get install $tool did not provide it" >&2; exit 1; }; done
case " ${browser[*]} " in *" systemd-container "*) command -v systemd-nspawn >/dev/null 2>&1 || { echo "apt-get install systemd-container did not provide systemd-nspawn" >&2; exit 1; } ;; esac
