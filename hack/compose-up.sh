#!/usr/bin/env bash
# Brings the minik8s cluster up as containers (docker-compose.yml): etcd, the apiserver, the
# controller-manager, the scheduler and two nodes, node-1 and node-2.
#   1. hack/setup.sh            packages (docker-compose, debootstrap, ...), dockerd, .venv
#   2. hack/cluster-images.sh   the images, built locally (the first time a few minutes; then only
#                               when the sources changed)
#   3. docker-compose up -d
#   4. waits until both nodes are Ready, through the API
#   5. writes an admin kubeconfig to _output/compose/kubeconfig and says what to type next
# Idempotent: running it again leaves a running cluster alone (containers whose image changed are
# recreated). Take it down with hack/compose-down.sh.
#   hack/compose-up.sh [--no-build]
# Settings (ports, project name, node names, pod network): see hack/compose-lib.sh.
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-compose-up}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=compose-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/compose-lib.sh"

READY_TIMEOUT="${MINIK8S_READY_TIMEOUT:-120}"

build=1
for arg in "$@"; do
  case "${arg}" in
    --no-build) build=0 ;;
    -h | --help)
      sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument: ${arg} (usage: hack/compose-up.sh [--no-build])" ;;
  esac
done

py() {
  if [[ -x "${MINIK8S_VENV}/bin/python" ]]; then
    "${MINIK8S_VENV}/bin/python" "$@"
  else
    python3 "$@"
  fi
}

# port_taken PORT: something on this host listens on TCP PORT.
port_taken() {
  [[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]]
}

# check_ports: refuse to start over someone else's apiserver or kubelets (a different project, or
# hack/local-up-cluster.sh); our own running containers keep theirs.
check_ports() {
  local service port
  for spec in "apiserver:${MINIK8S_API_PORT}" "node-1:${MINIK8S_KUBELET_PORT_1}" "node-2:${MINIK8S_KUBELET_PORT_2}"; do
    service="${spec%%:*}"
    port="${spec##*:}"
    if [[ -n "$(compose_containers running "${service}")" ]]; then
      continue
    fi
    if port_taken "${port}"; then
      die "port ${port} (for ${service}) is in use by something else: stop it (hack/down.sh stops the" \
        "process cluster) or choose other ports (MINIK8S_API_PORT, MINIK8S_KUBELET_PORT_1/2)"
    fi
  done
}

# ensure_shared_state_root: the kubelets' state dir as a shared mount, so that the tmpfs a node
# container mounts there (emptyDir medium: Memory) is seen by Docker, which binds it into pods.
ensure_shared_state_root() {
  mkdir -p "${KUBELET_STATE_ROOT}" "$(dirname "${SHARED_MOUNT_MARKER}")"
  local prop
  prop="$(findmnt -n -o PROPAGATION --target "${KUBELET_STATE_ROOT}" 2>/dev/null || true)"
  if [[ "${prop}" == shared* ]]; then
    export MINIK8S_KUBELET_ROOT_PROPAGATION=rshared
    return 0
  fi
  if mount --bind "${KUBELET_STATE_ROOT}" "${KUBELET_STATE_ROOT}" 2>/dev/null; then
    if mount --make-rshared "${KUBELET_STATE_ROOT}" 2>/dev/null; then
      : >"${SHARED_MOUNT_MARKER}"
      log "mount: ${KUBELET_STATE_ROOT} is now a shared mount (hack/compose-down.sh undoes it)"
      export MINIK8S_KUBELET_ROOT_PROPAGATION=rshared
      return 0
    fi
    umount "${KUBELET_STATE_ROOT}" 2>/dev/null || true
  fi
  warn "cannot make ${KUBELET_STATE_ROOT} a shared mount: emptyDir volumes with medium Memory are disk-backed for pods"
  export MINIK8S_KUBELET_ROOT_PROPAGATION=rprivate
}

# node_report: prints one line on the expected nodes as the API sees them; exit 0 when all Ready.
node_report() {
  py - "${COMPOSE_API_URL}" "${COMPOSE_NODES[@]}" <<'EOF'
import json
import sys
import urllib.request

url, names = sys.argv[1], sys.argv[2:]
try:
    with urllib.request.urlopen(url + "/api/v1/nodes", timeout=2) as r:
        items = json.load(r).get("items") or []
except Exception as e:
    print(f"apiserver not answering yet ({e.__class__.__name__})")
    sys.exit(2)
nodes = {i["metadata"]["name"]: i for i in items}
parts, ready = [], 0
for name in names:
    node = nodes.get(name)
    if node is None:
        parts.append(f"{name} not registered yet")
        continue
    conds = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}
    cond = conds.get("Ready") or {}
    cidr = (node.get("spec") or {}).get("podCIDR") or "no podCIDR yet"
    if cond.get("status") == "True":
        ready += 1
        parts.append(f"{name} Ready ({cidr})")
    else:
        why = cond.get("message") or cond.get("reason") or "no Ready condition yet"
        parts.append(f"{name} NotReady ({why})")
