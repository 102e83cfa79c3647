#!/bin/bash
# minik8s-node KUBELET-ARGS...: the entrypoint of a node container of the docker-compose cluster.
#
# Runs the node's CRI runtime, `python -m dockershim` (as cri-dockerd runs beside a kubelet), on the
# kubelet's --container-runtime-endpoint (default unix:///run/minik8s/<node>/dockershim.sock) with the
# node name and root dir, then `python -m kubelet KUBELET-ARGS...` with that endpoint. The runtime's
# own flags among the arguments (--cluster-cidr, --cni-bin-dir, --pod-infra-container-image,
# --docker-endpoint: the pod network and sandboxes are the runtime's) go to the shim only;
# --tracing-config-file goes to both.
# When either process exits, the node does: the other is stopped too and the container ends with
# its status (compose restarts it on failure).
# When the container is stopped (`docker-compose stop|down`, SIGTERM), the kubelet and then the shim
# shut down and everything the node made on the host goes too — its pod containers (CNI DEL
# first), its bridge, address leases and state, and the shared iptables rules once no node agent and
# no pod is left (`python -m dockershim.cleanup`, then `python -m kubelet.cleanup`). Pods are sibling
# containers on the host's Docker, so without this they would outlive the node.
# MINIK8S_NODE_TEARDOWN_ON_STOP=false keeps them (a node that starts again adopts them).
# A node that crashes (no SIGTERM) tears nothing down: the restarted one adopts its pods.
set -uo pipefail

node="" root="" endpoint="" image_endpoint=""
shim_args=() kubelet_args=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  arg="${args[i]}" next="${args[i + 1]:-}"
  case "${arg}" in
    # the runtime's flags: for the shim alone
    --cni-bin-dir | --cluster-cidr | --pod-infra-container-image | --docker-endpoint)
      shim_args+=("${arg}" "${next}")
      i=$((i + 1))
      continue
      ;;
    --cni-bin-dir=* | --cluster-cidr=* | --pod-infra-container-image=* | --docker-endpoint=*)
      shim_args+=("${arg}")
      continue
      ;;
  esac
  kubelet_args+=("${arg}")
  case "${arg}" in
    # both trace (their spans are one road): the TracingConfiguration goes to the shim too
    --tracing-config-file) shim_args+=("${arg}" "${next}") ;;
    --tracing-config-file=*) shim_args+=("${arg}") ;;
    --node-name) node="${next}" ;;
    --node-name=*) node="${arg#*=}" ;;
    --root-dir) root="${next}" ;;
    --root-dir=*) root="${arg#*=}" ;;
    --container-runtime-endpoint) endpoint="${next}" ;;
    --container-runtime-endpoint=*) endpoint="${arg#*=}" ;;
    --image-service-endpoint | --image-service-endpoint=*) image_endpoint=given ;;
  esac
done
if [[ -z "${node}" ]]; then
  node="$(hostname | tr '[:upper:]' '[:lower:]')"
fi
if [[ -z "${endpoint}" ]]; then
  endpoint="unix:///run/minik8s/${node}/dockershim.sock"
  kubelet_args+=(--container-runtime-endpoint "${endpoint}")
fi
if [[ -z "${image_endpoint}" ]]; then
  kubelet_args+=(--image-service-endpoint "${endpoint}")
fi
shim_args+=(--node-name "${node}" --container-runtime-endpoint "${endpoint}")
if [[ -n "${root}" ]]; then
  shim_args+=(--root-dir "${root}")
fi
socket="${endpoint#unix://}"

stopping=0
shim="" kubelet=""
# shellcheck disable=SC2317 # invoked by the trap
on_stop() {
  stopping=1
  if [[ -n "${kubelet}" ]]; then
    kill -TERM "${kubelet}" 2>/dev/null || true
  fi
}
trap on_stop TERM INT

# wait_exit PID: until PID has really exited (`wait` returns early when a trapped signal arrives)
wait_exit() {
  local rc=0
  while true; do
    wait "$1"
    rc=$?
    kill -0 "$1" 2>/dev/null || break
  done
  return "${rc}"
}

python -m dockershim "${shim_args[@]}" &
shim=$!
for _ in $(seq 1 300); do # up to 30 s for its socket
  [[ -S "${socket}" ]] && break
  kill -0 "${shim}" 2>/dev/null || break
  sleep 0.1
done
rc=0
if [[ -S "${socket}" && ${stopping} -eq 0 ]]; then
  python -m kubelet "${kubelet_args[@]}" &
  kubelet=$!
  # the node lives while both do; `wait -n` also returns (with no pid) when a trapped signal arrives
  exited=""
  while [[ -z "${exited:-}" ]]; do
    wait -n -p exited "${kubelet}" "${shim}"
    rc=$?
  done
  if [[ "${exited}" == "${shim}" ]]; then
    echo "minik8s-node: dockershim of node ${node} exited (status ${rc}); stopping the kubelet"
    kill -TERM "${kubelet}" 2>/dev/null || true
    wait_exit "${kubelet}"
  fi
else
  echo "minik8s-node: dockershim of node ${node} did not serve ${endpoint}"
  rc=1
fi
if [[ -n "${shim}" ]] && kill -0 "${shim}" 2>/dev/null; then
  kill -TERM "${shim}" 2>/dev/null || true
  wait_exit "${shim}" || true
fi

if [[ ${stopping} -eq 1 && "${MINIK8S_NODE_TEARDOWN_ON_STOP:-true}" == "true" ]]; then
  echo "minik8s-node: node ${node} stopped; removing its pods, bridge and network state"
  where=(--node "${node}")
  if [[ -n "${root}" ]]; then
    where+=(--root-dir "${root}")
  fi
  # the runtime's (containers, network), then the kubelet's own state (pods' directories, logs)
  python -m dockershim.cleanup "${where[@]}" || echo "minik8s-node: runtime cleanup of node ${node} failed (exit $?)"
  python -m kubelet.cleanup "${where[@]}" || echo "minik8s-node: kubelet cleanup of node ${node} failed (exit $?)"
  exit 0
fi
exit "${rc}"
