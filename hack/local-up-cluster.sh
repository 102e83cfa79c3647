#!/usr/bin/env bash
# Brings a local minik8s cluster up on this machine (after upstream's
# hack/local-up-cluster.sh): setup, then etcd, the apiserver, the
# controller-manager, the scheduler, the cluster DNS, kube-proxy (one for the host), the local-path
# provisioner (volumes under _output/local-up/local-path; StorageClass local-path) and, per node, its
# CRI runtime (dockershim,
# as cri-dockerd runs beside a kubelet) and its kubelet, each a
# background process with its log and pid file under _output/local-up/, kept
# running by hack/supervise.sh (restarted with back-off when it exits; the
# restarts are in its log).
# Idempotent: what already runs (live pid file + health check) is left alone.
# Stop it all with hack/down.sh (add --purge to also drop etcd's data).
#
# The apiserver serves HTTPS on 6443 with the cluster PKI generated under
# _output/local-up/ on first start (and reused after): the CA, its serving
# certificate, and one kubeconfig per identity — admin.conf (kubernetes-admin,
# system:masters), controller-manager.conf, scheduler.conf, kube-dns.conf, kube-proxy.conf,
# kubelet-NODE.conf (and local-path-provisioner.conf, a token of its service account, from its install).
# The controllers each authenticate as their service account with tokens the
# controller-manager asks the apiserver for (TokenRequest; only the apiserver
# holds pki/sa.key). Every request is in audit.log. Secrets are encrypted in etcd
# (aescbc, the key in pki/encryption-config.yaml, made once with the PKI).
# The kubelets serve HTTPS with their own serving certificates from the cluster
# CA (pki/kubelets/NODE/kubelet.crt) and take only the apiserver's client
# certificate (pki/apiserver-kubelet-client.crt, kube-apiserver-kubelet-client in
# system:masters), which the apiserver presents for logs and exec, verifying the
# kubelet against the CA.
# etcd serves client and peer TLS and takes only client certificates of its own CA
# (pki/etcd/ca.crt, apart from the cluster CA); the apiserver's
# (pki/apiserver-etcd-client.crt) is the only one. Its /health is on the plain
# metrics address 127.0.0.1:2381, as kubeadm's probes have it.
# API_INSECURE_PORT=8080 also opens the plain development port (no auth).
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-local-up}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT="${MINIK8S_ROOT}/_output/local-up"
TRACING_CONFIG="${OUT}/tracing-config.yaml"  # every component's --tracing-config-file
TRACING_ENDPOINT="${TRACING_ENDPOINT:-127.0.0.1:4317}"  # the OTLP/gRPC collector (the road server listens there)
ETCD_DATA="${OUT}/etcd-data"
KUBECONFIG_FILE="${OUT}/kubeconfig"
ETCD_NAME="minik8s-local"
ETCD_CLIENT_URL="https://127.0.0.1:2379"
ETCD_PEER_URL="https://127.0.0.1:2380"
ETCD_METRICS_URL="http://127.0.0.1:2381"  # /health and /metrics only, no keys
ETCD_PKI="${OUT}/pki/etcd/members/${ETCD_NAME}"
API_HOST="127.0.0.1"
API_PORT="6443"
API_INSECURE_PORT="${API_INSECURE_PORT:-0}"
API_URL="https://${API_HOST}:${API_PORT}"
PKI_CA="${OUT}/pki/ca.crt"
AUDIT_LOG="${OUT}/audit.log"
NODES="${NODES:-node-1 node-2}"  # one kubelet per name, all on this host
# Nodes (among NODES) whose runtime is a containerd of their own (containerd's CRI plugin, python -m
# containerd_node) instead of the Docker shim: e.g. CONTAINERD_NODES=node-2 runs one node of each.
CONTAINERD_NODES="${CONTAINERD_NODES:-}"
CONTAINERD_IMAGES="minik8s/pause:3.9 minik8s/busybox:1.35 minik8s/httpd:1"
# imported too when Docker has them (hack/guestbook-images.sh, from setup.sh): the guestbook example's
CONTAINERD_OPTIONAL_IMAGES="minik8s/redis:1 minik8s/guestbook:1"
START_TIMEOUT="${START_TIMEOUT:-60}"
CLUSTER_CIDR="${CLUSTER_CIDR:-10.244.0.0/16}"
PROXY_HEALTHZ_PORT="${PROXY_HEALTHZ_PORT:-10256}"  # kube-proxy's upstream ports
PROXY_METRICS_PORT="${PROXY_METRICS_PORT:-10249}"
PY="${MINIK8S_VENV}/bin/python"

