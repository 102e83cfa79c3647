"""persistentVolumeClaim volumes (upstream pkg/kubelet/volumemanager/populator/desired_state_of_world_populator.go
getPVCExtractPV / getPVSpec, and the hostPath and local volume plugins the bound volume names).

For each claim a pod uses, the kubelet reads the claim and, once it is bound, its PersistentVolume (the Node
authorizer lets it read exactly these: pod → claim → volume); the volume's `hostPath` (its type checked
or the directory made, as the hostPath plugin does) or `local` path (which must exist) is bind-mounted
into the containers, read-only when the pod's volume says `readOnly`.

A claim that is missing, being deleted or not bound yet, or whose volume does not point back at it, keeps
the pod waiting: the sync fails with upstream's

    Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process
    volumes=[data]: error processing PVC default/data: PVC default/data has non-bound phase ("Pending") or
    empty pvc.Spec.VolumeName ("")

as the `FailedMount` event (the populator's own error after the colon where upstream, having waited its
2 minutes, says "timed out waiting for the condition"), and is tried again every 300 ms
(podAttachAndMountRetryInterval) — for two minutes, then every 5 s — so the pod starts as soon as the
binder and the provisioner are done. The event comes once the pod has waited 10 s (a claim being provisioned
is bound before that, and leaves no warning), then once per two minutes of waiting.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from machinery.api.core_v1 import PersistentVolume, PersistentVolumeClaim, Pod
from machinery.client import ApiClient, ApiError
from machinery.types import Obj

RETRY_INTERVAL = 0.3  # upstream podAttachAndMountRetryInterval
MOUNT_TIMEOUT = 123.0  # upstream podAttachAndMountTimeout (2m3s): then slower tries, and the event again
SLOW_RETRY_INTERVAL = 5.0


@dataclass
class ClaimState:
    """What one sync read for one claim: the claim and its volume (None when missing), or why it cannot mount."""

    claim: Obj | None = None
    volume: Obj | None = None
    error: str = ""


@dataclass(frozen=True)
class ClaimSource:
    """The host directory a claim's volume gives: hostPath (with its type) or local (host_path_type None)."""

    path: str
    host_path_type: str | None
    read_only: bool


class ClaimsNotReady(Exception):
    """Some claims of the pod cannot be mounted yet; the message is upstream's after "Unable to attach or
    mount volumes: "."""

    def __init__(self, message: str, volumes: list[str]) -> None:
        super().__init__(message)
        self.volumes = volumes


FIRST_REPORT = 10.0  # seconds of waiting before the first event: a claim being provisioned binds well before
FAST_TRIES = int(MOUNT_TIMEOUT / RETRY_INTERVAL)


def retry_after(failures: int) -> float:
    """Seconds until the next try after `failures` failed ones in a row."""
    return RETRY_INTERVAL if failures <= FAST_TRIES else SLOW_RETRY_INTERVAL


def waited(failures: int) -> float:
    """About how long the pod has waited after `failures` tries."""
    return min(failures, FAST_TRIES) * RETRY_INTERVAL + max(0, failures - FAST_TRIES) * SLOW_RETRY_INTERVAL


