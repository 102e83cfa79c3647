"""pods/{name}/log and pods/{name}/exec: the apiserver relays them to the kubelet of the pod's node
(upstream pkg/registry/core/pod/rest/log.go and subresources.go, via the node's kubelet endpoint).

The kubelet is found through the Node: `status.addresses` (InternalIP, else Hostname) and
`status.daemonEndpoints.kubeletEndpoint.Port`. With --kubelet-client-certificate/--kubelet-client-key
it is reached over HTTPS presenting that certificate (the kubelet authorizes it), and with
--kubelet-certificate-authority its serving certificate is verified against that CA, for the
address dialled (upstream: without the CA, it is not verified); without them, plain HTTP.

- log: the request's options (container, follow, tailLines, previous, timestamps, sinceSeconds,
  sinceTime, limitBytes) are checked, the container defaulted as upstream does, and the kubelet's
  `/containerLogs/{namespace}/{pod}/{container}` answer streamed back as text/plain — for `follow`
  until the container stops or the client goes away. A kubelet error (a Status) is passed on.
- exec: a websocket (subprotocol v5.channel.k8s.io, as kubectl 1.30+ speaks, or v4/channel.k8s.io)
  is bridged message for message to the kubelet's `/exec/...` websocket, so stdin, stdout, stderr,
  resize and the final Status with the exit code travel unchanged. kubectl <= 1.29 upgrades to SPDY/3.1
  instead (v4.channel.k8s.io): its streams are bridged to the same websocket by streamtranslator.py. A plain
  (non-upgrade) request gets 400 "Upgrade request required", as upstream answers it.

`exec_endpoints` returns the websocket handler under the key "WEBSOCKET" (HTTP routes never see
websocket requests): the router dispatches websocket requests to it, `handler(websocket, name=...,
namespace=...)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlencode

import orjson
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from apiserver import errors
from apiserver.endpoints import streamtranslator
from apiserver.endpoints.handlers import ResourceHandlers
from apiserver.endpoints.request import query
from apiserver.endpoints.responsewriters import json_response
from machinery.types import Obj

log = logging.getLogger(__name__)

Endpoint = Callable[..., Any]

EXEC_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io")
PORTFORWARD_PROTOCOL = "v4.channel.k8s.io"  # the kubelet's (upstream portforward/websocket.go)
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"
KUBELET_CONNECT_TIMEOUT = 10.0
# what a relayed stream may have buffered towards the kubelet before send() waits: websockets' 32 KiB default
# lets about one message through per round trip (bench.streaming_bench: port-forward ÷ direct 0.35-0.47 with it,
# 0.38-0.49 with 4 MiB on the shared 2-core machine)
STREAM_WRITE_LIMIT = 4 << 20
_BOOL_PARAMS = ("follow", "previous", "timestamps")
_INT_PARAMS = ("tailLines", "sinceSeconds", "limitBytes")


# -- finding the pod, its container and its kubelet --------------------------------------------------


def pick_container(pod: Obj, requested: str | None) -> str:
    """The container a log/exec request means (upstream podutil defaulting)."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    names = [c["name"] for c in spec.get("containers") or []]
    others = [c["name"] for c in (spec.get("initContainers") or []) + (spec.get("ephemeralContainers") or [])]
    if requested:
        if requested not in names and requested not in others:
            raise errors.bad_request(f"container {requested} is not valid for pod {name}")
        return requested
    if len(names) == 1:
        return names[0]
    default = ((pod["metadata"].get("annotations") or {}).get(DEFAULT_CONTAINER_ANNOTATION))
    if default in names:
        return str(default)
    listed = " ".join(names)
    raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: [{listed}]")


