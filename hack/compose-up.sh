#!/usr/bin/env bash
# Brings the minik8s cluster up as containers (docker-compose.yml): etcd, the apiserver, the
# controller-manager, the scheduler, the road server (every component traces to it) and two nodes, node-1 and
# node-2, each under its own identity.
#   1. hack/setup.sh            packages (docker-compose, debootstrap, ...), dockerd, .venv
#   2. hack/cluster-images.sh   the images, built locally (the first time a few minutes; then only
#                               when the sources changed)
#   3. docker-compose up -d     first the one-shot service `pki`: the cluster CA, the apiserver's
#                               serving certificate, the service-account key and one kubeconfig per
#                               identity, generated into _output/compose/ once and reused after;
#                               then the cluster, the apiserver on HTTPS only, its audit log in
#                               _output/compose/log/audit.log
#   4. writes the admin kubeconfig (kubernetes-admin, client certificate) to _output/compose/kubeconfig
#   5. waits until both nodes are Ready, through the API, and says what to type next (the road page's URL too)
# Idempotent: running it again leaves a running cluster alone (containers whose image changed are
# recreated). Take it down with hack/compose-down.sh.
#   hack/compose-up.sh [--no-build] [--ha]
# --ha: high availability (docker-compose.ha.yml on top): a three-member etcd (etcd-1..3) behind the
# apiserver, a standby controller-manager and scheduler (leader election). A project keeps the mode it was
# brought up in: switching takes hack/compose-down.sh first (the etcd data does not move across).
# Settings (ports, project name, node names, pod network, state dir): see hack/compose-lib.sh.
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
    --ha) MINIK8S_COMPOSE_HA=1 ;;
    -h | --help)
      sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument: ${arg} (usage: hack/compose-up.sh [--no-build] [--ha])" ;;
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
  for spec in "apiserver:${MINIK8S_API_PORT}" "node-1:${MINIK8S_KUBELET_PORT_1}" "node-2:${MINIK8S_KUBELET_PORT_2}" \
    "road-server:${MINIK8S_ROAD_OTLP_PORT}"; do
    service="${spec%%:*}"
    port="${spec##*:}"
    if [[ -n "$(compose_containers running "${service}")" ]]; then
      continue
    fi
    if port_taken "${port}"; then
      die "port ${port} (for ${service}) is in use by something else: stop it (hack/down.sh stops the" \
        "process cluster) or choose other ports (MINIK8S_API_PORT, MINIK8S_KUBELET_PORT_1/2, MINIK8S_ROAD_OTLP_PORT)"
    fi
  done
}

# check_mode: a project stays in the mode it was brought up in; `up` in the other mode would drop its
# etcd (scaled to 0, or taken away as an orphan) and start an empty one: every object would be lost.
check_mode() {
  local want=single running
  [[ "${MINIK8S_COMPOSE_HA}" == 1 ]] && want=ha
  running="$(running_mode)"
  if [[ -n "${running}" && "${running}" != "${want}" ]]; then
    local flag="without --ha"
    [[ "${running}" == ha ]] && flag="with --ha"
    die "project ${COMPOSE_PROJECT_NAME} runs in ${running} mode: run hack/compose-up.sh ${flag}, or take it" \
      "down first (hack/compose-down.sh) to switch; its etcd data would not come across"
  fi
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

# write_tracing_configs: the components' TracingConfiguration (upstream's --tracing-config-file, every span
# sampled, as hack/local-up-cluster.sh's), one for the control plane (the road server by its service name) and one
# for the nodes in the host's network (its OTLP port published on the host's loopback). Written in place and only
# when changed: the running containers' bind mounts keep seeing the same file.
write_tracing_configs() {
  local name endpoint want
  for name in tracing-config.yaml tracing-config-host.yaml; do
    endpoint="road-server:4317"
    [[ "${name}" == tracing-config-host.yaml ]] && endpoint="127.0.0.1:${MINIK8S_ROAD_OTLP_PORT}"
    want="$(printf '%s\n' "apiVersion: apiserver.config.k8s.io/v1beta1" "kind: TracingConfiguration" \
      "endpoint: \"${endpoint}\"" "samplingRatePerMillion: 1000000")"
    if [[ "$(cat "${COMPOSE_OUT}/${name}" 2>/dev/null)" != "${want}" ]]; then
      printf '%s\n' "${want}" >"${COMPOSE_OUT}/${name}"
    fi
  done
}

# write_kubeconfig: admin.conf (kubernetes-admin in system:masters, its client certificate and the
# CA embedded; written by the `pki` service) with the default namespace set, where the docs look.
write_kubeconfig() {
  [[ -f "${COMPOSE_ADMIN_CONF}" ]] ||
    die "${COMPOSE_ADMIN_CONF} is missing: the pki service did not run (docker-compose -p ${COMPOSE_PROJECT_NAME} logs pki)"
  local tmp="${COMPOSE_KUBECONFIG}.tmp"
  py - "${COMPOSE_ADMIN_CONF}" "${tmp}" <<'EOF'
import sys

import yaml

with open(sys.argv[1]) as f:
    doc = yaml.safe_load(f)
doc["contexts"][0]["context"]["namespace"] = "default"
with open(sys.argv[2], "w") as f:
    yaml.safe_dump(doc, f, default_flow_style=False, sort_keys=False)
EOF
  chmod 600 "${tmp}"
  mv "${tmp}" "${COMPOSE_KUBECONFIG}"
  log "kubeconfig: wrote ${COMPOSE_KUBECONFIG} (server ${COMPOSE_API_URL}, user kubernetes-admin, namespace default)"
}

