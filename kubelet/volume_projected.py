"""projected and downwardAPI volumes (upstream: pkg/volume/projected/projected.go, pkg/volume/downwardapi/
downwardapi.go, pkg/volume/configmap MakePayload, pkg/volume/secret MakePayload, pkg/fieldpath).

A downwardAPI volume holds files of the pod's own metadata (fieldRef: metadata.name, namespace, uid,
labels, annotations, one label or annotation) and of its containers' resources (resourceFieldRef with
a divisor); a projected volume gathers serviceAccountToken, configMap, secret and downwardAPI sources
into one directory. Both are written by kubelet/atomic_writer.py at every sync of the pod, so a
changed label, annotation, ConfigMap, Secret or refreshed token reaches the files atomically.

A projected volume sits on a tmpfs (it may hold tokens and Secrets: upstream wraps it in a memory
emptyDir), a downwardAPI volume on the node's disk. Errors are gathered as upstream's aggregate (one
message as it is, several as `[a, b]`) behind `MountVolume.SetUp failed for volume "NAME" : `.
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from kubelet import atomic_writer
from kubelet.configmap_secret_manager import PodObjects
from kubelet.kubelet_pods import PodContext, resource_field_value
from kubelet.token_manager import TokenKey
from machinery.api.core_v1 import (
    ConfigMapProjection,
    DownwardAPIVolumeFile,
    KeyToPath,
    Pod,
    SecretProjection,
    ServiceAccountTokenProjection,
    Volume,
)

PROJECTED = "kubernetes.io~projected"
DOWNWARD_API = "kubernetes.io~downward-api"
DEFAULT_MODE = 0o644  # upstream ProjectedVolumeSourceDefaultMode and DownwardAPIVolumeSourceDefaultMode

Payload = dict[str, tuple[bytes, int]]


class SetUpError(Exception):
    """The volume's SetUp failed; the message is upstream's aggregate of its errors."""


def aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as is, several (deduplicated) in brackets."""
    seen: list[str] = []
    for e in errors:
        if e not in seen:
            seen.append(e)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


# -- downward API ------------------------------------------------------------------------------------


