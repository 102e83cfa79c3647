"""The kubelet's exec relay between the client's websocket and the runtime's streaming server, with the
one protocol translation the runtimes here need: v5.channel.k8s.io (client) ↔ v4.channel.k8s.io (runtime).
Upstream's counterparts: the UpgradeAwareProxy (frames verbatim) and the StreamTranslator
(staging/src/k8s.io/apiserver/pkg/util/proxy/streamtranslator.go, websocket v5 ↔ SPDY).

Why: kubectl ≥ 1.30 offers its websocket only as `v5.channel.k8s.io`; containerd 1.6's streaming server
(k8s.io/kubelet/pkg/cri/streaming, wsstream) speaks websocket `v4.channel.k8s.io`, `channel.k8s.io`,
`base64.channel.k8s.io` and SPDY/3.1, and refuses a v5-only offer. So the kubelet offers the runtime the
client's protocols *plus* v4.channel.k8s.io after them; the runtime takes the first it knows in the
client's order (wsstream's handshake), so the Docker shim still picks v5 and the frames pass verbatim, and
containerd picks v4, which the kubelet then translates. v4 and v5 frames are the same (first byte the
channel: 0 stdin, 1 stdout, 2 stderr, 3 the final Status, 4 terminal resize) except v5's CLOSE frame,
`[255, channel]`, which says the client's stream ended. Runtime → client frames pass unchanged (a v4
server never sends 255).

What v4 cannot carry is the end of stdin, and CRI offers no other way to say it (ExecSync has no stdin;
a second exec cannot close the first process's stdin, whose write end the runtime's shim holds; closing
the websocket makes wsstream close the whole connection, so the output that follows and the exit code
would be lost). On the client's stdin CLOSE the kubelet therefore:
- with a TTY sends the terminal's EOF character (^D, byte 4): the line discipline turns it into end of
  input for a reader at the start of a line — an interactive shell exits as if the user typed ^D. (Upstream
  over SPDY: containerd closes the console's input; with a line still half-typed, the one ^D only submits
  it.) kubectl's stdin on a terminal is raw, so its own end comes only when the terminal goes away.
- without a TTY drops it: the command keeps running and does not see the end of its input, so a command
  that reads stdin to its end (`echo x | kubectl exec -i pod -- cat`) waits until the client disconnects.
  Commands that read what they need (`read line`, `head -n1`) work. The real fix is SPDY/3.1 towards the
  runtime (a stream FIN half-closes stdin, as upstream's StreamTranslator does); no maintained Python SPDY
  library exists (python-spdylay 0.1.2 of 2012, spdy-py 0.2.0 partial), so it is not done here.
Clients offering v4 or older keep getting exactly what the runtime speaks, verbatim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import websockets
from starlette.websockets import WebSocket
from websockets.asyncio.client import ClientConnection

log = logging.getLogger(__name__)

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
EXEC_PROTOCOLS = (V5, V4, "channel.k8s.io")
PORTFORWARD_PROTOCOL = V4  # upstream portforward/websocket.go's v4BinaryWebsocketProtocol
STDIN_CHANNEL, CLOSE_CHANNEL = 0, 255
TERMINAL_EOF = b"\x04"  # VEOF, ^D: what the terminal's line discipline reads as the end of input


def runtime_subprotocols(offered: list[str]) -> list[str]:
    """What the kubelet offers the runtime: the client's protocols in its order, then v4 when the client
    speaks v5 but not v4 (the kubelet translates v5 → v4 itself)."""
    protocols = list(offered)
    if V5 in protocols and V4 not in protocols:
        protocols.append(V4)
    return protocols


def translating(offered: list[str], runtime_chose: str | None) -> bool:
    """True when the runtime took the v4 the kubelet added, so the client gets v5 translated."""
    return runtime_chose == V4 and V4 not in offered and V5 in offered


class V5ToV4:
    """Client (v5) → runtime (v4) frames: all but CLOSE verbatim; stdin's CLOSE as the docstring above says."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.stdin_closed = False

    def client_frame(self, frame: bytes) -> bytes | None:
        """The frame to send to the runtime for one from the client, or None to send nothing."""
        if not frame or frame[0] != CLOSE_CHANNEL:
            return frame
        if len(frame) != 2:
            log.warning("exec: ignoring a malformed v5 CLOSE frame %r", frame[:8])
            return None
        if frame[1] != STDIN_CHANNEL or self.stdin_closed:
            return None  # the client closes only stdin; another channel's CLOSE means nothing to the runtime
        self.stdin_closed = True
        if self.tty:
            return bytes([STDIN_CHANNEL]) + TERMINAL_EOF
        log.info("exec: the client closed stdin; the runtime speaks v4, which cannot pass that on")
        return None


async def relay(client: WebSocket, upstream: ClientConnection, translate: V5ToV4 | None = None) -> None:
    """Frames both ways until either side closes (verbatim, or client → runtime through `translate`); the
    runtime's close code reaches the client."""

    async def inbound() -> None:
        while True:
            message = await client.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("bytes") is not None:
                frame: bytes | None = message["bytes"]
                if translate is not None:
                    frame = translate.client_frame(message["bytes"])
                if frame is not None:
                    await upstream.send(frame)
            elif message.get("text") is not None:
                await upstream.send(message["text"])

    async def outbound() -> None:
        with contextlib.suppress(websockets.exceptions.ConnectionClosed):
            async for frame in upstream:
                if isinstance(frame, bytes):
                    await client.send_bytes(frame)
                else:
                    await client.send_text(frame)

    in_task = asyncio.create_task(inbound())
    out_task = asyncio.create_task(outbound())
    try:
        done, _ = await asyncio.wait({in_task, out_task}, return_when=asyncio.FIRST_COMPLETED)
        if out_task in done:
            code = upstream.close_code or 1000
            with contextlib.suppress(Exception):
                await client.close(code if code != 1005 else 1000)
    finally:
        in_task.cancel()
        out_task.cancel()
        await asyncio.gather(in_task, out_task, return_exceptions=True)
