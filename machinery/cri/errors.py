"""The error of a failed CRI call, as the kubelet's remote clients raise it (upstream keeps the grpc
status: `status.FromError(err)` in pkg/kubelet/cri/remote)."""

from __future__ import annotations

import grpc


class CriError(Exception):
    """A CRI call failed: its grpc status code and the runtime's message."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def is_not_found(self) -> bool:
        return self.code == grpc.StatusCode.NOT_FOUND
