"""The ServiceAccount admission plugin's token mount (upstream: plugin/pkg/admission/serviceaccount/admission.go,
1.22 and later: mountServiceAccountToken, TokenVolumeSource, shouldAutomount).

A new pod (mirror pods aside) whose account — or, first, the pod itself — does not turn
automountServiceAccountToken off gets the projected volume `kube-api-access-<5 random>`: a bound token of
its account (expirationSeconds 3607, path `token`), `ca.crt` from the namespace's `kube-root-ca.crt`
ConfigMap (controllers/rootcacertpublisher.py keeps it) and `namespace` from the downward API, mode 0644,
mounted read-only at /var/run/secrets/kubernetes.io/serviceaccount in every init and app container that
does not mount something there already. A pod that already has a `kube-api-access-` volume keeps it.
The account's imagePullSecrets become the pod's when it names none.
"""

from __future__ import annotations

import random
from typing import Any

from machinery.types import Obj

DEFAULT_API_TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVICE_ACCOUNT_VOLUME_NAME = "kube-api-access"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS = 3607  # upstream serviceaccount.WarnOnlyBoundTokenExpirationSeconds
PROJECTED_DEFAULT_MODE = 0o644
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # upstream utilrand


def generate_name(base: str) -> str:
    """upstream names.SimpleNameGenerator: the base and 5 random characters, from a pseudo-random generator as
    upstream's utilrand (math/rand): a volume's name is no secret, and the system's generator cost a getrandom
    call per character of every new pod."""
    return base + "".join(random.choices(_ALPHABET, k=5))


def token_volume_source() -> Obj:
    """upstream TokenVolumeSource()."""
    return {"defaultMode": PROJECTED_DEFAULT_MODE, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS}},
        {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}


def should_automount(account: Obj, pod: Obj) -> bool:
    """The pod's preference wins, then the account's; true by default."""
    pod_pref = (pod.get("spec") or {}).get("automountServiceAccountToken")
    if pod_pref is not None:
        return bool(pod_pref)
    account_pref = account.get("automountServiceAccountToken")
    if account_pref is not None:
        return bool(account_pref)
    return True


def mount_service_account_token(pod: Obj) -> None:
    """upstream mountServiceAccountToken, on the pod's wire form."""
    spec = pod.setdefault("spec", {})
    volumes: list[Any] = spec.get("volumes") or []
    token_volume = next((v.get("name") for v in volumes
                         if str(v.get("name") or "").startswith(SERVICE_ACCOUNT_VOLUME_NAME + "-")), None)
    has_token_volume = token_volume is not None
    name = token_volume or generate_name(SERVICE_ACCOUNT_VOLUME_NAME + "-")
    needs_volume = False
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            mounts = container.get("volumeMounts") or []
            if any(m.get("mountPath") == DEFAULT_API_TOKEN_MOUNT_PATH for m in mounts):
                continue  # an existing mount at the default path prevents the token's
            container["volumeMounts"] = [*mounts, {"name": name, "readOnly": True,
                                                   "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]
            needs_volume = True
    if not has_token_volume and needs_volume:
        spec["volumes"] = [*volumes, {"name": name, "projected": token_volume_source()}]


def admit_pod(pod: Obj, account: Obj) -> None:
    """What upstream's Admit adds to a new pod once its account is known."""
    if should_automount(account, pod):
        mount_service_account_token(pod)
    spec = pod.setdefault("spec", {})
    if not spec.get("imagePullSecrets") and account.get("imagePullSecrets"):
        spec["imagePullSecrets"] = [{"name": ref.get("name")} for ref in account["imagePullSecrets"]]
