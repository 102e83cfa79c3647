"""What rancher's deploy/local-path-storage.yaml creates, but its Deployment (minik8s runs the provisioner as
a host process, as it runs the cluster DNS): the namespace `local-path-storage`, the service account
`local-path-provisioner-service-account`, rancher's namespaced Role (helper pods) and ClusterRole (claims,
volumes, classes, nodes, events) with their bindings, the StorageClass `local-path` (WaitForFirstConsumer,
reclaim Delete; marked the default class, as k3s ships it) and the ConfigMap `local-path-config` whose
`setup` and `teardown` scripts the helper pods run.

The provisioner's identity may not create any of this (it may not write RBAC nor classes), so an admin
applies it once at bring-up: `python -m local_path_provisioner install --kubeconfig admin.conf [--path DIR]`
(local-up and compose do). Applying is create, or update when it differs: safe to repeat.

`--write-kubeconfig FILE` then asks TokenRequest for a token of the service account (a year by default,
`--token-expiration`; a client certificate cannot carry the account's 79-character name: X.509 caps a
CN at 64) and writes the provisioner's kubeconfig with it; bring-up runs install each time, so the
token is renewed with every `local-up`.

The one addition to rancher's rules: leases in the namespace, for leader election among replicas
(rancher runs one replica with election off; sig-storage-lib-external-provisioner elects on a Lease).
"""

from __future__ import annotations

import json
from typing import Any

from machinery.api.core_v1 import ConfigMap, Namespace, ServiceAccount
from machinery.api.rbac_v1 import ClusterRole, ClusterRoleBinding, Role, RoleBinding
from machinery.api.storage_v1 import StorageClass
from machinery.client import ApiClient, ApiError
from machinery.kubeconfig import ClientConfig, write_kubeconfig
from machinery.types import Obj
from machinery.volumeutil import IS_DEFAULT_STORAGE_CLASS_ANNOTATION

PROVISIONER_NAME = "rancher.io/local-path"
NAMESPACE = "local-path-storage"
SERVICE_ACCOUNT = "local-path-provisioner-service-account"
ROLE = "local-path-provisioner-role"
BINDING = "local-path-provisioner-bind"
CONFIG_MAP = "local-path-config"
STORAGE_CLASS = "local-path"
DEFAULT_PATH = "/opt/local-path-provisioner"  # rancher's
DEFAULT_NODE_KEY = "DEFAULT_PATH_FOR_NON_LISTED_NODES"
RBAC = "rbac.authorization.k8s.io"

SETUP_SCRIPT = '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n'
TEARDOWN_SCRIPT = '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n'


def user() -> str:
    """The username the provisioner's credentials carry (a token of the account, or a certificate with this CN)."""
    return f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


def config_json(path: str) -> str:
    return json.dumps({"nodePathMap": [{"node": DEFAULT_NODE_KEY, "paths": [path]}]}, indent=8)


def _rule(verbs: list[str], groups: list[str], resources: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def objects(path: str = DEFAULT_PATH, *, default_class: bool = True) -> list[tuple[Any, Obj]]:
    """(model, wire object) in the order they must be created."""
    subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
    class_meta: Obj = {"name": STORAGE_CLASS}
    if default_class:
        class_meta["annotations"] = {IS_DEFAULT_STORAGE_CLASS_ANNOTATION: "true"}
    return [
        (Namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        (ServiceAccount, {"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}}),
        (Role, {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": {"name": ROLE, "namespace": NAMESPACE},
                "rules": [_rule(["get", "list", "watch", "create", "patch", "update", "delete"], [""], ["pods"]),
                          _rule(["get", "create", "update"], ["coordination.k8s.io"], ["leases"])]}),
        (ClusterRole, {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": ROLE}, "rules": [
            _rule(["get", "list", "watch"], [""], ["nodes", "persistentvolumeclaims", "configmaps", "pods",
                                                   "pods/log"]),
            _rule(["get", "list", "watch", "create", "patch", "update", "delete"], [""], ["persistentvolumes"]),
            _rule(["create", "patch"], [""], ["events"]),
            _rule(["get", "list", "watch"], ["storage.k8s.io"], ["storageclasses"])]}),
        (RoleBinding, {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
                       "metadata": {"name": BINDING, "namespace": NAMESPACE},
                       "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": ROLE}, "subjects": subject}),
        (ClusterRoleBinding, {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": BINDING},
                              "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": ROLE},
                              "subjects": subject}),
        (StorageClass, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": class_meta,
                        "provisioner": PROVISIONER_NAME, "volumeBindingMode": "WaitForFirstConsumer",
                        "reclaimPolicy": "Delete"}),
        (ConfigMap, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
                     "data": {"config.json": config_json(path), "setup": SETUP_SCRIPT, "teardown": TEARDOWN_SCRIPT}}),
    ]


# fields compared and carried over on update (a StorageClass's parameters are immutable: never updated)
_FIELDS = {"Role": ("rules",), "ClusterRole": ("rules",), "RoleBinding": ("subjects",),
           "ClusterRoleBinding": ("subjects",), "ConfigMap": ("data",)}


async def install(client: ApiClient, path: str = DEFAULT_PATH, *, default_class: bool = True) -> list[str]:
    """Create what is missing, bring the rules, subjects and scripts back where they differ; what was done."""
    done = []
    for model, obj in objects(path, default_class=default_class):
        meta = obj["metadata"]
        what = f"{obj['kind'].lower()}/{meta['name']}"
        try:
            await client.create_raw(model, obj, meta.get("namespace"))
            done.append(f"{what} created")
            continue
        except ApiError as e:
            if not e.is_already_exists:
                raise
        fields = _FIELDS.get(obj["kind"], ())
        if not fields:
            done.append(f"{what} unchanged")
            continue
        current = await client.get_raw(model, meta["name"], meta.get("namespace"))
        if all(current.get(f) == obj.get(f) for f in fields):
            done.append(f"{what} unchanged")
            continue
        current.update({f: obj[f] for f in fields})
        await client.update_raw(model, meta["name"], current, meta.get("namespace"))
        done.append(f"{what} configured")
    return done


TOKEN_EXPIRATION = 365 * 24 * 3600


async def write_token_kubeconfig(client: ApiClient, config: ClientConfig, path: str,
                                 expiration_seconds: int = TOKEN_EXPIRATION) -> None:
    """A kubeconfig for the provisioner: the admin's server and CA, a TokenRequest token of its account."""
    answer = await client.request(
        "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": expiration_seconds}})
    token = ((answer or {}).get("status") or {}).get("token")
    if not token:
        raise RuntimeError(f"TokenRequest for {NAMESPACE}/{SERVICE_ACCOUNT} answered no token")
    write_kubeconfig(path, config.server, user(), ca_file=config.ca_file, token=token, embed=True,
                     insecure=config.insecure, context=f"{SERVICE_ACCOUNT}@minik8s")
