#!/usr/bin/env bash
# Installs and starts what the tests and the local cluster need:
#   - Debian packages: etcd-server, docker.io, containernetworking-plugins,
#     iproute2, iptables, curl, docker-compose, debootstrap (only the missing
#     ones; apt-get update once)
#   - dockerd running in the background (skipped when `docker info` works)
#   - the Python venv .venv with `pip install -e '.[test]'` (re-run only when
#     pyproject.toml changed since the last install)
#   - tests/js/node_modules (the JavaScript client's test) with `npm ci`, re-run
#     only when tests/js/package-lock.json changed; needs node >= 20 and npm
# Idempotent: run it as often as you like; it says what it did and skipped.
#   ./hack/setup.sh --venv-only   only the venv: what the unit tests and the linters need
#                                 (no root, no Docker, no etcd)
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-setup}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv_only=""
case "${1:-}" in
  "") ;;
  --venv-only) venv_only=1 ;;
  *) die "unknown argument: $1 (usage: setup.sh [--venv-only])" ;;
esac

take_setup_lock

if [[ -n "${venv_only}" ]]; then
  ensure_venv
  log "ready (venv only): $("${MINIK8S_VENV}/bin/python" --version 2>&1)"
  exit 0
fi

ensure_apt_packages "${MINIK8S_APT_PACKAGES[@]}"
ensure_dockerd
"${MINIK8S_ROOT}/hack/images.sh"  # the pause, busybox and httpd images pods run (built locally: no registry)
"${MINIK8S_ROOT}/hack/python-image.sh"  # minik8s/python:1, the official client in a pod (in-cluster tests)
"${MINIK8S_ROOT}/hack/guestbook-images.sh"  # minik8s/redis:1 and minik8s/guestbook:1 (examples/guestbook/)
ensure_venv
ensure_node_modules "${MINIK8S_ROOT}/tests/js"

for f in /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback; do
  [[ -x "${f}" ]] || die "CNI plugin ${f} missing (package containernetworking-plugins)"
done
log "ready: $(etcd --version 2>/dev/null | head -n1), docker $(docker info --format '{{.ServerVersion}}' 2>/dev/null), $("${MINIK8S_VENV}/bin/python" --version 2>&1), node $(node --version)"
