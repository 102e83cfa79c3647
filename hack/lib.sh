# shellcheck shell=bash
# Shared helpers for the hack/ scripts. Source it; do not run it.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Everything here is idempotent: each ensure_* function checks first and
# says whether it did something or skipped it.

if [[ -n "${MINIK8S_LIB_SOURCED:-}" ]]; then
  return 0
fi
MINIK8S_LIB_SOURCED=1

MINIK8S_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MINIK8S_VENV="${MINIK8S_ROOT}/.venv"
# Prefix of every log line; a script may set it before sourcing this file.
MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-minik8s}"

# Packages the tests and the local cluster need, as "package:command" where
# the command (optional) must also be on PATH for the package to count as there.
# shellcheck disable=SC2034 # used by setup.sh
MINIK8S_APT_PACKAGES=(
  etcd-server:etcd
  docker.io:dockerd
  containerd:containerd # a node's own containerd (CRI plugin), the second runtime (containerd_node/)
  runc:runc
  containernetworking-plugins
  iproute2:ip
  iptables:iptables
  curl:curl
  docker-compose:docker-compose # the compose cluster (docker-compose.yml)
  debootstrap:debootstrap       # its Debian base image (hack/cluster-images.sh)
  nginx-light:nginx             # the ingress controller's proxy (python -m ingress_nginx)
  chromium:chromium             # the road page's browser test (tests/e2e/test_road.py, selenium)
  chromium-driver:chromedriver
)

# ---------------------------------------------------------------- logging ---

log() {
  printf '[%s %s] %s\n' "${MINIK8S_LOG_PREFIX}" "$(date +%H:%M:%S)" "$*" >&2
}

warn() {
  log "WARNING: $*"
}

die() {
  log "ERROR: $*"
  exit 1
}

# ---------------------------------------------------------------- waiting ---

# wait_for [--pid PID] [--interval SECONDS] [--quiet] DESCRIPTION TIMEOUT_SECONDS CMD [ARG...]
#
# Runs CMD (output discarded) until it succeeds or TIMEOUT_SECONDS pass.
# With --pid, gives up at once when process PID has exited. Returns 0 when
# CMD succeeded, 1 otherwise (and says why, unless --quiet).
wait_for() {
  local pid="" interval="0.5" quiet=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --pid) pid="$2"; shift 2 ;;
      --interval) interval="$2"; shift 2 ;;
      --quiet) quiet=1; shift ;;
      *) break ;;
    esac
  done
  local desc="$1" timeout="$2"
  shift 2
  local deadline=$((SECONDS + timeout))
  while true; do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    if [[ -n "${pid}" ]] && _pid_gone "${pid}"; then
      [[ -n "${quiet}" ]] || log "${desc}: process ${pid} exited before it was ready"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      [[ -n "${quiet}" ]] || log "${desc}: not ready after ${timeout}s"
      return 1
    fi
    sleep "${interval}"
  done
}

# ------------------------------------------------------------------ ports ---