print(", ".join(parts))
sys.exit(0 if ready == len(names) else 1)
EOF
}

wait_nodes_ready() {
  local start=$1 last="" report rc deadline=$((SECONDS + READY_TIMEOUT))
  while true; do
    rc=0
    report="$(node_report)" || rc=$?
    if [[ "${report}" != "${last}" ]]; then
      log "nodes: ${report} [$((SECONDS - start))s]"
      last="${report}"
    fi
    if [[ ${rc} -eq 0 ]]; then
      return 0
    fi
    if ((SECONDS >= deadline)); then
      log "nodes not Ready after ${READY_TIMEOUT}s; containers and their last log lines:"
      dc ps >&2 || true
      dc logs --no-color --tail=25 >&2 || true
      die "the cluster did not become Ready (hack/compose-down.sh cleans up)"
    fi
    sleep 0.5
  done
}

write_kubeconfig() {
  mkdir -p "${COMPOSE_OUT}"
  local tmp="${COMPOSE_KUBECONFIG}.tmp"
  cat >"${tmp}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ${COMPOSE_PROJECT_NAME}
  cluster:
    server: ${COMPOSE_API_URL}
users:
- name: kubernetes-admin
  user: {}
contexts:
- name: ${COMPOSE_PROJECT_NAME}
  context:
    cluster: ${COMPOSE_PROJECT_NAME}
    user: kubernetes-admin
    namespace: default
current-context: ${COMPOSE_PROJECT_NAME}
preferences: {}
EOF
  chmod 600 "${tmp}"
  mv "${tmp}" "${COMPOSE_KUBECONFIG}"
  log "kubeconfig: wrote ${COMPOSE_KUBECONFIG} (server ${COMPOSE_API_URL}, user kubernetes-admin)"
}

main() {
  local t0=${SECONDS}
  log "step 1/5: setup (packages, dockerd, venv)"
  "${MINIK8S_ROOT}/hack/setup.sh"
  command -v docker-compose >/dev/null 2>&1 || die "docker-compose is not installed (hack/setup.sh installs it)"

  if [[ ${build} -eq 1 ]]; then
    log "step 2/5: images (hack/cluster-images.sh)"
    "${MINIK8S_ROOT}/hack/cluster-images.sh"
  else
    log "step 2/5: images: skip (--no-build)"
  fi

  log "step 3/5: docker-compose up -d (project ${COMPOSE_PROJECT_NAME}, apiserver on ${COMPOSE_API_URL})"
  check_ports
  local foreign=()
  mapfile -t foreign < <(foreign_kubelets)
  if [[ ${#foreign[@]} -gt 0 ]]; then
    die "a kubelet of another cluster already runs as node ${foreign[0]% *} (pid ${foreign[0]#* }):" \
      "stop that cluster or choose other node names (MINIK8S_NODE_PREFIX)"
  fi
  ensure_shared_state_root
  local up_start=${SECONDS}
  if ! dc up -d --remove-orphans 2>&1 | sed -u 's/^/  /' >&2; then
    die "docker-compose up failed (hack/compose-down.sh cleans up)"
  fi

  log "step 4/5: waiting for ${COMPOSE_NODES[*]} to be Ready (up to ${READY_TIMEOUT}s)"
  wait_nodes_ready "${up_start}"
  log "nodes Ready $((SECONDS - up_start))s after docker-compose up ($((SECONDS - t0))s in all)"

  log "step 5/5: admin kubeconfig"
  write_kubeconfig

  local rel="${COMPOSE_KUBECONFIG#"${PWD}"/}"
  cat <<EOF

minik8s is up as docker-compose project '${COMPOSE_PROJECT_NAME}': nodes ${COMPOSE_NODES[*]}, apiserver ${COMPOSE_API_URL}.
Stop it and remove its pods: hack/compose-down.sh    Component logs: docker-compose -p ${COMPOSE_PROJECT_NAME} logs -f node-1
Next, type:

  export KUBECONFIG=${rel}
  kubectl get nodes -o wide
  kubectl apply -f examples/web-deployment.yaml
  kubectl get pods -o wide           # pod IPs on both nodes
  curl http://<a pod IP>/

EOF
}

main "$@"
