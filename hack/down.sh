#!/usr/bin/env bash
# Stops what hack/local-up-cluster.sh started, newest first (kubelets, their
# runtimes: dockershims or containerds, kube-proxy, the cluster DNS, scheduler, controllers, apiserver, etcd; the
# local-path provisioner first, so it starts no helper pod while the nodes go), each
# with its supervisor:
# SIGTERM, then SIGKILL after a deadline. Then removes what the nodes made (pod containers, CNI attachments,
# bridges, host rules; a containerd node's shims, mounts and dirs; helper pods are pod containers like any
# other) and kube-proxy's chains. Keeps etcd's data dir, the local-path volumes and the logs unless --purge is given.
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
      sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument: ${arg} (usage: hack/down.sh [--purge])" ;;
  esac
done

nodes=()
if [[ -d "${OUT}" ]]; then
  shopt -s nullglob
  kubelets=("${OUT}"/kubelet-*.pid)
  shims=("${OUT}"/dockershim-*.pid)
  containerds=("${OUT}"/containerd-*.pid)
  shopt -u nullglob
  for pidfile in "${kubelets[@]}"; do
    name="$(basename "${pidfile}" .pid)"
    nodes+=("--node" "${name#kubelet-}")
  done
  stopped=0
  for pidfile in "${OUT}/ingress-nginx.pid" "${OUT}/metrics-server.pid" "${OUT}/local-path-provisioner.pid" \
    "${kubelets[@]}" "${shims[@]}" "${containerds[@]}" "${OUT}/proxy.pid" "${OUT}/dns.pid" \
    "${OUT}/scheduler.pid" "${OUT}/controllers.pid" "${OUT}/road-server.pid" "${OUT}/apiserver.pid" "${OUT}/etcd.pid"; do
    [[ -f "${pidfile}" ]] || continue
    name="$(basename "${pidfile}" .pid)"
    # NAME.pid is hack/supervise.sh's, the leader of NAME's process group: the one signal stops the
    # supervisor and the component together, so nothing is restarted behind our back
    stop_pidfile "${pidfile}" "${name}" "${STOP_TIMEOUT}"
    # a component whose supervisor was killed on its own is still running: stop it by its own pid file
    if [[ -f "${OUT}/${name}.child" ]]; then
      stop_pidfile "${OUT}/${name}.child" "${name}" "${STOP_TIMEOUT}"
    fi
    stopped=$((stopped + 1))
  done
  if [[ ${stopped} -eq 0 ]]; then
    log "nothing to stop: no pid files in ${OUT#"${MINIK8S_ROOT}"/}"
  fi
else
  log "nothing to stop: ${OUT#"${MINIK8S_ROOT}"/} does not exist"
fi

if [[ ${#nodes[@]} -eq 0 ]]; then
  log "no kubelets were started here: nothing of theirs to remove"
elif docker_running; then
  # as a node's runtime would, for this cluster's nodes only: CNI DEL per sandbox, containers, bridge, host rules
  log "removing what the nodes made on this host (python -m dockershim.cleanup ${nodes[*]})"
  "${MINIK8S_VENV}/bin/python" -m dockershim.cleanup "${nodes[@]}"
else
  log "docker: not running; no containers to remove"
fi
# the ingress controller stops its nginx on SIGTERM; one it could not stop (killed) is stopped here by its pid file
if [[ -f /run/minik8s/ingress-nginx/nginx.pid ]]; then
  stop_pidfile /run/minik8s/ingress-nginx/nginx.pid nginx "${STOP_TIMEOUT}"
fi
rm -rf /run/minik8s/ingress-nginx
for node in "${nodes[@]}"; do
  # the shims' sockets: local-up serves each node's CRI at /run/minik8s/<node>/dockershim.sock
  rm -f "/run/minik8s/${node:?}/dockershim.sock"
  rmdir "/run/minik8s/${node}" 2>/dev/null || true
done

# the containerd nodes' own containerds (stopped above with their supervisors, or killed): their shims,
# containers, CNI attachments, mounts, bridges and directories (containerd_node.cleanup; only marked dirs)
shopt -s nullglob
containerd_dirs=("${OUT}"/containerd/*/)
shopt -u nullglob
if [[ ${#containerd_dirs[@]} -gt 0 ]]; then
  log "removing what the containerd nodes made (python -m containerd_node cleanup)"
  "${MINIK8S_VENV}/bin/python" -m containerd_node cleanup "${containerd_dirs[@]}" \
    || warn "the containerd clean-up left something behind (see above)"
fi

# then the kubelets' own state (pods' directories and logs, their QoS cgroups under /minik8s-NODE): last, once
# every runtime's containers are gone (a cgroup with a container's cgroup still in it cannot be removed)
if [[ ${#nodes[@]} -gt 0 ]]; then
  "${MINIK8S_VENV}/bin/python" -m kubelet.cleanup "${nodes[@]}"
fi

# kube-proxy leaves its rules when stopped (as upstream, Services keep working across its restarts):
# every chain and jump rule of its prefix (upstream's KUBE-*) goes, as `kube-proxy --cleanup` does
if [[ -f "${OUT}/proxy.log" ]] && command -v iptables-restore >/dev/null 2>&1; then
  log "removing kube-proxy's rules and chains (python -m proxy --cleanup)"
  "${MINIK8S_VENV}/bin/python" -m proxy --cleanup || warn "kube-proxy's clean-up failed (see above)"
fi

# the local-path volumes' directories (made by helper pods as root, under _output/local-up/local-path unless
# LOCAL_PATH_DIR moved them) hold the data of PersistentVolumes that etcd's data still names: they go with it
LOCAL_PATH_DIR="${LOCAL_PATH_DIR:-${OUT}/local-path}"
# (only a directory local-up marked as its own: .minik8s-local-path)
if [[ ${purge} -eq 1 && -f "${LOCAL_PATH_DIR}/.minik8s-local-path" ]]; then
  log "--purge: removing the local-path volumes in ${LOCAL_PATH_DIR#"${MINIK8S_ROOT}"/}"
  rm -rf --one-file-system "${LOCAL_PATH_DIR:?}"
elif [[ -d "${LOCAL_PATH_DIR}" ]]; then
  log "kept the local-path volumes in ${LOCAL_PATH_DIR#"${MINIK8S_ROOT}"/} with etcd's data (--purge removes both)"
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