def go_quote(value: str) -> str:
    """Go's %q of a string (strconv.Quote): what FormatMap writes label and annotation values as."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def format_map(m: dict[str, str]) -> str:
    """upstream fieldpath.FormatMap: `key="value"` lines, keys sorted."""
    return "\n".join(f"{k}={go_quote(v)}" for k, v in sorted(m.items()))


_SUBSCRIPT = re.compile(r"metadata\.(labels|annotations)\['([^']*)'\]")


def extract_field_path(pod: Pod, path: str) -> str:
    """upstream fieldpath.ExtractFieldPathAsString, for what a volume may project (the pod's metadata)."""
    meta = pod.metadata
    m = _SUBSCRIPT.fullmatch(path)
    if m:
        source = (meta.labels if m.group(1) == "labels" else meta.annotations) or {}
        return source.get(m.group(2), "")
    simple = {"metadata.name": meta.name, "metadata.namespace": meta.namespace, "metadata.uid": meta.uid}
    if path in simple:
        return simple[path] or ""
    if path == "metadata.labels":
        return format_map(meta.labels or {})
    if path == "metadata.annotations":
        return format_map(meta.annotations or {})
    raise SetUpError(f"unsupported fieldPath: {path}")


def downward_api_data(items: list[DownwardAPIVolumeFile], pod: Pod, default_mode: int, ctx: PodContext,
                      errors: list[str]) -> Payload:
    """upstream downwardapi.CollectData: each item's value at its (cleaned) path."""
    out: Payload = {}
    containers = {c.name: c for c in (pod.spec.containers if pod.spec else [])}
    for item in items:
        mode = default_mode if item.mode is None else item.mode
        data = b""
        if item.field_ref is not None:
            try:
                data = extract_field_path(pod, item.field_ref.field_path).encode()
            except SetUpError as e:
                errors.append(str(e))
        elif item.resource_field_ref is not None:
            ref = item.resource_field_ref
            container = containers.get(ref.container_name or "")
            if container is None:
                errors.append(f"container {ref.container_name or ''} not found")
            else:
                try:
                    data = resource_field_value(container, ref.resource, ref.divisor, ctx).encode()
                except Exception as e:
                    errors.append(f"unsupported container resource : {ref.resource}" if "unsupported" in str(e)
                                  else str(e))
        out[posixpath.normpath(item.path)] = (data, mode)
    return out


# -- configMap and secret projections ------------------------------------------------------------------


def make_payload(kind: str, items: list[KeyToPath] | None, data: dict[str, bytes], default_mode: int,
                 optional: bool) -> Payload:
    """upstream configmap.MakePayload / secret.MakePayload."""
    if not items:
        return {key: (value, default_mode) for key, value in data.items()}
    out: Payload = {}
    for item in items:
        if item.key not in data:
            if optional:
                continue
            if kind == "configmap":
                raise SetUpError(f"configmap references non-existent config key: {item.key}")
            raise SetUpError(f"references non-existent secret key: {item.key}")
        out[item.path] = (data[item.key], default_mode if item.mode is None else item.mode)
    return out


def _object_data(source: ConfigMapProjection | SecretProjection, objects: PodObjects) -> dict[str, bytes] | None:
    name = source.name or ""
    if isinstance(source, ConfigMapProjection):
        return objects.configmap_data(name)
    return objects.secret_data(name)


# -- service-account tokens -----------------------------------------------------------------------------


def token_key(pod: Pod, projection: ServiceAccountTokenProjection) -> TokenKey:
    """What upstream's projected volume asks the token manager for: the pod's account, bound to the pod."""
    meta = pod.metadata
    account = (pod.spec.service_account_name if pod.spec else None) or "default"
    audiences = (projection.audience,) if projection.audience else ()
    return TokenKey(meta.namespace or "", account, audiences, projection.expiration_seconds, meta.name or "",
                    meta.uid or "")


def token_keys(pod: Pod) -> list[TokenKey]:
    """Every token the pod's projected volumes need (the kubelet fetches them before setting volumes up)."""
    keys = []
    for volume in (pod.spec.volumes if pod.spec else None) or []:
        for source in (volume.projected.sources if volume.projected else None) or []:
            if source.service_account_token is not None:
                keys.append(token_key(pod, source.service_account_token))
    return keys


def projected_data(volume: Volume, pod: Pod, objects: PodObjects, ctx: PodContext,
                   tokens: dict[TokenKey, str | Exception], errors: list[str]) -> Payload:
    """upstream projectedVolumeMounter.collectData: every source's files, later sources winning."""
    assert volume.projected is not None
    default_mode = DEFAULT_MODE if volume.projected.default_mode is None else volume.projected.default_mode
    payload: Payload = {}
    for source in volume.projected.sources or []:
        obj_source: ConfigMapProjection | SecretProjection | None = source.secret or source.config_map
        if obj_source is not None:
            kind = "secret" if source.secret is not None else "configmap"
            optional = bool(obj_source.optional)
            data = _object_data(obj_source, objects)
            if data is None:
                if not optional:
                    errors.append(f'{kind} "{obj_source.name or ""}" not found')
                    continue
                data = {}
            try:
                payload.update(make_payload(kind, obj_source.items, data, default_mode, optional))
            except SetUpError as e:
                errors.append(str(e))
        elif source.downward_api is not None:
            payload.update(downward_api_data(source.downward_api.items or [], pod, default_mode, ctx, errors))
        elif source.service_account_token is not None:
            projection = source.service_account_token
            token = tokens.get(token_key(pod, projection))
            if token is None:
                errors.append("failed to fetch token: the kubelet has not requested it yet")
            elif isinstance(token, Exception):
                errors.append(str(token))
            else:
                payload[projection.path] = (token.encode(), default_mode)
        elif source.cluster_trust_bundle is not None or source.pod_certificate is not None:
            what = "clusterTrustBundle" if source.cluster_trust_bundle is not None else "podCertificate"
            errors.append(f"{what} projections are not supported by minik8s")
    return payload


# -- SetUp -------------------------------------------------------------------------------------------------


def _ensure_tmpfs(path: Path, mounted: Callable[[Path], bool]) -> None:
    if mounted(path):
        return
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(path)],
                          capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise SetUpError(f"mounting tmpfs: {proc.stderr.strip()}")


def setup(pod_dir: Path, volume: Volume, pod: Pod, objects: PodObjects, ctx: PodContext,
          tokens: dict[TokenKey, str | Exception], mounted: Callable[[Path], bool]) -> Path:
    """Write a projected or downwardAPI volume under the pod's directory; its host path. Raises SetUpError
    with upstream's event message."""
    errors: list[str] = []
    if volume.projected is not None:
        path = pod_dir / "volumes" / PROJECTED / volume.name
        payload = projected_data(volume, pod, objects, ctx, tokens, errors)
    else:
        assert volume.downward_api is not None
        source = volume.downward_api
        path = pod_dir / "volumes" / DOWNWARD_API / volume.name
        mode = DEFAULT_MODE if source.default_mode is None else source.default_mode
        payload = downward_api_data(source.items or [], pod, mode, ctx, errors)
    prefix = f'MountVolume.SetUp failed for volume "{volume.name}" : '
    if errors:
        raise SetUpError(prefix + aggregate(errors))
    path.mkdir(parents=True, exist_ok=True)
    try:
        if volume.projected is not None:
            _ensure_tmpfs(path, mounted)
        atomic_writer.write(path, payload)
    except (SetUpError, OSError) as e:
        raise SetUpError(prefix + str(e)) from e
    return path