uses_containerd() { [[ " ${CONTAINERD_NODES} " == *" $1 "* ]]; }

containerd_dir() { echo "${OUT}/containerd/$1"; }
containerd_endpoint() { echo "unix://$(containerd_dir "$1")/containerd.sock"; }

# start_containerd NODE: the node's containerd under hack/supervise.sh (its directory, socket and state under
# _output/local-up/containerd/NODE), then the project's images imported from Docker (no registry).
start_containerd() {
  local node="$1" dir
  dir="$(containerd_dir "$1")"
  containerd_ready() { "${PY}" -m containerd_node wait --dir "${dir}" --timeout 1 >/dev/null 2>&1; }
  start_component "containerd-${node}" containerd_ready \
    "${PY}" -m containerd_node run --node "${node}" --dir "${dir}"
  local images=() image
  read -r -a images <<<"${CONTAINERD_IMAGES}"
  for image in ${CONTAINERD_OPTIONAL_IMAGES}; do
    docker image inspect "${image}" >/dev/null 2>&1 && images+=("${image}")
  done
  "${PY}" -m containerd_node import-images --dir "${dir}" "${images[@]}" \
    || die "containerd-${node}: importing ${CONTAINERD_IMAGES} from Docker failed (hack/images.sh builds them)"
  log "containerd-${node}: images imported (${images[*]})"
}

etcd_healthy() { curl -fsS --max-time 2 "${ETCD_METRICS_URL}/health" >/dev/null 2>&1; }
apiserver_ready() { curl -fsS --max-time 2 --cacert "${PKI_CA}" "${API_URL}/readyz" >/dev/null 2>&1; }
shim_socket=""  # the node's CRI socket, set before its dockershim is started
dockershim_serving() { [[ -S "${shim_socket}" ]]; }
# the cluster DNS (python -m dns) on the host: DNS on :${DNS_PORT}, /ready on :${DNS_HEALTH_PORT}; it keeps the
# kube-dns Service (${CLUSTER_DNS}) pointing at this host's address (kube-proxy DNATs ${CLUSTER_DNS}:53 there)
DNS_PORT="${DNS_PORT:-10053}"
DNS_HEALTH_PORT="${DNS_HEALTH_PORT:-9153}"
CLUSTER_DNS="${CLUSTER_DNS:-10.96.0.10}"
dns_ready() { curl -fsS --max-time 2 "http://127.0.0.1:${DNS_HEALTH_PORT}/ready" >/dev/null 2>&1; }
proxy_healthy() { curl -fsS --max-time 2 "http://127.0.0.1:${PROXY_HEALTHZ_PORT}/healthz" >/dev/null 2>&1; }
# the local-path provisioner (rancher's, python -m local_path_provisioner): volumes of the default StorageClass
# local-path under ${LOCAL_PATH_DIR} on every node (all on this host); /ready on :${LOCAL_PATH_HEALTH_PORT}
LOCAL_PATH_DIR="${LOCAL_PATH_DIR:-${OUT}/local-path}"
LOCAL_PATH_HEALTH_PORT="${LOCAL_PATH_HEALTH_PORT:-10270}"
local_path_ready() { curl -fsS --max-time 2 "http://127.0.0.1:${LOCAL_PATH_HEALTH_PORT}/ready" >/dev/null 2>&1; }
# metrics-server (python -m metrics_server): metrics.k8s.io for kubectl top and the HPA, behind the apiserver
METRICS_SERVER_PORT="${METRICS_SERVER_PORT:-4443}"
METRICS_RESOLUTION="${METRICS_RESOLUTION:-15s}"
# the ingress controller (python -m ingress_nginx): the host's nginx on :${INGRESS_HTTP_PORT} and
# :${INGRESS_HTTPS_PORT} for the Ingresses of class nginx; its files in /run/minik8s/ingress-nginx
INGRESS_HTTP_PORT="${INGRESS_HTTP_PORT:-8880}"
INGRESS_HTTPS_PORT="${INGRESS_HTTPS_PORT:-8443}"
INGRESS_HEALTHZ_PORT="${INGRESS_HEALTHZ_PORT:-10254}"
ingress_ready() { curl -fsS --max-time 2 "http://127.0.0.1:${INGRESS_HEALTHZ_PORT}/healthz" >/dev/null 2>&1; }
# the road server (python -m road): spans over OTLP/gRPC on ${TRACING_ENDPOINT} (every component's
# --tracing-config-file, ${OUT}/tracing-config.yaml, points there), road.minik8s.io behind the apiserver
ROAD_SERVER_PORT="${ROAD_SERVER_PORT:-4320}"
OTLP_ADDRESS="${TRACING_ENDPOINT}"
road_server_ready() { curl -fsS --max-time 2 --cacert "${PKI_CA}" "https://127.0.0.1:${ROAD_SERVER_PORT}/readyz" \
  >/dev/null 2>&1; }
