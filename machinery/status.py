"""A failure as the API answers it (upstream apimachinery's metav1.Status from api/errors): one builder for
the servers beside the apiserver (the kubelet, the metrics-server, the road server), fields in upstream's order
(kind, apiVersion, metadata, status, message, reason, details, code), as some clients compare the raw text."""

from __future__ import annotations

from typing import Any


def failure(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason}
    if details:
        body["details"] = details
    body["code"] = code
    return body
