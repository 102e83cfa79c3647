"""The helper pod (rancher local-path-provisioner provisioner.go createHelperPod): one pod per action and
volume, `helper-pod-<create|delete>-<pv name>` in the provisioner's namespace, bound to the node
(spec.nodeName, no scheduler), mounting the volume's parent directory from the host at the same path and
the ConfigMap's `setup` and `teardown` scripts at /script, run once (restartPolicy Never) with the
environment upstream's scripts read (VOL_DIR, VOL_MODE, VOL_SIZE_BYTES, ...).

The name is deterministic, so a provisioner killed while its helper runs finds the same pod again
after its restart instead of starting a second one. Annotations (minik8s's own) say which claim, volume,
node and path the pod works for, so a helper left behind by a claim deleted meanwhile can be undone.
"""

from __future__ import annotations

import posixpath
from typing import Any

from machinery.types import Obj

ACTION_CREATE = "create"
ACTION_DELETE = "delete"
HELPER_NAME = "helper-pod"
NAME_MAX = 128  # upstream HelperPodNameMaxLength
SCRIPT_DIR = "/script"
DATA_VOLUME = "data"
SCRIPT_VOLUME = "script"

# minik8s's own annotations on helper pods (rancher keeps this state in its goroutine's stack)
ANN_ACTION = "local.path.provisioner/action"
ANN_VOLUME = "local.path.provisioner/volume"
ANN_CLAIM = "local.path.provisioner/claim"  # namespace/name
ANN_CLAIM_UID = "local.path.provisioner/claim-uid"
ANN_PATH = "local.path.provisioner/path"
ANN_NODE = "local.path.provisioner/node"
ANN_PROVISIONER = "local.path.provisioner/provisioner"  # whose helper it is (two may share a namespace)
LABEL_HELPER = "local.path.provisioner/helper"  # "true" on every helper pod


def helper_pod_name(action: str, volume: str) -> str:
    return f"{HELPER_NAME}-{action}-{volume}"[:NAME_MAX]


def helper_pod(*, action: str, volume: str, path: str, node: str, namespace: str, image: str,
               service_account: str, config_map: str, size_bytes: int, mode: str = "Filesystem",
               claim: tuple[str, str, str] | None = None, provisioner: str = "") -> Obj:
    """The pod running `/bin/sh /script/<setup|teardown>` for `path` on `node` (none: the scheduler picks one,
    for a shared file system)."""
    if not path or not posixpath.isabs(path):
        raise ValueError(f"volume path {path!r} is not absolute")
    path = posixpath.normpath(path)
    parent, leaf = posixpath.split(path)
    if not parent or not leaf or parent == "/":
        raise ValueError(f"invalid path {path} for {action}: cannot find parent dir or volume dir")
    script = "setup" if action == ACTION_CREATE else "teardown"
    annotations = {ANN_ACTION: action, ANN_VOLUME: volume, ANN_PATH: path, ANN_NODE: node}
    if provisioner:
        annotations[ANN_PROVISIONER] = provisioner
    if claim is not None:
        annotations[ANN_CLAIM] = f"{claim[0]}/{claim[1]}"
        annotations[ANN_CLAIM_UID] = claim[2]
    container: dict[str, Any] = {
        "name": HELPER_NAME, "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", f"{SCRIPT_DIR}/{script}"],
        "args": ["-p", path, "-s", str(size_bytes), "-m", mode, "-a", action],
        "env": [{"name": "VOL_DIR", "value": path}, {"name": "VOL_MODE", "value": mode},
                {"name": "VOL_SIZE_BYTES", "value": str(size_bytes)}, {"name": "VOL_USER", "value": ""},
                {"name": "VOL_GROUP", "value": ""}, {"name": "VOL_PERM", "value": ""}],
        "volumeMounts": [{"name": SCRIPT_VOLUME, "mountPath": SCRIPT_DIR}, {"name": DATA_VOLUME, "mountPath": parent}],
    }
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": helper_pod_name(action, volume), "namespace": namespace,
                     "labels": {LABEL_HELPER: "true"}, "annotations": annotations},
        "spec": {
            **({"nodeName": node} if node else {}),
            "serviceAccountName": service_account, "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "node.kubernetes.io/disk-pressure", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "containers": [container],
            "volumes": [
                {"name": DATA_VOLUME, "hostPath": {"path": parent, "type": "DirectoryOrCreate"}},
                {"name": SCRIPT_VOLUME, "configMap": {"name": config_map, "items": [
                    {"key": "setup", "path": "setup"}, {"key": "teardown", "path": "teardown"}]}},
            ],
        },
    }