# free_port: prints a TCP port on 127.0.0.1 that is free right now.
free_port() {
  local py
  if [[ -x "${MINIK8S_VENV}/bin/python" ]]; then
    py="${MINIK8S_VENV}/bin/python"
  else
    py="$(command -v python3)"
  fi
  "${py}" - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

# -------------------------------------------------------------------- apt ---

_apt_package_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

# ensure_apt_packages package[:command] ...
# Installs the packages that are missing (see MINIK8S_APT_PACKAGES).
# Runs `apt-get update` once, and only when something is missing. Services
# that packages would start at install time are not started (policy-rc.d):
# our scripts start their own processes.
ensure_apt_packages() {
  local missing=() present=() spec pkg cmd
  for spec in "$@"; do
    pkg="${spec%%:*}"
    cmd=""
    if [[ "${spec}" == *:* ]]; then
      cmd="${spec#*:}"
    fi
    if _apt_package_installed "${pkg}" && { [[ -z "${cmd}" ]] || command -v "${cmd}" >/dev/null 2>&1; }; then
      present+=("${pkg}")
    else
      missing+=("${pkg}")
    fi
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "apt: skip, already installed: ${present[*]}"
    return 0
  fi
  if [[ ${#present[@]} -gt 0 ]]; then
    log "apt: already installed: ${present[*]}"
  fi
  log "apt: installing ${missing[*]}"
  if [[ "$(id -u)" -ne 0 ]]; then
    die "apt: need root to install ${missing[*]}"
  fi

  local policy=/usr/sbin/policy-rc.d made_policy=""
  if [[ ! -e "${policy}" ]]; then
    printf '#!/bin/sh\n# minik8s: no services started during apt-get install\nexit 101\n' >"${policy}"
    chmod 755 "${policy}"
    made_policy=1
  fi
  local rc=0
  export DEBIAN_FRONTEND=noninteractive
  {
    apt-get update -q -o DPkg::Lock::Timeout=300 &&
      apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "${missing[@]}"
  } >&2 || rc=$?
  if [[ -n "${made_policy}" ]]; then
    rm -f "${policy}"
  fi
  if [[ ${rc} -ne 0 ]]; then
    die "apt: installing ${missing[*]} failed (exit ${rc})"
  fi
  hash -r
  log "apt: installed ${missing[*]}"
}

# ---------------------------------------------------------------- dockerd ---

MINIK8S_DOCKERD_LOG="${MINIK8S_DOCKERD_LOG:-/var/log/minik8s-dockerd.log}"
MINIK8S_DOCKERD_TIMEOUT="${MINIK8S_DOCKERD_TIMEOUT:-90}"

docker_running() {
  docker info >/dev/null 2>&1
}

# ensure_dockerd: starts dockerd in the background unless `docker info` works.
ensure_dockerd() {
  if docker_running; then
    log "dockerd: skip, already running ($(docker info --format '{{.ServerVersion}}, storage {{.Driver}}, cgroup v{{.CgroupVersion}}' 2>/dev/null))"
    return 0
  fi
  command -v dockerd >/dev/null 2>&1 || die "dockerd: not installed (package docker.io)"
  local pid="" p
  for p in $(pgrep -x dockerd || true); do
    if ! _pid_gone "${p}"; then # a zombie (not reaped) is no daemon
      pid="${p}"
      break
    fi
  done
  if [[ -n "${pid}" ]]; then
    log "dockerd: process ${pid} exists but does not answer yet; waiting"
  else
    log "dockerd: starting (log ${MINIK8S_DOCKERD_LOG})"
    pid="$(start_background "${MINIK8S_DOCKERD_LOG}" dockerd)"
  fi
  if ! wait_for --pid "${pid}" "dockerd" "${MINIK8S_DOCKERD_TIMEOUT}" docker info; then
    log "dockerd: last lines of ${MINIK8S_DOCKERD_LOG}:"
    tail -n 30 "${MINIK8S_DOCKERD_LOG}" >&2 || true
    die "dockerd did not come up"
  fi
  log "dockerd: running (pid ${pid}; $(docker info --format '{{.ServerVersion}}, storage {{.Driver}}, cgroup v{{.CgroupVersion}}' 2>/dev/null))"
}

# ------------------------------------------------------------------- venv ---

# _pick_python: prints a python3 >= 3.11 that can make a venv.
_pick_python() {
  local c
  for c in "${PYTHON:-}" python3 /root/.pyenv/shims/python3 python3.11 /usr/bin/python3; do
    [[ -n "${c}" ]] || continue
    c="$(command -v "${c}" 2>/dev/null)" || continue
    if "${c}" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
      printf '%s\n' "${c}"
      return 0
    fi
  done
  return 1
}

# ensure_venv: creates .venv when missing (or broken) and runs
# `pip install -e '.[test]'` when pyproject.toml changed since the last
# successful install (stamp file .venv/.minik8s-install-stamp).
ensure_venv() {
  local venv="${MINIK8S_VENV}" stamp="${MINIK8S_VENV}/.minik8s-install-stamp"
  if [[ -x "${venv}/bin/python" ]] && "${venv}/bin/python" -c 'import sys' >/dev/null 2>&1; then
    log "venv: skip, ${venv} exists ($("${venv}/bin/python" --version 2>&1))"
  else
    local py
    py="$(_pick_python)" || die "venv: no python3 >= 3.11 with venv found (set PYTHON=...)"
    if [[ -e "${venv}" ]]; then
      warn "venv: ${venv} is broken; recreating it"
      rm -rf "${venv}"
    fi
    log "venv: creating ${venv} with ${py} ($("${py}" --version 2>&1))"
    "${py}" -m venv "${venv}" || die "venv: creating ${venv} failed"
  fi

  local want have=""
  want="$(sha256sum <"${MINIK8S_ROOT}/pyproject.toml" | cut -d' ' -f1)"
  if [[ -f "${stamp}" ]]; then
    have="$(cat "${stamp}")"
  fi
  if [[ "${want}" == "${have}" ]]; then
    log "venv: skip pip install, pyproject.toml unchanged since the last install"
    return 0
  fi
  log "venv: pip install -e '.[test]' (pyproject.toml $([[ -n "${have}" ]] && echo changed || echo 'not installed yet'))"
  rm -f "${stamp}"
  # pip's notes about this machine's absent local index folders are dropped.
  local rc=0
  (cd "${MINIK8S_ROOT}" && "${venv}/bin/python" -m pip install -q -e '.[test]' 2>&1) |
    { grep -v "^WARNING: Location 'file://.*' is ignored" || true; } >&2 || rc=$?
  [[ ${rc} -eq 0 ]] || die "venv: pip install -e '.[test]' failed (exit ${rc})"
  printf '%s\n' "${want}" >"${stamp}"
  log "venv: installed"
}

# ------------------------------------------------------------------- node ---

# The JavaScript client's test (tests/js): Node.js of at least this major version (tests/js/package.json's
# engines; @kubernetes/client-node 1.4.0 runs on it, 2.x wants 22).
MINIK8S_NODE_MAJOR="${MINIK8S_NODE_MAJOR:-20}"

# ensure_node_modules DIR: `npm ci --prefix DIR` when DIR/node_modules is missing or was installed from
# another DIR/package-lock.json (its digest is kept in DIR/node_modules/.minik8s-install-stamp, which the
# test checks too). Dies when node or npm is missing or node is older than MINIK8S_NODE_MAJOR.
ensure_node_modules() {
  local dir="$1" stamp="$1/node_modules/.minik8s-install-stamp" version major want have=""
  command -v node >/dev/null 2>&1 ||
    die "node: not found (Node.js >= ${MINIK8S_NODE_MAJOR} with npm is needed for ${dir}: the JavaScript client's test)"
  command -v npm >/dev/null 2>&1 ||
    die "npm: not found (Node.js >= ${MINIK8S_NODE_MAJOR} with npm is needed for ${dir}: the JavaScript client's test)"
  version="$(node --version 2>/dev/null)" || die "node: \`node --version\` failed"
  major="${version#v}"
  major="${major%%.*}"
  if ! [[ "${major}" =~ ^[0-9]+$ ]] || ((major < MINIK8S_NODE_MAJOR)); then
    die "node: ${version} found; ${dir}/package.json needs node ${MINIK8S_NODE_MAJOR} or newer"
  fi
  want="$(sha256sum <"${dir}/package-lock.json" | cut -d' ' -f1)"
  if [[ -f "${stamp}" ]]; then
    have="$(cat "${stamp}")"
  fi
  if [[ "${want}" == "${have}" ]]; then
    log "npm: skip, ${dir}/node_modules matches its package-lock.json (node ${version})"
    return 0
  fi
  log "npm: npm ci --prefix ${dir} (node ${version}; node_modules $([[ -n "${have}" ]] && echo stale || echo 'not installed yet'))"
  local rc=0
  npm ci --prefix "${dir}" --engine-strict --no-audit --no-fund >&2 || rc=$?
  [[ ${rc} -eq 0 ]] || die "npm: npm ci --prefix ${dir} failed (exit ${rc})"
  printf '%s\n' "${want}" >"${stamp}"
  log "npm: installed ${dir}/node_modules"
}

# -------------------------------------------------------------- processes ---

# start_background LOGFILE CMD [ARG...]: starts CMD detached (own session, so
# a Ctrl-C or the end of the calling script leaves it running; stdin from
# /dev/null; stdout and stderr appended to LOGFILE) and prints its pid.
# The setup lock's fd 9 is closed in the child so it never holds the lock.
start_background() {
  local logfile="$1"
  shift
  setsid "$@" </dev/null >>"${logfile}" 2>&1 9>&- &
  printf '%s\n' "$!"
}

# take_setup_lock: one setup at a time on this machine (apt, dockerd and the
# venv are shared). Held on fd 9 until the calling script exits. A user who
# cannot write /var/lock (setup.sh --venv-only needs no root) locks in /tmp.
take_setup_lock() {
  local lock="/var/lock/minik8s-setup.lock"
  if ! { : >>"${lock}"; } 2>/dev/null; then
    lock="${TMPDIR:-/tmp}/minik8s-setup-$(id -u).lock"
  fi
  exec 9>"${lock}"
  if ! flock -n 9; then
    log "another setup holds ${lock}; waiting for it"
    flock -w 900 9 || die "timed out waiting for ${lock}"
  fi
}
# A pid file holds "PID STARTTIME" (STARTTIME: field 22 of /proc/PID/stat),
# so a recycled pid is never taken for the process we started.

_proc_field() { # _proc_field PID N -> field N (1-based) of /proc/PID/stat
  local stat rest
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  rest="${stat##*) }" # fields 3.. (the command name may hold spaces)
  local -a f
  read -r -a f <<<"${rest}"
  printf '%s\n' "${f[$(($2 - 3))]}"
}

# write_pidfile FILE PID
write_pidfile() {
  local start
  start="$(_proc_field "$2" 22)" || start=""
  printf '%s %s\n' "$2" "${start}" >"$1"
}

# pidfile_pid FILE: prints the pid of FILE's process if it is still alive.
pidfile_pid() {
  local file="$1" pid start now
  [[ -f "${file}" ]] || return 1
  read -r pid start <"${file}" || true
  [[ "${pid}" =~ ^[0-9]+$ ]] || return 1
  kill -0 "${pid}" 2>/dev/null || return 1
  now="$(_proc_field "${pid}" 22)" || return 1
  [[ -z "${start}" || "${start}" == "${now}" ]] || return 1
  [[ "$(_proc_field "${pid}" 3)" != "Z" ]] || return 1
  printf '%s\n' "${pid}"
}

# stop_pidfile FILE NAME [TIMEOUT]: SIGTERM, then SIGKILL after TIMEOUT
# seconds (default 15), to the process (and its process group, when it leads
# one) recorded in FILE. Removes FILE.
stop_pidfile() {
  local file="$1" name="$2" timeout="${3:-15}" pid target
  if ! pid="$(pidfile_pid "${file}")"; then
    if [[ -f "${file}" ]]; then
      log "${name}: not running (stale pid file removed)"
    fi
    rm -f "${file}"
    return 0
  fi
  target="${pid}"
  if [[ "$(_proc_field "${pid}" 5)" == "${pid}" ]]; then
    target="-${pid}" # it leads its own process group (started with setsid)
  fi
  log "${name}: stopping pid ${pid} (SIGTERM)"
  kill -TERM -- "${target}" 2>/dev/null || true
  if ! wait_for --quiet --interval 0.2 "${name} exit" "${timeout}" _pid_gone "${pid}"; then
    log "${name}: still running after ${timeout}s; SIGKILL"
    kill -KILL -- "${target}" 2>/dev/null || true
    wait_for --quiet --interval 0.2 "${name} exit after SIGKILL" 5 _pid_gone "${pid}" || true
  fi
  rm -f "${file}"
  log "${name}: stopped"
}

# _pid_gone PID: true when PID has exited (a zombie counts as exited: the
# process that started it may be gone, and PID 1 here may not reap).
_pid_gone() {
  ! kill -0 "$1" 2>/dev/null || [[ "$(_proc_field "$1" 3 2>/dev/null)" == "Z" ]]
}
