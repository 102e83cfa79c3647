#!/usr/bin/env bash
# Takes the docker-compose cluster (hack/compose-up.sh) away and leaves nothing behind:
#   1. docker-compose down: containers and the compose network; each node container, as it stops,
#      removes its pods, its bridge and its network state (build/node-entrypoint.sh)
#   2. whatever a node could not remove (a node container killed, or never started): its pod
#      containers (CNI DEL first), bridge, address leases and state dir (python -m dockershim.cleanup),
#      and the shared iptables rules once no node agent (kubelet, dockershim) and no pod is left on this host;
#      the local-path volumes' directories (/var/lib/minik8s/local-path/<project>);
#      kube-proxy's chains of MINIK8S_PROXY_CHAIN_PREFIX (python -m proxy --cleanup)
#   3. the shared mount compose-up.sh made, and the admin kubeconfig; with --purge also the rest of the
#      state dir (_output/compose: the PKI, the per-identity kubeconfigs, the tracing configs, the audit log), which a
#      later compose-up.sh otherwise reuses (same CA: client certificates handed out stay valid)
#   4. a check that none of the cluster's containers, networks, bridges or state is left (exit 1 if so)
# The images stay (hack/cluster-images.sh rebuilds only what changed). Same settings as compose-up.sh.
# Either mode: docker-compose down runs on docker-compose.yml and docker-compose.ha.yml together, so a
# high-availability cluster's etcd members, their data volumes and the standbys go too (--ha is accepted,
# as compose-up.sh takes it, and changes nothing).
#   hack/compose-down.sh [--purge] [--ha]
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-compose-down}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=compose-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/compose-lib.sh"

purge=0
for arg in "$@"; do
  case "${arg}" in
    --purge) purge=1 ;;
    --ha) ;;
    -h | --help)
      sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument: ${arg} (usage: hack/compose-down.sh [--purge] [--ha])" ;;
  esac
done
# The union of both modes' services and volumes: whatever this project was brought up as goes.
MINIK8S_COMPOSE_HA=1

docker_running || die "docker does not answer: nothing can be taken down (hack/setup.sh starts dockerd)"

PY="${MINIK8S_VENV}/bin/python"

# pod_containers: ids of the pod containers of this cluster's nodes.
pod_containers() {
  local node
  for node in "${COMPOSE_NODES[@]}"; do
    docker ps -aq --filter label=io.minik8s.managed=true --filter "label=io.minik8s.node=${node}"
  done
}

