"""pods/portforward as kubectl ≥ 1.31 speaks it (1.30 with KUBECTL_PORT_FORWARD_WEBSOCKETS=true): a websocket
with subprotocol `SPDY/3.1+portforward.k8s.io` whose binary messages carry a SPDY/3.1 session (client-go
tools/portforward/tunneling_connection.go; upstream's apiserver unwraps it in
staging/src/k8s.io/apiserver/pkg/util/proxy/streamtunnel.go and proxies SPDY to the kubelet).

In the session kubectl opens, per local connection, two streams with the headers `streamtype` (error, then
data), `port` and `requestid` (upstream pkg/kubelet/cri/streaming/portforward/httpstream.go's protocol
`portforward.k8s.io`). Every stream gets its SYN_REPLY at once; when a request's pair is complete the
apiserver dials the kubelet's websocket port-forward for that one port (endpoints/proxy.py dial_kubelet,
subprotocol v4.channel.k8s.io: channel 0 data, 1 errors, each first carrying the port) and copies:
client data → channel 0, channel 0 → the data stream, channel 1's text → the error stream (kubectl prints
it: `an error occurred forwarding L -> P: ...`); when the kubelet's side ends, both streams get FIN, so
kubectl closes the local connection instead of waiting. A client RST_STREAM or the websocket's end stops
the request. (A client's FIN on the data stream cannot be passed on: v4 channels do not half-close.)

The session is machinery/spdy.py's, carried in the websocket's messages (spdy.serve_messages), and the
forwarding is streamtranslator.bridge_portforward's: the same code serves kubectl <= 1.29's plain SPDY upgrade.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.websockets import WebSocket

from apiserver.endpoints import streamtranslator
from machinery import spdy

log = logging.getLogger(__name__)

TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
Dial = Callable[[int], Awaitable[Any]]  # port → the kubelet's websocket (raises errors.ApiError)


async def serve_tunnel(websocket: WebSocket, dial: Dial) -> None:
    """The SPDY session in an accepted websocket, until kubectl goes away: machinery/spdy's Session carried in the
    websocket's messages, each requestID's pair of streams forwarded by streamtranslator.bridge_portforward."""
    session = spdy.Session()

    async def receive() -> bytes | None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return None
            data = message.get("bytes")
            if data is None and message.get("text") is not None:
                data = message["text"].encode()
            if data:
                return bytes(data)

    bridge = asyncio.create_task(streamtranslator.bridge_portforward(session, dial))
    try:
        await spdy.serve_messages(session, receive, websocket.send_bytes)
    finally:
        bridge.cancel()
        with contextlib.suppress(BaseException):
            await bridge
        with contextlib.suppress(Exception):
            await websocket.close(1000)
