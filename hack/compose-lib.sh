# shellcheck shell=bash disable=SC2034 # the settings are used by compose-up.sh and compose-down.sh
# Settings of the docker-compose cluster, shared by hack/compose-up.sh and hack/compose-down.sh.
# Source it after lib.sh. Every setting can be overridden from the environment; they are exported
# so that docker-compose.yml sees the same values (its own defaults are the same).
#
#   COMPOSE_PROJECT_NAME       compose project (default minik8s)
#   MINIK8S_API_ADDRESS        host address the apiserver is published on (default 127.0.0.1)
#   MINIK8S_API_PORT           host port of the apiserver (default 8080)
#   MINIK8S_NODE_PREFIX        node names are <prefix>node-1 and <prefix>node-2 (default none)
#   MINIK8S_KUBELET_PORT_1/2   the kubelets' ports on the host (default 10250, 10251)
#   MINIK8S_CLUSTER_CIDR       pod network; each node gets a /24 of it (default 10.244.0.0/16)
#   MINIK8S_COMPOSE_OUT        where the admin kubeconfig goes (default _output/compose)

COMPOSE_PROJECT_NAME="${COMPOSE_PROJECT_NAME:-minik8s}"
# As docker-compose normalises it (lower case; letters, digits, - and _): the value of its labels.
COMPOSE_PROJECT_NAME="$(printf '%s' "${COMPOSE_PROJECT_NAME}" | tr '[:upper:]' '[:lower:]' | tr -cd 'a-z0-9_-')"
[[ -n "${COMPOSE_PROJECT_NAME}" ]] || die "COMPOSE_PROJECT_NAME has no letters or digits"
export COMPOSE_PROJECT_NAME
export MINIK8S_API_ADDRESS="${MINIK8S_API_ADDRESS:-127.0.0.1}"
export MINIK8S_API_PORT="${MINIK8S_API_PORT:-8080}"
export MINIK8S_NODE_PREFIX="${MINIK8S_NODE_PREFIX:-}"
export MINIK8S_KUBELET_PORT_1="${MINIK8S_KUBELET_PORT_1:-10250}"
export MINIK8S_KUBELET_PORT_2="${MINIK8S_KUBELET_PORT_2:-10251}"
export MINIK8S_CLUSTER_CIDR="${MINIK8S_CLUSTER_CIDR:-10.244.0.0/16}"

COMPOSE_FILE_PATH="${MINIK8S_ROOT}/docker-compose.yml"
COMPOSE_OUT="${MINIK8S_COMPOSE_OUT:-${MINIK8S_ROOT}/_output/compose}"
COMPOSE_KUBECONFIG="${COMPOSE_OUT}/kubeconfig"
COMPOSE_NODES=("${MINIK8S_NODE_PREFIX}node-1" "${MINIK8S_NODE_PREFIX}node-2")
# The kubelets' state (bind-mounted into the node containers at the same path).
KUBELET_STATE_ROOT="/var/lib/minik8s"
# Set when compose-up.sh made KUBELET_STATE_ROOT a shared mount (compose-down.sh undoes it).
SHARED_MOUNT_MARKER="/run/minik8s/compose-shared-mount"

if [[ "${MINIK8S_API_ADDRESS}" == "0.0.0.0" ]]; then
  COMPOSE_API_URL="http://127.0.0.1:${MINIK8S_API_PORT}"
else
  COMPOSE_API_URL="http://${MINIK8S_API_ADDRESS}:${MINIK8S_API_PORT}"
fi

# dc ARG...: docker-compose on this cluster's file and project.
dc() {
  docker-compose -f "${COMPOSE_FILE_PATH}" -p "${COMPOSE_PROJECT_NAME}" "$@"
}

# compose_containers all|running [SERVICE]: ids of this project's containers (of one service).
compose_containers() {
  local filters=(--filter "label=com.docker.compose.project=${COMPOSE_PROJECT_NAME}")
  if [[ "$1" == running ]]; then
    filters+=(--filter status=running)
  fi
  if [[ -n "${2:-}" ]]; then
    filters+=(--filter "label=com.docker.compose.service=$2")
  fi
  docker ps -aq "${filters[@]}"
}

# node_containers_running: ids of running node containers of any compose project on this host.
node_containers_running() {
  docker ps -q --filter label=io.minik8s.managed=true --filter label=io.minik8s.role=node
}

# foreign_kubelets: node names of this cluster for which a live kubelet process is registered on
# this host (/run/minik8s/kubelets) that no running node container of this project owns — another
# cluster (hack/local-up-cluster.sh, a test, another project) whose node has the same name.
foreign_kubelets() {
  local node service=1 entry pid
  for node in "${COMPOSE_NODES[@]}"; do
    entry="/run/minik8s/kubelets/${node}"
    if [[ -f "${entry}" && -z "$(compose_containers running "node-${service}")" ]]; then
      pid="$(cat "${entry}" 2>/dev/null || true)"
      if [[ "${pid}" =~ ^[0-9]+$ ]] && kill -0 "${pid}" 2>/dev/null &&
        tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -q kubelet; then
        printf '%s %s\n' "${node}" "${pid}"
      fi
    fi
    service=$((service + 1))
  done
}