metrics_server_ready() { curl -fsS --max-time 2 --cacert "${PKI_CA}" "https://127.0.0.1:${METRICS_SERVER_PORT}/readyz" \
  >/dev/null 2>&1; }

# start_component NAME HEALTH_FN CMD [ARG...]
# Skips NAME when its pid file names a live process that passes HEALTH_FN
# (or, with HEALTH_FN "-", is merely alive). Otherwise starts CMD in the
# background under hack/supervise.sh, which restarts it with back-off whenever
# it exits (NAME.pid is the supervisor's, NAME.child the running CMD's), and
# waits for HEALTH_FN; when the first run fails, shows the log's tail and exits
# non-zero.
start_component() {
  local name="$1" health="$2"
  shift 2
  local pidfile="${OUT}/${name}.pid" logfile="${OUT}/${name}.log" childfile="${OUT}/${name}.child"
  local pid child="" log_from=0
  if pid="$(pidfile_pid "${pidfile}")"; then
    if [[ "${health}" == "-" ]] || "${health}"; then
      log "${name}: skip, already running (pid ${pid})"
      return 0
    fi
    log "${name}: pid ${pid} is running but not healthy yet; waiting"
  else
    rm -f "${pidfile}" "${childfile}"
    if [[ "${health}" != "-" ]] && "${health}"; then
      die "${name}: something not started by this script already answers on its port; stop it first"
    fi
    log "${name}: starting under hack/supervise.sh (log ${logfile#"${MINIK8S_ROOT}"/})"
    log_from="$(stat -c %s "${logfile}" 2>/dev/null || echo 0)"
    printf '=== %s: %s\n' "$(date '+%F %T')" "$*" >>"${logfile}"
    pid="$(start_background "${logfile}" "${MINIK8S_ROOT}/hack/supervise.sh" "${name}" "${childfile}" "$@")"
    write_pidfile "${pidfile}" "${pid}"
    # the first run of CMD: when it exits before it is up, starting failed (rather than crash-looping)
    wait_for --quiet --pid "${pid}" "${name}" 10 pidfile_pid "${childfile}" || true
    child="$(pidfile_pid "${childfile}")" || child="${pid}"
  fi

  local ok=0
  if [[ "${health}" == "-" ]]; then
    # No health endpoint: alive after a short grace period counts as up.
    sleep 2
    _pid_gone "${child:-${pid}}" || ok=1
  elif wait_for --pid "${child:-${pid}}" "${name}" "${START_TIMEOUT}" "${health}"; then
    ok=1
  fi
  if [[ ${ok} -ne 1 ]]; then
    log "${name}: failed to start; last lines of ${logfile}:"
    tail -c "+$((log_from + 1))" "${logfile}" | tail -n 40 >&2 || true
    stop_pidfile "${pidfile}" "${name}" 5 >/dev/null 2>&1 || true
    rm -f "${childfile}"
    die "${name} did not become ready (command: $*)"
  fi
  log "${name}: running (supervisor pid ${pid}${child:+, ${name} pid ${child}})"
}

