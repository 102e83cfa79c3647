#!/usr/bin/env bash
# Keeps one component of the local cluster running, as a kubelet keeps a static pod: runs CMD, and
# when it exits, says so and starts it again after a back-off that doubles from
# SUPERVISE_BACKOFF_INITIAL (1 s) to SUPERVISE_BACKOFF_MAX (60 s) and starts over once a run has
# lasted SUPERVISE_STABLE_AFTER (60 s), like the kubelet's CrashLoopBackOff (10 s to 5 min there).
#
#   hack/supervise.sh NAME CHILD_PIDFILE CMD [ARG...]
#
# Its own pid is the component's pid file (hack/local-up-cluster.sh starts it with setsid, so it
# leads the process group of itself and CMD); CHILD_PIDFILE names the running CMD ("PID STARTTIME",
# as lib.sh's pid files). SIGTERM or SIGINT stops CMD (SIGTERM) and the supervisor without a restart:
# hack/down.sh signals the whole group, so nothing is restarted behind its back.
set -uo pipefail

MINIK8S_LOG_PREFIX="supervise"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -ge 3 ]] || die "usage: hack/supervise.sh NAME CHILD_PIDFILE CMD [ARG...]"
name="$1" child_pidfile="$2"
shift 2

initial="${SUPERVISE_BACKOFF_INITIAL:-1}"
max="${SUPERVISE_BACKOFF_MAX:-60}"
stable_after="${SUPERVISE_STABLE_AFTER:-60}"

stopping=0 child=""
on_stop() {
  stopping=1
  if [[ -n "${child}" ]]; then
    kill -TERM "${child}" 2>/dev/null || true
  fi
}
trap on_stop TERM INT

# how CMD ended, from wait's status: a code, or the signal that killed it
describe_exit() {
  local code="$1"
  if ((code > 128)); then
    local sig
    sig="$(kill -l "$((code - 128))" 2>/dev/null || echo "$((code - 128))")"
    printf 'was killed by signal %s (SIG%s)' "$((code - 128))" "${sig}"
  else
    printf 'exited with code %s' "${code}"
  fi
}

backoff="${initial}"
while ((stopping == 0)); do
  started=${SECONDS}
  "$@" &
  child=$!
  write_pidfile "${child_pidfile}" "${child}"
  # wait returns early when a trapped signal arrives; wait again until CMD has really ended
  code=0
  while true; do
    wait "${child}"
    code=$?
    _pid_gone "${child}" && break
  done
  child=""
  rm -f "${child_pidfile}"
  if ((stopping == 1)); then
    break
  fi
  if ((SECONDS - started >= stable_after)); then
    backoff="${initial}"
  fi
  log "${name} $(describe_exit "${code}") after $((SECONDS - started))s; restarting in ${backoff}s"
  # sleep in the background, so SIGTERM from hack/down.sh ends the wait at once
  sleep "${backoff}" &
  sleeper=$!
  wait "${sleeper}" || true
  kill "${sleeper}" 2>/dev/null || true
  backoff=$((backoff * 2 > max ? max : backoff * 2))
  if ((stopping == 0)); then
    printf '=== %s: restart: %s\n' "$(date '+%F %T')" "$*"
  fi
done
log "${name}: stopped"