# wait_nodes_ready UP_EPOCH: until every node of this cluster is Ready, asked as kubernetes-admin with
# the admin kubeconfig; a line each time the picture changes (seconds since UP_EPOCH, the moment
# `docker-compose up` began); on timeout, the containers and their last log lines.
wait_nodes_ready() {
  local rc=0
  (cd "${MINIK8S_ROOT}" && py - "${COMPOSE_KUBECONFIG}" "${READY_TIMEOUT}" "$1" "${COMPOSE_NODES[@]}") <<'EOF' || rc=$?
import asyncio
import sys
import time

from machinery.client import ApiClient, ClientError

kubeconfig, timeout, up_epoch, names = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]


def report(items: list[dict]) -> tuple[str, bool]:
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
    return ", ".join(parts), ready == len(names)


async def main() -> int:
    last = ""
    deadline = time.monotonic() + timeout
    async with ApiClient.from_kubeconfig(kubeconfig, user_agent="minik8s-compose-up") as api:
        while True:
            try:
                line, done = report((await api.request("GET", "/api/v1/nodes", timeout=3)).get("items") or [])
            except ClientError as e:
                line, done = f"apiserver not answering yet ({e})", False
            if line != last:
                print(f"nodes: {line} [{time.time() - up_epoch:.1f}s]", file=sys.stderr, flush=True)
                last = line
            if done:
                return 0
            if time.monotonic() >= deadline:
                return 1
            await asyncio.sleep(0.25)


sys.exit(asyncio.run(main()))
EOF
  if [[ ${rc} -ne 0 ]]; then
    log "nodes not Ready after ${READY_TIMEOUT}s; containers and their last log lines:"
    dc ps >&2 || true
    dc logs --no-color --tail=25 >&2 || true
    die "the cluster did not become Ready (hack/compose-down.sh cleans up)"
  fi
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

  local mode="single etcd"
  [[ "${MINIK8S_COMPOSE_HA}" == 1 ]] && mode="HA: etcd-1..3 on ${MINIK8S_HA_NET}.11-13, standby controller-manager and scheduler"
  log "step 3/5: docker-compose up -d (project ${COMPOSE_PROJECT_NAME}, ${mode}, apiserver on ${COMPOSE_API_URL}," \
    "PKI and kubeconfigs in ${COMPOSE_OUT})"
  check_mode
  check_ports
  local foreign=()
  mapfile -t foreign < <(foreign_kubelets)
  if [[ ${#foreign[@]} -gt 0 ]]; then
    die "a kubelet of another cluster already runs as node ${foreign[0]% *} (pid ${foreign[0]#* }):" \
      "stop that cluster or choose other node names (MINIK8S_NODE_PREFIX)"
  fi
  ensure_shared_state_root
  # The state dir exists before Docker would create the bind mounts' sources itself.
  mkdir -p "${COMPOSE_OUT}/log"
  write_tracing_configs
  local up_start=${SECONDS} up_epoch
  up_epoch="$(date +%s.%N)"
  if ! dc up -d --remove-orphans 2>&1 | sed -u 's/^/  /' >&2; then
    dc logs --no-color --tail=25 >&2 || true
    die "docker-compose up failed (hack/compose-down.sh cleans up)"
  fi

  log "step 4/5: admin kubeconfig"
  write_kubeconfig

  log "step 5/5: waiting for ${COMPOSE_NODES[*]} to be Ready (up to ${READY_TIMEOUT}s)"
  wait_nodes_ready "${up_epoch}"
  log "nodes Ready $((SECONDS - up_start))s after docker-compose up ($((SECONDS - t0))s in all)"

  local rel="${COMPOSE_KUBECONFIG#"${PWD}"/}" audit="${COMPOSE_AUDIT_LOG#"${PWD}"/}" ca="${COMPOSE_CA#"${PWD}"/}"
  local python="${MINIK8S_VENV#"${PWD}"/}/bin/python" ha_note=""
  if [[ "${MINIK8S_COMPOSE_HA}" == 1 ]]; then
    ha_note="
HA: etcd-1..3 (${MINIK8S_HA_NET}.11-13), controller-manager and scheduler with standbys (-2); who leads: kubectl -n kube-system get leases"
  fi
  cat <<EOF

minik8s is up as docker-compose project '${COMPOSE_PROJECT_NAME}': nodes ${COMPOSE_NODES[*]}, apiserver ${COMPOSE_API_URL} (TLS only).${ha_note}
Stop it and remove its pods: hack/compose-down.sh [--purge]    Component logs: docker-compose -p ${COMPOSE_PROJECT_NAME} logs -f node-1
Next, type:

  export KUBECONFIG=${rel}
  kubectl get nodes -o wide
  kubectl apply -f examples/web-deployment.yaml
  kubectl get pods -o wide           # pod IPs on both nodes
  curl http://<a pod IP>/
  kubectl auth can-i create pods
  ${python} -m apiserver.audit ${audit} --verb create   # who did what
  curl --cacert ${ca} ${COMPOSE_API_URL}/api             # no credentials: 401
  ${python} -m kubectl road deployment/web    # its road: every step, who, when (--follow)
  kubectl proxy &   # then the road live in a browser:
  #   http://127.0.0.1:8001/apis/road.minik8s.io/v1alpha1/namespaces/default/deployments/web

EOF
}

main "$@"