write_kubeconfig() {
  # admin.conf is kubernetes-admin's (client certificate, system:masters); kubeconfig is its copy
  # with the default namespace set, where the rest of the scripts and the docs look.
  local tmp="${KUBECONFIG_FILE}.tmp"
  "${PY}" - "${OUT}/admin.conf" "${tmp}" <<'PYEOF'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
doc["contexts"][0]["context"]["namespace"] = "default"
with open(sys.argv[2], "w") as f:
    yaml.safe_dump(doc, f, default_flow_style=False, sort_keys=False)
PYEOF
  chmod 600 "${tmp}"
  mv "${tmp}" "${KUBECONFIG_FILE}"
  log "kubeconfig: wrote ${KUBECONFIG_FILE#"${MINIK8S_ROOT}"/} (server ${API_URL}, user kubernetes-admin, namespace default)"
}

main() {
  log "step 1/4: setup (packages, dockerd, venv)"
  "${MINIK8S_ROOT}/hack/setup.sh"

  mkdir -p "${OUT}" "${ETCD_DATA}"
  chmod 700 "${ETCD_DATA}"
  cd "${MINIK8S_ROOT}"

  # generated once, reused after: CA, certificates, service-account key, one kubeconfig per identity,
  # and etcd's own CA with its member's and the apiserver's etcd client certificates
  local node_flags=()
  for node in ${NODES}; do node_flags+=(--node "${node}"); done
  "${PY}" -m apiserver.auth.pki --dir "${OUT}" --server "${API_URL}" "${node_flags[@]}" --etcd-member "${ETCD_NAME}"

  log "step 2/4: etcd (${ETCD_CLIENT_URL}, client and peer TLS; data ${ETCD_DATA#"${MINIK8S_ROOT}"/})"
  start_component etcd etcd_healthy \
    etcd --name "${ETCD_NAME}" \
    --data-dir "${ETCD_DATA}" \
    --listen-client-urls "${ETCD_CLIENT_URL}" \
    --advertise-client-urls "${ETCD_CLIENT_URL}" \
    --listen-peer-urls "${ETCD_PEER_URL}" \
    --initial-advertise-peer-urls "${ETCD_PEER_URL}" \
    --initial-cluster "${ETCD_NAME}=${ETCD_PEER_URL}" \
    --listen-metrics-urls "${ETCD_METRICS_URL}" \
    --client-cert-auth --trusted-ca-file "${ETCD_PKI}/ca.crt" \
    --cert-file "${ETCD_PKI}/server.crt" --key-file "${ETCD_PKI}/server.key" \
    --peer-client-cert-auth --peer-trusted-ca-file "${ETCD_PKI}/ca.crt" \
    --peer-cert-file "${ETCD_PKI}/peer.crt" --peer-key-file "${ETCD_PKI}/peer.key"

  # OpenTelemetry spans of every component (issue 15) to the loopback OTLP collector, sampled all; nothing
  # listening there is harmless (the exporter gives a batch up and says so once a minute)
  printf '%s\n' "apiVersion: apiserver.config.k8s.io/v1beta1" "kind: TracingConfiguration" \
    "endpoint: \"${TRACING_ENDPOINT}\"" "samplingRatePerMillion: 1000000" > "${TRACING_CONFIG}"

  log "step 3/4: apiserver (${API_URL}) and the road server (OTLP on ${TRACING_ENDPOINT})"
  start_component apiserver apiserver_ready \
    "${PY}" -m apiserver --etcd-servers "${ETCD_CLIENT_URL}" --tracing-config-file "${TRACING_CONFIG}" \
    --etcd-cafile "${OUT}/pki/etcd/ca.crt" \
    --etcd-certfile "${OUT}/pki/apiserver-etcd-client.crt" --etcd-keyfile "${OUT}/pki/apiserver-etcd-client.key" \
    --bind-address "${API_HOST}" --secure-port "${API_PORT}" --port "${API_INSECURE_PORT}" \
    --pki-dir "${OUT}" --audit-log-path "${AUDIT_LOG}" \
    --encryption-provider-config "${OUT}/pki/encryption-config.yaml" \
    --admission-control-config-file "${MINIK8S_ROOT}/hack/admission-config.yaml" \
    --kubelet-client-certificate "${OUT}/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "${OUT}/pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "${PKI_CA}" \
    --metrics-server-url "https://127.0.0.1:${METRICS_SERVER_PORT}" \
    --proxy-client-cert-file "${OUT}/pki/front-proxy-client.crt" \
    --proxy-client-key-file "${OUT}/pki/front-proxy-client.key" \
    --metrics-server-certificate-authority "${PKI_CA}" \
    --road-server-url "https://127.0.0.1:${ROAD_SERVER_PORT}" --road-server-certificate-authority "${PKI_CA}"

  write_kubeconfig
  # first of the rest, so that it receives the road from the start: reads as system:road-server
  start_component road-server road_server_ready \
    "${PY}" -m road --kubeconfig "${OUT}/road-server.conf" --otlp-address "${OTLP_ADDRESS}" \
    --bind-address 127.0.0.1 --secure-port "${ROAD_SERVER_PORT}" \
    --tls-cert-file "${OUT}/pki/road-server-serving.crt" --tls-private-key-file "${OUT}/pki/road-server-serving.key" \
    --requestheader-client-ca-file "${PKI_CA}" --requestheader-allowed-names front-proxy-client

  log "step 4/4: controllers, scheduler, kube-proxy, and per node its runtime (dockershim, or containerd) and kubelet"
  local node
  for node in ${CONTAINERD_NODES}; do
    [[ " ${NODES} " == *" ${node} "* ]] || die "CONTAINERD_NODES names ${node}, which is not in NODES (${NODES})"
  done
  # secure ports 10257 and 10259 on loopback, as kubeadm binds them: /healthz, and /metrics for system:monitoring
  start_component controllers - "${PY}" -m controllers --kubeconfig "${OUT}/controller-manager.conf" \
    --tracing-config-file "${TRACING_CONFIG}" --bind-address 127.0.0.1 --client-ca-file "${PKI_CA}"
  start_component scheduler - "${PY}" -m scheduler --kubeconfig "${OUT}/scheduler.conf" \
    --tracing-config-file "${TRACING_CONFIG}" --bind-address 127.0.0.1 --client-ca-file "${PKI_CA}"
  # the DNS add-on's Service and endpoints, created once as kubernetes-admin (the DNS may only keep them)
  "${PY}" -m dns.kube_dns_service --kubeconfig "${OUT}/admin.conf" --service-ip "${CLUSTER_DNS}" \
    --port "${DNS_PORT}" --health-port "${DNS_HEALTH_PORT}" || die "creating the kube-dns Service failed"
  start_component dns dns_ready "${PY}" -m dns --kubeconfig "${OUT}/kube-dns.conf" \
    --port "${DNS_PORT}" --health-port "${DNS_HEALTH_PORT}" --service-ip "${CLUSTER_DNS}"
  # one kube-proxy for the host: every node here shares the host's network namespace (upstream's chain names)
  start_component proxy proxy_healthy "${PY}" -m proxy --kubeconfig "${OUT}/kube-proxy.conf" \
    --hostname-override "${NODES// /,}" --cluster-cidr "${CLUSTER_CIDR}" \
    --healthz-bind-address "127.0.0.1:${PROXY_HEALTHZ_PORT}" --metrics-bind-address "127.0.0.1:${PROXY_METRICS_PORT}"
  local kubelet_port=10250 endpoint
  for node in ${NODES}; do
    if uses_containerd "${node}"; then
      start_containerd "${node}"
      endpoint="$(containerd_endpoint "${node}")"
    else
      shim_socket="/run/minik8s/${node}/dockershim.sock"
      endpoint="unix://${shim_socket}"
      start_component "dockershim-${node}" dockershim_serving \
        "${PY}" -m dockershim --node-name "${node}" --container-runtime-endpoint "${endpoint}" \
        --tracing-config-file "${TRACING_CONFIG}"
    fi
    start_component "kubelet-${node}" - \
      "${PY}" -m kubelet --node-name "${node}" --kubeconfig "${OUT}/kubelet-${node}.conf" --port "${kubelet_port}" \
      --container-runtime-endpoint "${endpoint}" --image-service-endpoint "${endpoint}" \
      --tracing-config-file "${TRACING_CONFIG}" \
      --tls-cert-file "${OUT}/pki/kubelets/${node}/kubelet.crt" \
      --tls-private-key-file "${OUT}/pki/kubelets/${node}/kubelet.key" \
      --client-ca-file "${PKI_CA}" \
      --cluster-dns "${CLUSTER_DNS}" --cluster-domain cluster.local \
      --cgroup-root "/minik8s-${node}"
    kubelet_port=$((kubelet_port + 1))
  done
  # the local-path provisioner: rancher's manifests (namespace, service account, RBAC, the default StorageClass
  # local-path, the ConfigMap with the helper pods' scripts) applied as kubernetes-admin, and a kubeconfig with a
  # token of its service account (TokenRequest, a year; renewed at every local-up); then the provisioner as it
  mkdir -p "${LOCAL_PATH_DIR}"
  touch "${LOCAL_PATH_DIR}/.minik8s-local-path"  # hack/down.sh --purge removes only a directory so marked
  "${PY}" -m local_path_provisioner install --kubeconfig "${OUT}/admin.conf" --path "${LOCAL_PATH_DIR}" \
    --write-kubeconfig "${OUT}/local-path-provisioner.conf" \
    || die "applying the local-path provisioner's manifests failed"
  start_component local-path-provisioner local_path_ready "${PY}" -m local_path_provisioner \
    --kubeconfig "${OUT}/local-path-provisioner.conf" --path "${LOCAL_PATH_DIR}" \
    --health-port "${LOCAL_PATH_HEALTH_PORT}"
  # scrapes each kubelet's /stats/summary as system:metrics-server (the kubelets ask the apiserver: nodes/stats)
  start_component metrics-server metrics_server_ready \
    "${PY}" -m metrics_server --kubeconfig "${OUT}/metrics-server.conf" \
    --bind-address 127.0.0.1 --secure-port "${METRICS_SERVER_PORT}" --metric-resolution "${METRICS_RESOLUTION}" \
    --tls-cert-file "${OUT}/pki/metrics-server-serving.crt" \
    --tls-private-key-file "${OUT}/pki/metrics-server-serving.key" \
    --requestheader-client-ca-file "${PKI_CA}" --requestheader-allowed-names front-proxy-client \
    --kubelet-client-certificate "${OUT}/pki/metrics-server.crt" --kubelet-client-key "${OUT}/pki/metrics-server.key" \
    --kubelet-certificate-authority "${PKI_CA}"
  "${PY}" -m kubectl --kubeconfig "${OUT}/admin.conf" apply -f "${MINIK8S_ROOT}/examples/ingress-nginx-class.yaml" \
    >/dev/null || die "creating the IngressClass nginx failed"
  start_component ingress-nginx ingress_ready "${PY}" -m ingress_nginx --kubeconfig "${OUT}/ingress-nginx.conf" \
    --http-port "${INGRESS_HTTP_PORT}" --https-port "${INGRESS_HTTPS_PORT}" --healthz-port "${INGRESS_HEALTHZ_PORT}"

  cat <<EOF

minik8s is up. Logs and pid files: ${OUT#"${MINIK8S_ROOT}"/}/   Stop it: hack/down.sh [--purge]
Next, type:

  export KUBECONFIG=${KUBECONFIG_FILE}
  kubectl get nodes
  kubectl apply -f examples/web-deployment.yaml
  kubectl auth can-i create pods
  ${PY#"${MINIK8S_ROOT}"/} -m kubectl road deployment/web          # its road: every step, who, when (--follow)
  kubectl proxy &   # then the road live in a browser:
  #   http://127.0.0.1:8001/apis/road.minik8s.io/v1alpha1/namespaces/default/deployments/web
  ${PY#"${MINIK8S_ROOT}"/} -m apiserver.audit ${AUDIT_LOG#"${MINIK8S_ROOT}"/} --verb create   # who did what

EOF
}

main "$@"