def report_now(failures: int) -> bool:
    """Once the pod has waited FIRST_REPORT seconds, then once per mount timeout (upstream reports after each
    2-minute WaitForAttachAndMount; sooner here, so that a claim that will not bind shows why within seconds,
    while one being provisioned, bound in a second or two, leaves no warning)."""
    def period(n: int) -> int:
        elapsed = waited(n) - FIRST_REPORT
        return -1 if elapsed < 0 else int(elapsed // MOUNT_TIMEOUT)

    return period(failures) > period(failures - 1)


def claim_volumes(pod: Pod) -> dict[str, tuple[str, bool]]:
    """volume name → (claim name, readOnly) for the pod's persistentVolumeClaim volumes."""
    out = {}
    for volume in (pod.spec.volumes if pod.spec else None) or []:
        source = volume.persistent_volume_claim
        if source is not None:
            out[volume.name] = (source.claim_name or "", bool(source.read_only))
    return out


async def _get(client: ApiClient, model: type[PersistentVolumeClaim] | type[PersistentVolume], name: str,
               namespace: str | None = None) -> tuple[Obj | None, str]:
    try:
        return await client.get_raw(model, name, namespace), ""
    except ApiError as e:
        if e.is_not_found:
            return None, e.message
        raise


async def _state(client: ApiClient, namespace: str, name: str) -> ClaimState:
    """getPVCExtractPV and getPVSpec, with their messages."""
    prefix = f"error processing PVC {namespace}/{name}: "
    claim, why = await _get(client, PersistentVolumeClaim, name, namespace)
    if claim is None:
        return ClaimState(error=f"{prefix}failed to fetch PVC from API server: {why}")
    if (claim.get("metadata") or {}).get("deletionTimestamp"):
        return ClaimState(claim, error=f"{prefix}can't start pod because PVC {namespace}/{name} is being deleted")
    phase = (claim.get("status") or {}).get("phase") or ""
    volume_name = (claim.get("spec") or {}).get("volumeName") or ""
    if phase != "Bound" or not volume_name:
        return ClaimState(claim, error=f'{prefix}PVC {namespace}/{name} has non-bound phase ("{phase}") or empty '
                                       f'pvc.Spec.VolumeName ("{volume_name}")')
    volume, why = await _get(client, PersistentVolume, volume_name)
    if volume is None:
        return ClaimState(claim, error=f"{prefix}failed to fetch PV {volume_name} from API server: {why}")
    ref = (volume.get("spec") or {}).get("claimRef")
    uid = (claim.get("metadata") or {}).get("uid") or ""
    if not ref:
        return ClaimState(claim, volume, f"{prefix}found PV object {volume_name} but it has a nil pv.Spec.ClaimRef "
                                         "indicating it is not yet bound to the claim")
    if ref.get("uid") != uid:
        return ClaimState(claim, volume, f"{prefix}found PV object {volume_name} but its pv.Spec.ClaimRef.UID "
                                         f"({ref.get('uid')}) does not point to claim.UID ({uid})")
    return ClaimState(claim, volume)


async def fetch(client: ApiClient, pod: Pod) -> dict[str, ClaimState]:
    """Every claim the pod names (and its volume), read now; an unreachable apiserver raises."""
    names = sorted({claim for claim, _ in claim_volumes(pod).values()})
    namespace = pod.metadata.namespace or ""
    states = await asyncio.gather(*(_state(client, namespace, n) for n in names))
    return dict(zip(names, states, strict=True))


def resolve(pod: Pod, states: dict[str, ClaimState]) -> dict[str, ClaimSource]:
    """volume name → the host path its bound volume gives; ClaimsNotReady names every volume that cannot mount."""
    out: dict[str, ClaimSource] = {}
    failed: list[tuple[str, str]] = []
    for volume_name, (claim, read_only) in claim_volumes(pod).items():
        state = states.get(claim) or ClaimState(error=f"error processing PVC {pod.metadata.namespace}/{claim}: "
                                                      "not read yet")
        if state.error or state.volume is None:
            failed.append((volume_name, state.error))
            continue
        spec = state.volume.get("spec") or {}
        if spec.get("hostPath"):
            source = ClaimSource(spec["hostPath"].get("path") or "", spec["hostPath"].get("type") or "", read_only)
        elif spec.get("local"):
            source = ClaimSource(spec["local"].get("path") or "", None, read_only)
        else:
            kinds = sorted(k for k, v in spec.items() if isinstance(v, dict) and k not in (
                "capacity", "claimRef", "nodeAffinity"))
            failed.append((volume_name, f"error processing PVC {pod.metadata.namespace}/{claim}: volume "
                                        f"{state.volume['metadata']['name']} has no source minik8s can mount "
                                        f"(hostPath or local): {', '.join(kinds) or 'none'}"))
            continue
        out[volume_name] = source
    if failed:
        names = " ".join(name for name, _ in failed)
        raise ClaimsNotReady(f"unmounted volumes=[{names}], unattached volumes=[], "
                             f"failed to process volumes=[{names}]: " + "; ".join(why for _, why in failed),
                             [name for name, _ in failed])
    return out


def local_path(volume: str, path_text: str) -> Path:
    """A `local` volume's path: it must exist already (upstream's local plugin makes nothing)."""
    path = Path(path_text)
    if not path.is_absolute() or not path.exists():
        raise ClaimsNotReady(f"unmounted volumes=[{volume}], unattached volumes=[], failed to process volumes=[]: "
                             f'MountVolume.NewMounter initialization failed for volume "{volume}" : path '
                             f'"{path_text}" does not exist', [volume])
    return path
