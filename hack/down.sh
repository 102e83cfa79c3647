#!/usr/bin/env bash
# Stops what hack/local-up-cluster.sh started, newest first (kubelets,
# scheduler, controllers, apiserver, etcd): SIGTERM, then SIGKILL after a
# deadline. Removes pod containers (label io.minik8s.managed=true) when docker
# runs. Keeps etcd's data dir and the logs unless --purge is given.
#   hack/down.sh [--purge]
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-down}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT="${MINIK8S_ROOT}/_output/local-up"
STOP_TIMEOUT="${STOP_TIMEOUT:-15}"

purge=0
for arg in "$@"; do
  case "${arg}" in
    --purge) purge=1 ;;
    -h | --help)
      sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument: ${arg} (usage: hack/down.sh [--purge])" ;;
  esac
done

if [[ -d "${OUT}" ]]; then
  shopt -s nullglob
  kubelets=("${OUT}"/kubelet-*.pid)
  shopt -u nullglob
  stopped=0
  for pidfile in "${kubelets[@]}" "${OUT}/scheduler.pid" "${OUT}/controllers.pid" \
    "${OUT}/apiserver.pid" "${OUT}/etcd.pid"; do
    [[ -f "${pidfile}" ]] || continue
    name="$(basename "${pidfile}" .pid)"
    stop_pidfile "${pidfile}" "${name}" "${STOP_TIMEOUT}"
    stopped=$((stopped + 1))
  done
  if [[ ${stopped} -eq 0 ]]; then
    log "nothing to stop: no pid files in ${OUT#"${MINIK8S_ROOT}"/}"
  fi
else
  log "nothing to stop: ${OUT#"${MINIK8S_ROOT}"/} does not exist"
fi

if docker_running; then
  mapfile -t containers < <(docker ps -aq --filter label=io.minik8s.managed=true)
  if [[ ${#containers[@]} -gt 0 ]]; then
    log "docker: removing ${#containers[@]} pod container(s) labelled io.minik8s.managed=true"
    docker rm -f "${containers[@]}" >/dev/null
  else
    log "docker: no pod containers to remove"
  fi
else
  log "docker: not running; no containers to remove"
fi

if [[ ${purge} -eq 1 ]]; then
  if [[ -d "${OUT}" ]]; then
    log "--purge: removing ${OUT#"${MINIK8S_ROOT}"/} (etcd data, logs, kubeconfig)"
    rm -rf "${OUT}"
  fi
elif [[ -d "${OUT}/etcd-data" ]]; then
  log "kept etcd data in ${OUT#"${MINIK8S_ROOT}"/}/etcd-data (hack/down.sh --purge removes it)"
fi
log "down"
