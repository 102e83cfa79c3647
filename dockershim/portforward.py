"""Port-forward inside a pod's network namespace, for the shim's streaming server (upstream
pkg/kubelet/cri/streaming/portforward/websocket.go for the framing; cri-dockerd's
core/docker_service portForward for reaching the port, which runs `nsenter -t <pid> -n socat - TCP4:localhost:<port>`).

Here the socket is made in-process: a worker thread enters the sandbox's network namespace
(setns(2) on /proc/<pid>/ns/net, which moves only that thread), creates and connects a TCP socket to
localhost:<port> there, and returns to the shim's own namespace; the socket stays in the pod's
namespace for its life. Nothing goes through the host's network or the pod IP.

The websocket (subprotocol v4.channel.k8s.io, or none; v4.base64.channel.k8s.io is not served) carries
the ports of `?ports=` in order: for the i-th port channel 2i is its data and 2i+1 its errors, and the
server's first frame on each is the port, two bytes little-endian. A port that cannot be reached gets
upstream's message on its error channel (`error forwarding port P to pod <sandbox>, uid : ...`) and the
connection ends: the client never waits on a dead stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
import socket
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

CLONE_NEWNET = 0x40000000
PORTFORWARD_PROTOCOLS = ("v4.channel.k8s.io",)
SendFrame = Callable[[bytes], Awaitable[None]]
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def _connect_in_netns(pid: int, port: int, timeout: float) -> socket.socket:
    """Blocking: a TCP socket connected to localhost:<port> in the network namespace of process `pid`
    (IPv4, then IPv6, as upstream tries both)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    except OSError:
        os.close(own)
        raise
    try:
        _setns(target)
        try:
            errors: list[str] = []
            for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.settimeout(timeout)
                try:
                    sock.connect((host, port))
                except OSError as e:
                    sock.close()
                    errors.append(f"{'IPv4' if family == socket.AF_INET else 'IPv6'}: dial tcp "
                                  f"{host if family == socket.AF_INET else '[::1]'}:{port}: "
                                  f"connect: {e.strerror or e}")
                    continue
                sock.setblocking(False)
                return sock
            raise ConnectionRefusedError(" ".join(errors))
        finally:
            _setns(own)  # the thread goes back to the shim's namespace (a pool thread is reused)
    finally:
        os.close(target)
        os.close(own)


async def connect_in_netns(pid: int, port: int, timeout: float = 10.0) -> socket.socket:
    return await asyncio.to_thread(_connect_in_netns, pid, port, timeout)


def port_prefix(port: int) -> bytes:
    return port.to_bytes(2, "little")


def parse_ports(values: list[str]) -> list[int]:
    """`?ports=80,8080` or repeated: the ports in order (upstream portforward.NewV4Options)."""
    ports: list[int] = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            try:
                port = int(part)
            except ValueError:
                raise ValueError(f'unable to parse "{part}" as a port: invalid syntax') from None
            if not 0 < port < 65536:
                raise ValueError(f"port {port} must be > 0 and < 65536")
            ports.append(port)
    return ports


async def pump_socket(sock: socket.socket, send: SendFrame, receive_into: asyncio.Queue[bytes | None],
                      channel: int) -> None:
    """Copy between a connected socket and one data channel until either side ends."""
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 20)

    async def down() -> None:
        while data := await reader.read(1 << 18):  # what has arrived, up to 256 KiB a message
            await send(bytes([channel]) + data)

    async def up() -> None:
        while (data := await receive_into.get()) is not None:
            writer.write(data)
            await writer.drain()
        # None: the client's websocket ended (v4 cannot half-close a channel), so the connection ends

    tasks = [asyncio.create_task(down()), asyncio.create_task(up())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
