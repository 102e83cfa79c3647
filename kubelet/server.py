"""The kubelet's HTTP endpoint (upstream pkg/kubelet/server): what the apiserver proxies to.

- `GET /healthz` → ok
- `GET /pods` → the PodList of the pods this kubelet runs
- `GET /containerLogs/{namespace}/{pod}/{container}?follow&tailLines&previous&timestamps&sinceSeconds
  &sinceTime&limitBytes` → the container's log as text/plain, streamed while `follow` and the
  container runs
- `GET /exec/{namespace}/{pod}/{container}?command=...&stdin&stdout&stderr&tty` (websocket,
  subprotocols v5.channel.k8s.io / v4.channel.k8s.io / channel.k8s.io) → the kubelet asks the
  runtime for an Exec URL (CRI Exec) and relays the client's websocket to the runtime's streaming
  server, offering the client's subprotocols and passing frames both ways verbatim (upstream's
  UpgradeAwareProxy): every binary message starts with its channel (0 stdin, 1 stdout, 2 stderr,
  3 the final Status with the exit code, 4 terminal resize; in v5, 255 closes a stream). A runtime
  without v5 (containerd 1.6) gets v4 offered too and the kubelet translates a v5 client's frames
  (kubelet/streaming.py, which says what v4 cannot carry: the end of stdin).
- `GET /attach/{namespace}/{pod}/{container}?stdin&stdout&stderr&tty` (websocket, the same subprotocols and
  frames) → CRI Attach: the container's own streams (its main process), relayed the same way.
- `GET /portForward/{namespace}/{pod}?ports=P[,Q]` (websocket, subprotocol v4.channel.k8s.io or none) →
  CRI PortForward on the pod's sandbox: the runtime's streaming server reaches the ports inside the pod's
  network namespace (upstream portforward/websocket.go: per port a data channel 2i and an error channel
  2i+1, the server's first frame on each the port as two little-endian bytes). The kubelet does not relay
  frames: it makes the runtime's handshake with the client's key, answers with the runtime's 101 and
  splices the two connections byte for byte (upstream's kubelet proxies the upgrade the same way).

Errors are `Status` objects with the HTTP code, which the apiserver passes on to kubectl.

With --tls-cert-file/--tls-private-key-file the server speaks HTTPS; with --client-ca-file it also
wants a client certificate from that CA (upstream's x509 authentication with anonymous requests
off): none → 401. Members of system:masters — the apiserver's kubelet-client identity,
kube-apiserver-kubelet-client, is one, as kubeadm issues it — are authorized at once; anyone else as
the apiserver answers a SubjectAccessReview for the path's subresource of this node
(kubelet/server_auth.py: `nodes/stats` for /stats, `nodes/metrics` for /metrics, `nodes/proxy` for the
rest), as upstream's webhook authorizer; refused → 403 `Forbidden (user=..., verb=get, resource=nodes,
subresource=proxy)`. `/healthz` stays open, for health checks.

- `GET /metrics` → the kubelet's own metrics (runtime operations, pod start-up: kubelet/metrics.py).
- `GET /stats/summary` → the stats/v1alpha1 Summary (node and pods' cpu and memory, from their cgroups or the
  runtime's CRI stats: kubelet/stats/); `GET /metrics/resource` → the same figures as Prometheus text.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

import websockets
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import connect

from kubelet import metrics as kubelet_metrics
from kubelet.container.runtime import ContainerState, ContainerStatus, LogOptions, Runtime
from kubelet.pod_workers import PodWorkers
from kubelet.server_auth import SubjectAccessReviewer
from kubelet.stats.summary import SummaryProvider, resource_metrics
from kubelet.status_manager import StatusManager
from kubelet.streaming import (
    EXEC_PROTOCOLS,
    PORTFORWARD_PROTOCOL,
    V5,
    V5ToV4,
    relay,
    runtime_subprotocols,
    translating,
)
from machinery.api.core_v1 import Pod
from machinery.cri.errors import CriError
from machinery.delegated_auth import authenticate
from machinery.informer import Informer
from machinery.splice import SpliceSide, SpliceUpgrade, handshake_request, parse_response_head
from machinery.status import failure
from machinery.tls import UPGRADE_SCOPE_KEY, TLSHttpProtocol, Upgrade, server_ssl_context, tls_options


class KubeletView(Protocol):
    """What the server reads of the kubelet: no more (and no import of kubelet.kubelet, which imports this)."""

    config: Any  # tls_cert_file, tls_private_key_file, client_ca_file
    pod_informer: Informer[Pod] | None
    workers: PodWorkers
    status_manager: StatusManager
    ready: asyncio.Event
    summary: SummaryProvider
    reviewer: SubjectAccessReviewer | None

    @property
    def runtime(self) -> Runtime: ...  # read-only, so a Kubelet holding a particular Runtime fits

log = logging.getLogger(__name__)


class KubeletError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        self.code = code
        self.reason = reason
        self.message = message
        super().__init__(message)

    def status(self) -> dict[str, Any]:
        return failure(self.code, self.reason, self.message)

    def response(self) -> Response:
        return JSONResponse(self.status(), status_code=self.code)


def _flag(request: Request | WebSocket, *names: str) -> bool:
    for name in names:
        value = request.query_params.get(name)
        if value is not None:
            return value.lower() in ("1", "true", "yes", "")
    return False


def _int(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise KubeletError(400, "BadRequest", f'{name} must be an integer, got "{raw}"') from None
    if value < 0:
        raise KubeletError(400, "BadRequest", f"{name} must not be negative")
    return value


_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
# upstream kubelet's subresource of nodes per path prefix (the rest is "proxy")
_SUBRESOURCES = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"), ("/spec", "spec"))
PUBLIC_PATHS = frozenset({"/healthz"})
STREAM_WRITE_LIMIT = 4 << 20  # buffered towards the runtime before send() waits (websockets' default: 32 KiB)

Scope = dict[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class ClientCertificateAuth:
    """The kubelet's authentication and authorization filter (upstream pkg/kubelet/server/auth.go)."""

    def __init__(self, app: ASGI, reviewer: SubjectAccessReviewer | None = None) -> None:
        self.app = app
        self.reviewer = reviewer

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket") or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        user = await authenticate(scope, self.reviewer.tokens if self.reviewer is not None else None)
        error: KubeletError | None = None
        if user is None:
            error = KubeletError(401, "Unauthorized", "Unauthorized")
        elif not user.is_master:
            verb = _VERBS.get(scope.get("method", "GET"), "get") if kind == "http" else "get"
            sub = next((s for prefix, s in _SUBRESOURCES if scope["path"].startswith(prefix)), "proxy")
            if self.reviewer is None or not await self.reviewer.allowed(user, verb, sub):
                log.info("refused %s %s to %s", verb, scope["path"], user.name)
                error = KubeletError(403, "Forbidden",
                                     f"Forbidden (user={user.name}, verb={verb}, resource=nodes, subresource={sub})")
        if error is None:
            await self.app(scope, receive, send)
        elif kind == "websocket":
            await _deny(WebSocket(scope, receive, send), error)
        else:
            await error.response()(scope, receive, send)