@functools.cache
def client_tls(cert_file: str | None, key_file: str | None, ca_file: str | None) -> ssl.SSLContext | None:
    """The apiserver's TLS as a client (towards kubelets, aggregated API servers), one context per set of
    files; None: plain HTTP. Without the CA the server is not verified, as upstream."""
    if not cert_file and not ca_file:
        return None
    ctx = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not ca_file:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file and key_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def kubelet_address(node: Obj, scheme: str = "http") -> str:
    """http(s)://<InternalIP>:<kubelet port> of a Node, from its status."""
    status = node.get("status") or {}
    addresses = status.get("addresses") or []
    by_type = {a.get("type"): a.get("address") for a in addresses if a.get("address")}
    address = by_type.get("InternalIP") or by_type.get("Hostname") or by_type.get("ExternalIP")
    port = (((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port"))
    name = node["metadata"]["name"]
    if not address:
        raise errors.ApiError(500, "InternalError", f"node {name} has no address to reach its kubelet")
    if not port:
        raise errors.ApiError(500, "InternalError", f"node {name} reports no kubelet port")
    host = f"[{address}]" if ":" in address else address
    return f"{scheme}://{host}:{port}"


async def _pod_and_kubelet(request: Request | WebSocket, h: ResourceHandlers, namespace: str | None,
                           name: str) -> tuple[Obj, str, ssl.SSLContext | None]:
    pod = await h.store.get(namespace, name)
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        raise errors.bad_request(f"pod {name} does not have a host assigned")
    nodes = request.app.state.server.stores[("", "nodes")]
    try:
        node = await nodes.get(None, node_name)
    except errors.ApiError as e:
        if e.code == 404:
            raise errors.ApiError(500, "InternalError", f'nodes "{node_name}" not found') from e
        raise
    config = request.app.state.server.config
    tls = client_tls(config.kubelet_client_certificate, config.kubelet_client_key,
                      config.kubelet_certificate_authority)
    return pod, kubelet_address(node, "https" if tls else "http"), tls


def _kubelet_error(code: int, body: bytes | bytearray) -> errors.ApiError:
    """The kubelet's answer (a Status, or text) as the error the client gets."""
    with contextlib.suppress(orjson.JSONDecodeError):
        data = orjson.loads(body)
        if isinstance(data, dict) and data.get("kind") == "Status":
            return errors.ApiError(int(data.get("code") or code), str(data.get("reason") or "InternalError"),
                                   str(data.get("message") or ""), data.get("details"))
    text = body.decode(errors="replace").strip() or f"the kubelet answered {code}"
    reason = {400: "BadRequest", 404: "NotFound"}.get(code, "InternalError")
    return errors.ApiError(code, reason, text)


# -- log ------------------------------------------------------------------------------------------------


def _log_params(request: Request) -> dict[str, str]:
    q = query(request)
    out: dict[str, str] = {}
    for key in _BOOL_PARAMS:
        value = q.get(key)
        if value is not None:
            if value.lower() not in ("true", "false", "1", "0", ""):
                raise errors.bad_request(f'{key} must be a boolean, got "{value}"')
            if value.lower() in ("true", "1", ""):
                out[key] = "true"
    for key in _INT_PARAMS:
        value = q.get(key)
        if value in (None, ""):
            continue
        try:
            number = int(value)
        except ValueError:
            raise errors.bad_request(f'{key} must be an integer, got "{value}"') from None
        if number < 0 or (key != "tailLines" and number == 0):
            raise errors.ApiError(422, "Invalid", f'PodLogOptions "" is invalid: {key}: Invalid value: {number}: '
                                  "must be greater than 0" if key != "tailLines" else
                                  f'PodLogOptions "" is invalid: {key}: Invalid value: {number}: must be greater '
                                  "than or equal to 0")
        out[key] = str(number)
    if q.get("sinceTime"):
        if "sinceSeconds" in out:
            raise errors.ApiError(422, "Invalid", 'PodLogOptions "" is invalid: sinceSeconds: Forbidden: '
                                  "at most one of `sinceTime` or `sinceSeconds` may be specified")
        out["sinceTime"] = q["sinceTime"]
    return out


def log_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    async def get(request: Request, name: str, namespace: str | None = None) -> Response:
        params = _log_params(request)
        pod, base, tls = await _pod_and_kubelet(request, h, namespace, name)
        container = pick_container(pod, query(request).get("container"))
        url = f"{base}/containerLogs/{namespace}/{name}/{container}"
        follow = params.get("follow") == "true"
        # aiohttp, the project's one HTTP client (machinery/client.py), imported on the first call to a kubelet: an
        # apiserver that never proxies never loads it (~10 MB). A read may wait forever only when following.
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, connect=KUBELET_CONNECT_TIMEOUT, sock_read=None if follow else 60.0)
        session = aiohttp.ClientSession(timeout=timeout, trust_env=False)
        try:
            upstream = await session.get(url, params=params, ssl=tls if tls is not None else True)
        except (TimeoutError, aiohttp.ClientError) as e:
            await session.close()
            raise errors.ApiError(500, "InternalError", f"Get \"{url}\": {e}") from e
        if upstream.status != 200:
            body = await upstream.read()
            upstream.release()
            await session.close()
            raise _kubelet_error(upstream.status, body)

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.content.iter_any():
                    yield chunk
            except (TimeoutError, aiohttp.ClientError) as e:
                log.info("log stream of %s/%s from %s ended: %s", namespace, name, base, e)

        async def close() -> None:
            upstream.release()
            await session.close()

        return StreamingResponse(relay(), media_type="text/plain", background=BackgroundTask(close))

    return {"GET": get}


# -- exec -----------------------------------------------------------------------------------------------


def _streams(q: Any, pairs: list[tuple[str, str]]) -> None:
    for key in ("stdin", "stdout", "stderr", "tty"):
        value = (q.get(key) or "").lower()
        if value in ("true", "1"):
            pairs.append((key, "true"))
    if not any(k in ("stdin", "stdout", "stderr") for k, _ in pairs):
        raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")


def exec_query(request: Request | WebSocket, container: str) -> str:
    """The kubelet's exec query: the command words, the streams asked for, tty."""
    q = query(request)
    command = q.getlist("command")
    if not command:
        raise errors.bad_request("you must specify at least one command for the container")
    pairs: list[tuple[str, str]] = [("command", c) for c in command]
    _streams(q, pairs)
    pairs.append(("container", container))
    return urlencode(pairs)


def attach_query(request: Request | WebSocket, container: str) -> str:
    """The kubelet's attach query: the streams asked for, tty (upstream PodAttachOptions)."""
    pairs: list[tuple[str, str]] = []
    _streams(query(request), pairs)
    pairs.append(("container", container))
    return urlencode(pairs)


def portforward_ports(request: Request | WebSocket) -> list[int]:
    """`ports` of a pods/portforward (upstream PodPortForwardOptions; required over websockets)."""
    ports: list[int] = []
    for value in query(request).getlist("ports"):
        for part in (x.strip() for x in value.split(",")):
            if not part:
                continue
            try:
                port = int(part)
            except ValueError:
                raise errors.bad_request(f'unable to parse "{part}" as a port: invalid syntax') from None
            if not 0 < port < 65536:
                raise errors.bad_request(f"port {port} must be > 0 and < 65536")
            ports.append(port)
    return ports


async def _deny(websocket: WebSocket, error: errors.ApiError) -> None:
    try:
        await websocket.send_denial_response(json_response(error.status(), error.code))
    except RuntimeError:
        with contextlib.suppress(Exception):
            await websocket.close(1008, error.message[:120])


async def dial_kubelet(conn: Request | WebSocket, h: ResourceHandlers, namespace: str | None, name: str,
                       subresource: str, protocols: list[str], ports: list[int] | None = None) -> Any:
    """The kubelet's websocket for a pod's exec, attach or portforward (upstream ExecLocation,
    AttachLocation, PortForwardLocation in pkg/registry/core/pod/strategy.go): the checks of the request,
    the pod's node, the dial. Raises ApiError with the answer for the client. Shared by every client-side
    transport (websockets here; SPDY translates into the same calls)."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus, WebSocketException

    pod, base, tls = await _pod_and_kubelet(conn, h, namespace, name)
    if subresource == "portforward":
        ports = ports or portforward_ports(conn)
        if not ports:
            raise errors.bad_request('query parameter "port" is required')  # upstream's wording
        path = f"/portForward/{namespace}/{name}?ports=" + ",".join(str(p) for p in ports)
    else:
        phase = (pod.get("status") or {}).get("phase")
        if subresource == "exec" and phase in ("Succeeded", "Failed"):
            raise errors.bad_request(f"cannot exec into a container in a completed pod; current phase is {phase}")
        container = pick_container(pod, query(conn).get("container"))
        q = exec_query(conn, container) if subresource == "exec" else attach_query(conn, container)
        path = f"/{subresource}/{namespace}/{name}/{container}?{q}"
    url = "ws" + base.removeprefix("http") + path
    options: dict[str, Any] = {"ssl": tls} if tls else {}
    try:
        return await connect(url, subprotocols=protocols, max_size=None, compression=None,  # type: ignore[arg-type]
                             open_timeout=KUBELET_CONNECT_TIMEOUT, ping_interval=None, write_limit=STREAM_WRITE_LIMIT,
                             **options)
    except InvalidStatus as e:
        raise _kubelet_error(e.response.status_code, e.response.body or b"") from e
    except (OSError, WebSocketException, TimeoutError) as e:
        raise errors.ApiError(500, "InternalError", f"error dialing backend: {e}") from e


def _remotecommand_endpoints(h: ResourceHandlers, subresource: str) -> dict[str, Endpoint]:
    async def plain(request: Request, name: str, namespace: str | None = None) -> Response:
        if streamtranslator.wants_spdy(request):  # kubectl <= 1.29
            protocol = streamtranslator.negotiate(streamtranslator.offered_protocols(request),
                                                  streamtranslator.REMOTECOMMAND_PROTOCOLS)
            upstream = await dial_kubelet(request, h, namespace, name, subresource,
                                          ["v5.channel.k8s.io", "v4.channel.k8s.io"])
            return streamtranslator.remotecommand_upgrade(request, protocol, upstream)
        pod = await h.store.get(namespace, name)
        pick_container(pod, query(request).get("container"))  # upstream checks it before the upgrade
        raise errors.bad_request("Upgrade request required")

    async def websocket_stream(websocket: WebSocket, name: str, namespace: str | None = None) -> None:
        offered = list(websocket.scope.get("subprotocols") or [])
        protocols = [p for p in EXEC_PROTOCOLS if p in offered]
        try:
            if not protocols:
                raise errors.bad_request(f"unable to upgrade connection: no supported subprotocol in {offered}")
            upstream = await dial_kubelet(websocket, h, namespace, name, subresource, protocols)
        except errors.ApiError as e:
            await _deny(websocket, e)
            return
        await websocket.accept(subprotocol=upstream.subprotocol)
        await _bridge(websocket, upstream)

    return {"GET": plain, "POST": plain, "WEBSOCKET": websocket_stream}


def exec_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    return _remotecommand_endpoints(h, "exec")


def attach_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    return _remotecommand_endpoints(h, "attach")


def portforward_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    """pods/portforward: `v4.channel.k8s.io` with `?ports=` (the official clients) relayed verbatim to the
    kubelet; `SPDY/3.1+portforward.k8s.io` (kubectl ≥ 1.31, 1.30 with KUBECTL_PORT_FORWARD_WEBSOCKETS=true:
    SPDY/3.1 tunnelled in websocket messages) served by endpoints/portforward.py, a kubelet websocket per
    forwarded connection."""

    async def plain(request: Request, name: str, namespace: str | None = None) -> Response:
        await h.store.get(namespace, name)
        if streamtranslator.wants_spdy(request):  # kubectl <= 1.29: the ports come per connection
            protocol = streamtranslator.negotiate(streamtranslator.offered_protocols(request),
                                                  streamtranslator.PORTFORWARD_PROTOCOLS)

            async def dial(port: int) -> Any:
                return await dial_kubelet(request, h, namespace, name, "portforward", [PORTFORWARD_PROTOCOL], [port])

            return streamtranslator.portforward_upgrade(protocol, dial)
        portforward_ports(request)
        raise errors.bad_request("Upgrade request required")

    async def websocket_portforward(websocket: WebSocket, name: str, namespace: str | None = None) -> None:
        from apiserver.endpoints.portforward import TUNNEL_PROTOCOL, serve_tunnel

        offered = list(websocket.scope.get("subprotocols") or [])
        try:
            if TUNNEL_PROTOCOL in offered:
                await h.store.get(namespace, name)  # NotFound before the upgrade; the rest per connection
                await websocket.accept(subprotocol=TUNNEL_PROTOCOL)

                async def dial(port: int) -> Any:
                    return await dial_kubelet(websocket, h, namespace, name, "portforward", [PORTFORWARD_PROTOCOL],
                                              [port])

                await serve_tunnel(websocket, dial)
                return
            if offered and PORTFORWARD_PROTOCOL not in offered:
                raise errors.bad_request(f"unable to upgrade connection: no supported subprotocol in {offered}")
            upstream = await dial_kubelet(websocket, h, namespace, name, "portforward", [PORTFORWARD_PROTOCOL])
        except errors.ApiError as e:
            await _deny(websocket, e)
            return
        await websocket.accept(subprotocol=PORTFORWARD_PROTOCOL if offered else None)
        await _bridge(websocket, upstream)

    return {"GET": plain, "POST": plain, "WEBSOCKET": websocket_portforward}


async def _bridge(client: WebSocket, upstream: Any) -> None:
    """Relay messages both ways until either side closes; the kubelet's close ends the client's."""

    async def from_client() -> None:
        while True:
            message = await client.receive()
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            data = message.get("bytes")
            if data is None and message.get("text") is not None:
                data = message["text"].encode()
            if data is not None:
                await upstream.send(data)

    async def from_kubelet() -> None:
        async for message in upstream:
            await client.send_bytes(message if isinstance(message, bytes) else message.encode())

    up = asyncio.create_task(from_client())
    down = asyncio.create_task(from_kubelet())
    try:
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        up.cancel()
        with contextlib.suppress(BaseException):
            await up
        if down.done():
            with contextlib.suppress(Exception):
                down.result()
            with contextlib.suppress(Exception):
                await client.close(1000)
        else:
            down.cancel()
            with contextlib.suppress(BaseException):
                await down
        with contextlib.suppress(Exception):
            await upstream.close()
