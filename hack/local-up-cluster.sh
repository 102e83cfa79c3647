#!/usr/bin/env bash
# Brings a local minik8s cluster up on this machine (after upstream's
# hack/local-up-cluster.sh): setup, then etcd, the apiserver, and — when their
# modules exist — the controller-manager, the scheduler and a kubelet, each a
# background process with its log and pid file under _output/local-up/.
# Idempotent: what already runs (live pid file + health check) is left alone.
# Stop it all with hack/down.sh (add --purge to also drop etcd's data).
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-local-up}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT="${MINIK8S_ROOT}/_output/local-up"
ETCD_DATA="${OUT}/etcd-data"
KUBECONFIG_FILE="${OUT}/kubeconfig"
ETCD_CLIENT_URL="http://127.0.0.1:2379"
ETCD_PEER_URL="http://127.0.0.1:2380"
API_HOST="127.0.0.1"
API_PORT="8080"
API_URL="http://${API_HOST}:${API_PORT}"
NODES="${NODES:-node-1 node-2}"  # one kubelet per name, all on this host
START_TIMEOUT="${START_TIMEOUT:-60}"
PY="${MINIK8S_VENV}/bin/python"

etcd_healthy() { curl -fsS --max-time 2 "${ETCD_CLIENT_URL}/health" >/dev/null 2>&1; }
apiserver_ready() { curl -fsS --max-time 2 "${API_URL}/readyz" >/dev/null 2>&1; }

# start_component NAME HEALTH_FN CMD [ARG...]
# Skips NAME when its pid file names a live process that passes HEALTH_FN
# (or, with HEALTH_FN "-", is merely alive). Otherwise starts CMD in the
# background and waits for HEALTH_FN; on failure shows the log's tail and
# exits non-zero.
start_component() {
  local name="$1" health="$2"
  shift 2
  local pidfile="${OUT}/${name}.pid" logfile="${OUT}/${name}.log" pid log_from=0
  if pid="$(pidfile_pid "${pidfile}")"; then
    if [[ "${health}" == "-" ]] || "${health}"; then
      log "${name}: skip, already running (pid ${pid})"
      return 0
    fi
    log "${name}: pid ${pid} is running but not healthy yet; waiting"
  else
    rm -f "${pidfile}"
    if [[ "${health}" != "-" ]] && "${health}"; then
      die "${name}: something not started by this script already answers on its port; stop it first"
    fi
    log "${name}: starting (log ${logfile#"${MINIK8S_ROOT}"/})"
    log_from="$(stat -c %s "${logfile}" 2>/dev/null || echo 0)"
    printf '=== %s: %s\n' "$(date '+%F %T')" "$*" >>"${logfile}"
    pid="$(start_background "${logfile}" "$@")"
    write_pidfile "${pidfile}" "${pid}"
  fi

  local ok=0
  if [[ "${health}" == "-" ]]; then
    # No health endpoint: alive after a short grace period counts as up.
    sleep 2
    _pid_gone "${pid}" || ok=1
  elif wait_for --pid "${pid}" "${name}" "${START_TIMEOUT}" "${health}"; then
    ok=1
  fi
  if [[ ${ok} -ne 1 ]]; then
    log "${name}: failed to start; last lines of ${logfile}:"
    tail -c "+$((log_from + 1))" "${logfile}" | tail -n 40 >&2 || true
    stop_pidfile "${pidfile}" "${name}" 5 >/dev/null 2>&1 || true
    die "${name} did not become ready (command: $*)"
  fi
  log "${name}: running (pid ${pid})"
}

write_kubeconfig() {
  local tmp="${KUBECONFIG_FILE}.tmp"
  cat >"${tmp}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: minik8s
  cluster:
    server: ${API_URL}
users:
- name: kubernetes-admin
  user: {}
contexts:
- name: minik8s
  context:
    cluster: minik8s
    user: kubernetes-admin
    namespace: default
current-context: minik8s
preferences: {}
EOF
  mv "${tmp}" "${KUBECONFIG_FILE}"
  log "kubeconfig: wrote ${KUBECONFIG_FILE#"${MINIK8S_ROOT}"/} (server ${API_URL}, user kubernetes-admin, context minik8s)"
}

main() {
  log "step 1/4: setup (packages, dockerd, venv)"
  "${MINIK8S_ROOT}/hack/setup.sh"

  mkdir -p "${OUT}" "${ETCD_DATA}"
  chmod 700 "${ETCD_DATA}"
  cd "${MINIK8S_ROOT}"

  log "step 2/4: etcd (${ETCD_CLIENT_URL}, data ${ETCD_DATA#"${MINIK8S_ROOT}"/})"
  start_component etcd etcd_healthy \
    etcd --name minik8s-local \
    --data-dir "${ETCD_DATA}" \
    --listen-client-urls "${ETCD_CLIENT_URL}" \
    --advertise-client-urls "${ETCD_CLIENT_URL}" \
    --listen-peer-urls "${ETCD_PEER_URL}" \
    --initial-advertise-peer-urls "${ETCD_PEER_URL}" \
    --initial-cluster "minik8s-local=${ETCD_PEER_URL}"

  log "step 3/4: apiserver (${API_URL})"
  if [[ ! -f apiserver/__main__.py ]]; then
    warn "apiserver/__main__.py does not exist yet; 'python -m apiserver' will fail"
  fi
  start_component apiserver apiserver_ready \
    "${PY}" -m apiserver --etcd-servers "${ETCD_CLIENT_URL}" \
    --bind-address "${API_HOST}" --port "${API_PORT}"

  write_kubeconfig

  log "step 4/4: controllers, scheduler, kubelet (those whose modules exist)"
  local started_any=0
  if [[ -f controllers/__main__.py ]]; then
    start_component controllers - "${PY}" -m controllers --kubeconfig "${KUBECONFIG_FILE}"
    started_any=1
  else
    log "controllers: skip, controllers/__main__.py does not exist yet"
  fi
  if [[ -f scheduler/__main__.py ]]; then
    start_component scheduler - "${PY}" -m scheduler --kubeconfig "${KUBECONFIG_FILE}"
    started_any=1
  else
    log "scheduler: skip, scheduler/__main__.py does not exist yet"
  fi
  if [[ -f kubelet/__main__.py ]]; then
    kubelet_port=10250
    for node in ${NODES}; do
      start_component "kubelet-${node}" - \
        "${PY}" -m kubelet --node-name "${node}" --kubeconfig "${KUBECONFIG_FILE}" --port "${kubelet_port}"
      kubelet_port=$((kubelet_port + 1))
    done
    started_any=1
  else
    log "kubelet: skip, kubelet/__main__.py does not exist yet"
  fi
  if [[ ${started_any} -eq 0 ]]; then
    warn "only etcd and the apiserver run: no controllers, scheduler or kubelet yet"
  fi

  cat <<EOF

minik8s is up. Logs and pid files: ${OUT#"${MINIK8S_ROOT}"/}/   Stop it: hack/down.sh [--purge]
Next, type:

  export KUBECONFIG=${KUBECONFIG_FILE}
  kubectl get nodes
  kubectl apply -f examples/nginx-deployment.yaml

EOF
}

main "$@"
