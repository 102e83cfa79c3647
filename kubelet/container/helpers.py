"""What the kubelet does to a container spec whatever runs it (upstream pkg/kubelet/container/helpers.go:
HashContainer, and ExpandContainerCommandAndArgs' expansion from third_party/forked/golang/expansion/expand.go).
Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re

from machinery.api.core_v1 import Container

VAR_REFERENCE = _VAR_RE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: known names expand, unknown ones stay as written, $$ is a $."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _VAR_RE.sub(sub, text)


def hash_container(container: Container) -> str:
    """A stable hash of the container spec: a change (e.g. a new image) means a new container."""
    data = container.model_dump(mode="json", by_alias=True, exclude_none=True)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
