"""Image pull policy and back-off (upstream pkg/kubelet/images/image_manager.go, pull policy defaulting
of pkg/apis/core/v1/defaults.go). Pure: the runtime manager pulls; this decides what a container
shows while an image cannot be had."""

from __future__ import annotations

from machinery.flowcontrol import Backoff


def default_pull_policy(image: str) -> str:
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    return "Always" if (not tag and not digest) or tag == "latest" else "IfNotPresent"


def fmt_duration(seconds: float) -> str:
    """Go's time.Duration.String() for whole seconds: 10s, 1m20s, 5m0s."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    return f"{s // 60}m{s % 60}s"


def image_pull_waiting(backoff: Backoff, key: str, showing: str) -> tuple[str, float] | None:
    """What a container whose image pull `key` failed waits with while its back-off window is open,
    and in how many seconds that changes; None once the pull may be tried again.

    ErrImagePull stays for the first half of the window and ImagePullBackOff shows for the rest, by
    the clock, not by how many syncs run in between, so that whoever reads the pod can see
    ErrImagePull. A container not showing ErrImagePull goes straight to ImagePullBackOff."""
    if not backoff.in_backoff(key):
        return None
    remaining = backoff.remaining_since_update(key)
    half = backoff.get(key) / 2
    if showing == "ErrImagePull" and remaining > half:
        return "ErrImagePull", remaining - half
    return "ImagePullBackOff", remaining