class KubeletHttpProtocol(TLSHttpProtocol):
    """The kubelet's HTTP protocol (plain or TLS): port-forward's websocket upgrades reach `portforward_http`,
    which splices them to the runtime's streaming server."""

    raw_websocket_prefixes = (b"/portForward/",)


class KubeletServer:
    def __init__(self, kubelet: KubeletView) -> None:
        self.k = kubelet
        config = kubelet.config
        if bool(config.tls_cert_file) != bool(config.tls_private_key_file):
            raise SystemExit("kubelet: --tls-cert-file and --tls-private-key-file go together")
        if config.client_ca_file and not config.tls_cert_file:
            raise SystemExit("kubelet: --client-ca-file needs --tls-cert-file (client certificates come with TLS)")
        self.app: ASGI = Starlette(routes=[
            Route("/healthz", self.healthz),
            Route("/pods", self.pods),
            Route("/debug/pods", self.debug_pods),
            Route("/stats/summary", self.stats_summary),
            Route("/metrics/resource", self.metrics_resource),
            Route("/metrics", self.metrics),
            Route("/containerLogs/{namespace}/{pod}/{container}", self.container_logs),
            WebSocketRoute("/exec/{namespace}/{pod}/{container}", self.exec_ws),
            Route("/exec/{namespace}/{pod}/{container}", self.exec_http, methods=["GET", "POST"]),
            WebSocketRoute("/attach/{namespace}/{pod}/{container}", self.attach_ws),
            Route("/attach/{namespace}/{pod}/{container}", self.exec_http, methods=["GET", "POST"]),
            WebSocketRoute("/portForward/{namespace}/{pod}", self.portforward_ws),
            Route("/portForward/{namespace}/{pod}", self.portforward_http, methods=["GET", "POST"]),
        ])
        if config.client_ca_file:
            self.app = ClientCertificateAuth(self.app, kubelet.reviewer)

    def uvicorn_options(self) -> dict[str, Any]:
        """How uvicorn serves this app: plain HTTP, or TLS (asking for client certificates with a client CA)."""
        if not self.k.config.tls_cert_file or not self.k.config.tls_private_key_file:
            return {"http": KubeletHttpProtocol, "ws": "websockets-sansio"}
        context = server_ssl_context(self.k.config.tls_cert_file, self.k.config.tls_private_key_file,
                                     self.k.config.client_ca_file)
        return tls_options(context, KubeletHttpProtocol)

    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def pods(self, request: Request) -> Response:
        items = [p.to_dict() for p in self.k.pod_informer.list()] if self.k.pod_informer else []
        return JSONResponse({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    async def debug_pods(self, request: Request) -> Response:
        """The pod workers: completed syncs, waiting reasons, whether a deletion finished (tests wait on it)."""
        workers = {
            uid: {"name": w.name, "syncs": w.syncs, "failures": w.failures, "terminated": w.terminated,
                  "waiting": {k: v[0] for k, v in self.k.runtime.waiting(uid).items()},
                  "podIP": self.k.runtime.get_pod_status(uid).ip or None}
            for uid, w in self.k.workers.workers.items()
        }
        return JSONResponse({"ready": self.k.ready.is_set(), "workers": workers,
                             "statusWrites": self.k.status_manager.writes})

    async def stats_summary(self, request: Request) -> Response:
        try:
            return JSONResponse(await self.k.summary.get())
        except (CriError, OSError) as e:
            return KubeletError(500, "InternalError", f"failed to get the node's stats summary: {e}").response()

    async def metrics(self, request: Request) -> Response:
        """The kubelet's own metrics (kubelet/metrics.py)."""
        return Response(kubelet_metrics.render(), media_type=kubelet_metrics.CONTENT_TYPE)

    async def metrics_resource(self, request: Request) -> Response:
        summary: dict[str, Any] | None
        try:
            summary = await self.k.summary.get()
        except (CriError, OSError) as e:
            log.warning("resource metrics: %s", e)
            summary = None
        return PlainTextResponse(resource_metrics(summary), media_type="text/plain; version=0.0.4")

    # -- lookups --------------------------------------------------------------------------------

    def _pod(self, namespace: str, name: str) -> Pod:
        pod = self.k.pod_informer.get(name, namespace) if self.k.pod_informer else None
        if pod is None:
            raise KubeletError(404, "NotFound", f'pods "{name}" not found')
        return pod

    def _container(self, pod: Pod, name: str) -> None:
        spec = pod.spec  # every kind of container: regular, init and ephemeral (upstream's VisitContainers)
        names = [c.name for c in [*spec.containers, *(spec.init_containers or []), *(spec.ephemeral_containers or [])]
                 ] if spec else []
        if name not in names:
            raise KubeletError(400, "BadRequest", f"container {name} is not valid for pod {pod.metadata.name}")

    def _waiting_message(self, pod: Pod, container: str) -> str:
        waiting = self.k.runtime.waiting(pod.metadata.uid or "")
        reason = waiting[container][0] if container in waiting else "ContainerCreating"
        return f'container "{container}" in pod "{pod.metadata.name}" is waiting to start: {reason}'

    # -- logs -------------------------------------------------------------------------------------

    async def container_logs(self, request: Request) -> Response:
        try:
            return await self._container_logs(request)
        except KubeletError as e:
            return e.response()

    async def _container_logs(self, request: Request) -> Response:
        p = request.path_params
        pod = self._pod(p["namespace"], p["pod"])
        self._container(pod, p["container"])
        follow = _flag(request, "follow")
        previous = _flag(request, "previous")
        timestamps = _flag(request, "timestamps")
        tail = _int(request, "tailLines")
        limit = _int(request, "limitBytes")
        since_seconds = _int(request, "sinceSeconds")
        since: float | None = None
        if since_seconds is not None:
            since = dt.datetime.now(dt.UTC).timestamp() - since_seconds
        elif request.query_params.get("sinceTime"):
            try:
                since = dt.datetime.fromisoformat(request.query_params["sinceTime"].replace("Z", "+00:00")).timestamp()
            except ValueError:
                raise KubeletError(400, "BadRequest", "sinceTime must be RFC 3339") from None
        instances = self.k.runtime.get_pod_status(pod.metadata.uid or "").instances(p["container"])
        target: ContainerStatus | None
        if previous:
            target = instances[1] if len(instances) > 1 else None
            if target is None:
                raise KubeletError(400, "BadRequest", f'previous terminated container "{p["container"]}" in pod '
                                                      f'"{pod.metadata.name}" not found')
        else:
            target = instances[0] if instances else None
            if target is None or target.state == ContainerState.CREATED:
                raise KubeletError(400, "BadRequest", self._waiting_message(pod, p["container"]))
        options = LogOptions(follow=follow and not previous, tail_lines=tail, since=since, timestamps=timestamps,
                             limit_bytes=limit)
        chunks = self.k.runtime.get_container_logs(target, options)
        try:  # the first chunk now: a log file that cannot be read is an error, not an empty answer
            first = await anext(chunks, b"")
        except OSError as e:
            raise KubeletError(500, "InternalError", f"failed to read the log of container {target.name}: "
                                                     f"{e}") from None

        async def body() -> AsyncIterator[bytes]:
            try:
                if first:
                    yield first
                async for data in chunks:
                    yield data
            except (OSError, CriError) as e:
                log.warning("logs of %s: %s", target.id[:12], e)
            finally:
                with contextlib.suppress(Exception):
                    await chunks.aclose()  # type: ignore[attr-defined]

        return StreamingResponse(body(), media_type="text/plain")

    # -- exec -------------------------------------------------------------------------------------

    async def exec_http(self, request: Request) -> Response:
        return KubeletError(400, "BadRequest", "Upgrade request required").response()

    async def exec_ws(self, websocket: WebSocket) -> None:
        command = websocket.query_params.getlist("command")
        tty = _flag(websocket, "tty")

        async def url(container_id: str) -> str:
            if not command:
                raise KubeletError(400, "BadRequest", "you must specify at least one command for the container")
            stdin = _flag(websocket, "stdin", "input")
            return await self.k.runtime.get_exec(container_id, command, tty=tty, stdin=stdin,
                                                 stdout=_flag(websocket, "stdout", "output") or tty,
                                                 stderr=_flag(websocket, "stderr", "error") and not tty)

        await self._remotecommand(websocket, "exec", url)

    async def attach_ws(self, websocket: WebSocket) -> None:
        """Attach to the container's main process (upstream server.go getAttach → kubelet.GetAttach)."""
        tty = _flag(websocket, "tty")

        async def url(container_id: str) -> str:
            stdin = _flag(websocket, "stdin", "input")
            stdout = _flag(websocket, "stdout", "output")
            stderr = _flag(websocket, "stderr", "error") and not tty
            if not (stdin or stdout or stderr):
                raise KubeletError(400, "BadRequest", "you must specify at least 1 of stdin, stdout, stderr")
            return await self.k.runtime.get_attach(container_id, tty=tty, stdin=stdin, stdout=stdout or tty,
                                                   stderr=stderr)

        await self._remotecommand(websocket, "attach", url)

    async def _remotecommand(self, websocket: WebSocket, what: str,
                             get_url: Callable[[str], Awaitable[str]]) -> None:
        """exec and attach: the runtime's URL for the running container, then the relay (with v5 → v4 when the
        runtime speaks only v4)."""
        offered = list(websocket.scope.get("subprotocols") or [])
        protocol = next((p for p in EXEC_PROTOCOLS if p in offered), None)
        p = websocket.path_params
        tty = _flag(websocket, "tty")
        try:
            if protocol is None:
                raise KubeletError(400, "BadRequest", f"no supported subprotocol among {offered}; "
                                                      f"expected one of {list(EXEC_PROTOCOLS)}")
            pod = self._pod(p["namespace"], p["pod"])
            self._container(pod, p["container"])
            instances = self.k.runtime.get_pod_status(pod.metadata.uid or "").instances(p["container"])
            if not instances or not instances[0].running:
                if what == "attach":  # upstream kubelet.GetAttach finds only running containers
                    raise KubeletError(500, "InternalError", f'container not found ("{p["container"]}")')
                raise KubeletError(400, "BadRequest", f'container "{p["container"]}" in pod "{pod.metadata.name}" '
                                                      "is not running")
            url = await get_url(instances[0].id)
            upstream = await connect(
                _ws_url(url), subprotocols=[websockets.Subprotocol(o) for o in runtime_subprotocols(offered)],
                max_size=None, ping_interval=None, open_timeout=30, write_limit=STREAM_WRITE_LIMIT,
                compression=None)
        except KubeletError as e:
            await _deny(websocket, e)
            return
        except CriError as e:
            await _deny(websocket, KubeletError(500, "InternalError", f"{what}: {e.message}"))
            return
        except websockets.exceptions.InvalidStatus as e:
            await _deny(websocket, _runtime_refusal(what, e.response.status_code, e.response.body or b""))
            return
        except (OSError, websockets.exceptions.WebSocketException, TimeoutError) as e:
            await _deny(websocket, KubeletError(500, "InternalError", f"{what}: the runtime's streaming server: {e}"))
            return
        translate = V5ToV4(tty) if translating(offered, upstream.subprotocol) else None
        await websocket.accept(subprotocol=V5 if translate else upstream.subprotocol or protocol)
        try:
            await relay(websocket, upstream, translate)
        finally:
            await upstream.close()

    # -- port-forward -----------------------------------------------------------------------------

    async def _portforward_url(self, offered: list[str], path_params: dict[str, Any], query: Any) -> str:
        """The runtime's port-forward URL for the pod's sandbox, `?ports=` appended (upstream server.go
        getPortForward); refusals raise KubeletError."""
        if offered and PORTFORWARD_PROTOCOL not in offered:
            raise KubeletError(400, "BadRequest", f"no supported subprotocol among {offered}; "
                                                  f"expected one of {[PORTFORWARD_PROTOCOL]}")
        ports = portforward_ports(query.getlist("ports"))
        pod = self._pod(path_params["namespace"], path_params["pod"])
        sandboxes = [sb for sb in self.k.runtime.get_pod_status(pod.metadata.uid or "").sandboxes if sb.ready]
        if not sandboxes:
            raise KubeletError(500, "InternalError", f'failed to find sandboxID for pod "{pod.metadata.name}"')
        try:
            url = await self.k.runtime.get_port_forward(sandboxes[0].id, ports)
        except CriError as e:
            raise KubeletError(500, "InternalError", f"portforward: {e.message}") from e
        return url + ("&" if "?" in url else "?") + "ports=" + ",".join(str(port) for port in ports)

    async def portforward_ws(self, websocket: WebSocket) -> None:
        """Port-forward into the pod's network namespace, relayed frame by frame (a websocket upgrade reaches
        this only on a server without the splice: `portforward_http` serves the kubelet's own)."""
        offered = list(websocket.scope.get("subprotocols") or [])
        try:
            url = await self._portforward_url(offered, websocket.path_params, websocket.query_params)
            upstream = await connect(_ws_url(url), subprotocols=[websockets.Subprotocol(PORTFORWARD_PROTOCOL)],
                                     max_size=None, ping_interval=None, open_timeout=30, write_limit=STREAM_WRITE_LIMIT,
                                     compression=None)
        except KubeletError as e:
            await _deny(websocket, e)
            return
        except websockets.exceptions.InvalidStatus as e:
            await _deny(websocket, _runtime_refusal("portforward", e.response.status_code, e.response.body or b""))
            return
        except (OSError, websockets.exceptions.WebSocketException, TimeoutError) as e:
            await _deny(websocket, KubeletError(500, "InternalError", f"portforward: the runtime's streaming server: "
                                                                      f"{e}"))
            return
        await websocket.accept(subprotocol=PORTFORWARD_PROTOCOL if offered else None)
        try:
            await relay(websocket, upstream)
        finally:
            await upstream.close()

    async def portforward_http(self, request: Request) -> Response:
        """Port-forward's websocket spliced to the runtime's streaming server (upstream's kubelet proxies the
        upgrade with its UpgradeAwareHandler): the kubelet makes the runtime's handshake with the client's own
        key, answers the client's upgrade with the runtime's 101, then copies bytes both ways; frames are
        neither decoded nor re-framed here (they are the same websocket protocol on both sides)."""
        upgrade: Upgrade | None = request.scope.get(UPGRADE_SCOPE_KEY)
        if upgrade is None or upgrade.token != "websocket":
            return await self.exec_http(request)
        offered = [p.strip() for v in request.headers.getlist("sec-websocket-protocol") for p in v.split(",")
                   if p.strip()]
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            url = await self._portforward_url(offered, request.path_params, request.query_params)
            runtime, answer = await dial_runtime_websocket(url, request.headers.get("sec-websocket-key", ""),
                                                           PORTFORWARD_PROTOCOL if offered else None, done)
        except KubeletError as e:
            return e.response()
        return SpliceUpgrade(upgrade, runtime, done, answer)


async def dial_runtime_websocket(url: str, key: str, protocol: str | None, done: asyncio.Future[None],
                                 what: str = "portforward", timeout: float = 30.0,
                                 ) -> tuple[SpliceSide, list[tuple[bytes, bytes]]]:
    """The runtime's side of a splice, its handshake answered 101 (with the client's `key`), and the headers of
    that 101 the client needs; a refusal (its Status), an unreachable server or a garbled answer raise
    KubeletError, the connection closed."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise KubeletError(500, "InternalError", f"{what}: the runtime's streaming URL {url} is not plain http")
    loop = asyncio.get_running_loop()
    runtime = SpliceSide(done, handshake=True)
    try:
        async with asyncio.timeout(timeout):
            await loop.create_connection(lambda: runtime, parts.hostname, parts.port or 80)
            assert runtime.transport is not None and runtime.head is not None
            runtime.transport.write(handshake_request(f"{parts.path}?{parts.query}", parts.netloc, key, protocol))
            status, headers = parse_response_head(await runtime.head)
            if status != 101:
                length = int(next((v for k, v in headers if k == "content-length"), "0") or 0)
                while len(runtime.pending) < length and not runtime.lost:  # the refusal's body
                    runtime.arrived.clear()
                    await runtime.arrived.wait()
                raise _runtime_refusal(what, status, bytes(runtime.pending[:length]))
    except BaseException as e:
        if runtime.transport is not None:
            runtime.transport.close()
        if isinstance(e, (OSError, ValueError, TimeoutError)):
            raise KubeletError(500, "InternalError", f"{what}: the runtime's streaming server: "
                                                     f"{e or type(e).__name__}") from e
        raise
    answer = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers
              if k in ("upgrade", "connection", "sec-websocket-accept", "sec-websocket-protocol")]
    return runtime, answer


def portforward_ports(values: list[str]) -> list[int]:
    """The `ports` of a port-forward (upstream portforward.NewV4Options): required, each 1..65535."""
    ports: list[int] = []
    for value in values:
        for part in (x.strip() for x in value.split(",")):
            if not part:
                continue
            try:
                port = int(part)
            except ValueError:
                raise KubeletError(400, "BadRequest", f'unable to parse "{part}" as a port: invalid syntax') from None
            if not 0 < port < 65536:
                raise KubeletError(400, "BadRequest", f"port {port} must be > 0 and < 65536")
            ports.append(port)
    if not ports:
        raise KubeletError(400, "BadRequest", 'query parameter "port" is required')
    return ports


def _runtime_refusal(what: str, status_code: int, body: bytes | bytearray) -> KubeletError:
    """The runtime's streaming server refused the upgrade: its Status (or text) as the kubelet's error."""
    try:
        status = json.loads(body)
        if isinstance(status, dict) and status.get("message"):
            return KubeletError(int(status.get("code") or status_code),
                                str(status.get("reason") or "InternalError"), f"{what}: {status['message']}")
    except ValueError:
        pass
    text = body.decode(errors="replace").strip() or f"HTTP {status_code}"
    return KubeletError(500, "InternalError", f"{what}: the runtime's streaming server: {text}")


def _ws_url(url: str) -> str:
    if url.startswith("http://"):
        return "ws://" + url[len("http://"):]
    if url.startswith("https://"):
        return "wss://" + url[len("https://"):]
    return url


async def _deny(websocket: WebSocket, error: KubeletError) -> None:
    """Refuse the upgrade with an HTTP answer carrying the Status (or close, if the server cannot)."""
    try:
        await websocket.send_denial_response(error.response())
    except RuntimeError:
        with contextlib.suppress(Exception):
            await websocket.close(1008, error.message[:120])