# bridges: the node bridges' names (cni.config.bridge_name; shortened with a hash past 15 characters).
bridges() {
  local node
  for node in "${COMPOSE_NODES[@]}"; do
    if [[ -x "${PY}" ]]; then
      (cd "${MINIK8S_ROOT}" && "${PY}" -c 'import sys; from cni.config import bridge_name; print(bridge_name(sys.argv[1]))' "${node}")
    elif [[ ${#node} -le 10 ]]; then
      printf 'mk8s-%s\n' "${node}"
    fi
  done
}

step_compose_down() {
  local project="label=com.docker.compose.project=${COMPOSE_PROJECT_NAME}"
  if [[ -z "$(compose_containers all)" && -z "$(docker network ls -q --filter "${project}")" &&
    -z "$(docker volume ls -q --filter "${project}")" ]]; then
    log "step 1/4: docker-compose down: skip, project ${COMPOSE_PROJECT_NAME} has no containers, networks or volumes"
    return 0
  fi
  log "step 1/4: docker-compose down (project ${COMPOSE_PROJECT_NAME}; nodes remove their pods as they stop)"
  if ! dc down -v --remove-orphans 2>&1 | sed -u 's/^/  /' >&2; then
    die "docker-compose down failed"
  fi
}

step_node_leftovers() {
  local foreign=() spec
  mapfile -t foreign < <(foreign_kubelets)
  for spec in "${foreign[@]}"; do
    warn "node ${spec% *}: a kubelet that is not this project's runs under that name (pid ${spec#* });" \
      "its pods, bridge and state are left alone"
  done
  if [[ ${#foreign[@]} -gt 0 ]]; then
    die "another cluster uses these node names; run with the settings of the cluster you mean (MINIK8S_NODE_PREFIX)"
  fi
  local left=()
  mapfile -t left < <(pod_containers)
  if [[ -x "${PY}" ]]; then
    log "step 2/4: leftovers of ${COMPOSE_NODES[*]}: ${#left[@]} pod container(s); python -m dockershim.cleanup"
    local args=() node
    for node in "${COMPOSE_NODES[@]}"; do
      args+=(--node "${node}")
    done
    (cd "${MINIK8S_ROOT}" && "${PY}" -m dockershim.cleanup "${args[@]}" 2>&1 | sed -u 's/^/  /' >&2) ||
      warn "dockershim.cleanup failed; removing what is left by hand"
    (cd "${MINIK8S_ROOT}" && "${PY}" -m kubelet.cleanup "${args[@]}" 2>&1 | sed -u 's/^/  /' >&2) ||
      warn "kubelet.cleanup failed; removing what is left by hand"
    # kube-proxy leaves its rules when it stops (as upstream's): its chains and jump rules go here
    (cd "${MINIK8S_ROOT}" && "${PY}" -m proxy --cleanup --iptables-chain-prefix "${MINIK8S_PROXY_CHAIN_PREFIX}" 2>&1 |
      sed -u 's/^/  /' >&2) || warn "kube-proxy's clean-up (python -m proxy --cleanup) failed"
  else
    log "step 2/4: leftovers of ${COMPOSE_NODES[*]}: ${#left[@]} pod container(s) (no .venv: by hand)"
  fi
  # By hand, for what dockershim.cleanup could not do (or without a venv).
  mapfile -t left < <(pod_containers)
  if [[ ${#left[@]} -gt 0 ]]; then
    docker rm -f "${left[@]}" >/dev/null
  fi
  local br node
  while read -r br; do
    if [[ -n "${br}" && -e "/sys/class/net/${br}" ]]; then
      ip link delete "${br}" 2>/dev/null || warn "cannot delete bridge ${br}"
    fi
  done < <(bridges)
  # the local-path volumes (helper pods made them; their PersistentVolumes went with etcd's data)
  rm -rf --one-file-system "${KUBELET_STATE_ROOT}/local-path/${COMPOSE_PROJECT_NAME:?}" 2>/dev/null || true
  rmdir "${KUBELET_STATE_ROOT}/local-path" 2>/dev/null || true
  for node in "${COMPOSE_NODES[@]}"; do
    rm -rf --one-file-system "${KUBELET_STATE_ROOT}/kubelet/${node}" 2>/dev/null || true
    rm -f "/run/minik8s/kubelets/${node}" "/run/minik8s/kubelets/${node}.dockershim"
    rm -rf "/run/minik8s/${node:?}"  # the node's CRI socket
  done
  if [[ -x "${PY}" ]]; then
    (cd "${MINIK8S_ROOT}" && "${PY}" - "${MINIK8S_CLUSTER_CIDR}" 2>&1 | sed -u 's/^/  /' >&2) <<'EOF' || warn "could not remove the iptables rules of ${MINIK8S_CLUSTER_CIDR}"
"""dockershim.cleanup removes the shared rules only when no node agent at all is left on the host; while
another cluster runs, take away just this cluster CIDR's rules, unless a live kubelet or dockershim uses it too."""
import sys
from pathlib import Path

from cni import host
from cni.config import DEFAULT_CLUSTER_CIDR

cidr = sys.argv[1]


def kubelet_cidr(node: str) -> str:
    try:
        pid = int((host.RUN_DIR / "kubelets" / node).read_text().strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except (OSError, ValueError):
        return ""
    found = DEFAULT_CLUSTER_CIDR
    for i, arg in enumerate(argv):
        if arg == "--cluster-cidr" and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--cluster-cidr="):
            found = arg.split("=", 1)[1]
    return found


users = [n for n in host.other_kubelets_alive("") if kubelet_cidr(n) == cidr]
if users:
    print(f"iptables: rules for {cidr} kept: kubelets {', '.join(sorted(users))} use it")
    sys.exit(0)
removed = 0
with host.host_lock(shared=False, timeout=30):
    for table, chain, rules in (("filter", host.FORWARD_CHAIN, host.forward_rules(cidr)),
                                ("nat", host.NAT_CHAIN, host.nat_rules(cidr))):
        for rule in rules:
            while host.iptables("-D", chain, *rule, table=table, check=False).returncode == 0:
                removed += 1
if removed:
    print(f"iptables: removed {removed} rule(s) for {cidr}")
EOF
  fi
}

step_host_state() {
  log "step 3/4: host state (shared mount, kubeconfig$([[ ${purge} -eq 1 ]] && echo ', PKI, audit log'))"
  if [[ -f "${SHARED_MOUNT_MARKER}" ]]; then
    if [[ -n "$(node_containers_running)" ]]; then
      log "mount: ${KUBELET_STATE_ROOT} stays shared: another compose cluster's nodes run"
    elif umount "${KUBELET_STATE_ROOT}" 2>/dev/null; then
      rm -f "${SHARED_MOUNT_MARKER}"
      log "mount: removed the shared bind mount on ${KUBELET_STATE_ROOT}"
    else
      warn "mount: cannot unmount ${KUBELET_STATE_ROOT} yet (mounts under it are in use)"
    fi
  fi
  if [[ -f "${COMPOSE_KUBECONFIG}" ]]; then
    rm -f "${COMPOSE_KUBECONFIG}"
    log "kubeconfig: removed ${COMPOSE_KUBECONFIG}"
  fi
  if [[ ${purge} -eq 1 && -d "${COMPOSE_OUT}" ]]; then
    rm -rf --one-file-system "${COMPOSE_OUT:?}/pki" "${COMPOSE_OUT}/log" "${COMPOSE_OUT}"/*.conf \
      "${COMPOSE_OUT}/tracing-config.yaml" "${COMPOSE_OUT}/tracing-config-host.yaml"
    log "purge: removed the PKI, the kubeconfigs, the tracing configs and the audit log in ${COMPOSE_OUT}"
  elif [[ -d "${COMPOSE_OUT}/pki" ]]; then
    log "kept for the next compose-up.sh: the PKI, the kubeconfigs and the audit log in ${COMPOSE_OUT} (--purge removes them)"
  fi
  rmdir "${COMPOSE_OUT}" 2>/dev/null || true
}

step_check() {
  local problems=() ids br
  ids="$(compose_containers all | tr '\n' ' ')"
  [[ -z "${ids// /}" ]] || problems+=("compose containers: ${ids}")
  ids="$(docker network ls -q --filter "label=com.docker.compose.project=${COMPOSE_PROJECT_NAME}" | tr '\n' ' ')"
  [[ -z "${ids// /}" ]] || problems+=("compose networks: ${ids}")
  ids="$(docker volume ls -q --filter "label=com.docker.compose.project=${COMPOSE_PROJECT_NAME}" | tr '\n' ' ')"
  [[ -z "${ids// /}" ]] || problems+=("compose volumes: ${ids}")
  ids="$(pod_containers | tr '\n' ' ')"
  [[ -z "${ids// /}" ]] || problems+=("pod containers: ${ids}")
  while read -r br; do
    [[ -z "${br}" || ! -e "/sys/class/net/${br}" ]] || problems+=("bridge ${br}")
  done < <(bridges)
  local node
  [[ ! -e "${KUBELET_STATE_ROOT}/local-path/${COMPOSE_PROJECT_NAME}" ]] ||
    problems+=("local-path volumes ${KUBELET_STATE_ROOT}/local-path/${COMPOSE_PROJECT_NAME}")
  for node in "${COMPOSE_NODES[@]}"; do
    [[ ! -e "${KUBELET_STATE_ROOT}/kubelet/${node}" ]] || problems+=("state dir ${KUBELET_STATE_ROOT}/kubelet/${node}")
  done
  if [[ ${#problems[@]} -gt 0 ]]; then
    log "step 4/4: LEFT BEHIND: ${problems[*]}"
    exit 1
  fi
  if iptables -w 5 -S MINIK8S-FORWARD 2>/dev/null | grep -qF -- "-s ${MINIK8S_CLUSTER_CIDR} "; then
    # A live kubelet of another cluster with the same cluster CIDR keeps them (and would add them again).
    log "step 4/4: note: the iptables rules for ${MINIK8S_CLUSTER_CIDR} stay: another cluster on this host uses that CIDR"
  fi
  local rules="none left"
  if iptables -w 5 -S MINIK8S-FORWARD >/dev/null 2>&1; then
    rules="the chains stay for other clusters on this host"
  fi
  log "step 4/4: nothing of project ${COMPOSE_PROJECT_NAME} is left (containers, networks, volumes, pods, bridges," \
    "state); minik8s iptables rules: ${rules}"
}

step_compose_down
step_node_leftovers
step_host_state
step_check
