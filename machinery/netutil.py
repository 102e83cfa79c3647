"""Network helpers shared by components (upstream k8s.io/apimachinery/pkg/util/net, interface.go's
ChooseHostInterface: the address of the interface holding the default route)."""

from __future__ import annotations

import contextlib
import socket


def default_node_ip() -> str:
    """The address of the interface holding the default route (no packet is sent); loopback if none."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("8.8.8.8", 53))  # a UDP connect sends nothing: it only picks a route
        return str(s.getsockname()[0])
    return "127.0.0.1"
