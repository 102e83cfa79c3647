#!/bin/bash
# minik8s-node KUBELET-ARGS...: the entrypoint of a node container of the docker-compose cluster.
#
# Runs `python -m kubelet KUBELET-ARGS...`. The container is the node: when it is stopped
# (`docker-compose stop|down`, SIGTERM), the kubelet shuts down and then everything it made on the
# host goes too — its pod containers (CNI DEL first), its bridge, address leases and state, and the
# shared iptables rules once no kubelet and no pod is left (`python -m kubelet.cleanup`). Pods are
# sibling containers on the host's Docker, so without this they would outlive the node.
# MINIK8S_NODE_TEARDOWN_ON_STOP=false keeps them (a kubelet that starts again adopts them).
# A kubelet that crashes (no SIGTERM) tears nothing down: the restarted one adopts its pods.
set -uo pipefail

node="" root=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --node-name) node="${args[i + 1]:-}" ;;
    --node-name=*) node="${args[i]#*=}" ;;
    --root-dir) root="${args[i + 1]:-}" ;;
    --root-dir=*) root="${args[i]#*=}" ;;
  esac
done

stopping=0
child=""
# shellcheck disable=SC2317 # invoked by the trap
on_stop() {
  stopping=1
  if [[ -n "${child}" ]]; then
    kill -TERM "${child}" 2>/dev/null || true
  fi
}
trap on_stop TERM INT

python -m kubelet "$@" &
child=$!
rc=0
# `wait` returns early when a trapped signal arrives: wait until the kubelet has really exited.
while true; do
  wait "${child}"
  rc=$?
  kill -0 "${child}" 2>/dev/null || break
done

if [[ ${stopping} -eq 1 && "${MINIK8S_NODE_TEARDOWN_ON_STOP:-true}" == "true" && -n "${node}" ]]; then
  echo "minik8s-node: node ${node} stopped; removing its pods, bridge and network state"
  cleanup=(python -m kubelet.cleanup --node "${node}")
  if [[ -n "${root}" ]]; then
    cleanup+=(--root-dir "${root}")
  fi
  "${cleanup[@]}" || echo "minik8s-node: cleanup of node ${node} failed (exit $?)"
  exit 0
fi
exit "${rc}"
