"""pods/proxy, services/proxy and nodes/proxy: the apiserver as an HTTP proxy to a pod, a Service's endpoint
or a kubelet (upstream pkg/registry/core/{pod,service,node}/rest ProxyREST with ResourceLocation, and
k8s.io/apimachinery/pkg/util/proxy's handler), what `kubectl proxy` users and `kubectl get --raw
/api/v1/nodes/NAME/proxy/metrics` reach.

- The object's name may carry a scheme and a port, as upstream's SplitSchemeNamePort reads it:
  `NAME`, `NAME:PORT` or `SCHEME:NAME:PORT` (scheme http or https; a Service's port by name or number).
- pods/NAME/proxy/PATH → http(s)://<pod IP>[:PORT]/PATH; services/NAME/proxy/PATH → a ready address of the
  Service's Endpoints, at the target port of the Service port asked (the only port when none is asked), chosen
  at random as upstream; none ready → 503 `no endpoints available for service "NAME"`.
  nodes/NAME/proxy/PATH → the kubelet (its port unless another is asked), over the apiserver's kubelet client
  TLS as logs and exec go.
- Only global unicast addresses are dialled (upstream's IsProxyableIP): loopback, link-local and the like
  are "address not allowed" (400), so a pod or Endpoints cannot point the apiserver at itself or at the host.
- The request's method, query, body and headers go on, but not the caller's credentials (upstream's
  authentication filter removes the Authorization header once it has authenticated) nor hop-by-hop headers;
  the answer streams back with its status and headers, CORS headers removed (upstream's corsRemovingTransport).
  An address that does not answer is 503. `X-Forwarded-Uri` tells the backend the path the client asked for.
- Links are rewritten as upstream's proxy Transport (k8s.io/apimachinery/pkg/util/proxy/transport.go) does: a
  redirect's `Location`, and in a text/html answer (gzip or deflate encoded too, re-encoded the same way; any
  other encoding passes untouched) the URL attributes of its tags (a href, img src, form action, ...: upstream's
  atomsToAttrs), found with the stdlib's HTML parser: an absolute path, or a URL naming the backend or the
  client's Host, gets the proxy's path in front (`/x` → `/api/v1/namespaces/NS/pods/NAME/proxy/x`); relative
  URLs and other hosts' stay. The rest of the page is passed on byte for byte. A Location that does not parse
  is 500 InternalError, an HTML body that does not decode 500 (upstream's responder, reason unknown).
- `.../proxy` without the trailing slash (GET, HEAD) is redirected, 301, to `.../proxy/` (upstream's
  proxyRedirectsforRootPath), so that the page's relative links resolve under the proxy.
- Protocol upgrades (a websocket, SPDY) are relayed as upstream's UpgradeAwareHandler relays them: the request
  goes to the backend as it came (less the caller's credentials), the backend's 101 back to the client, and then
  the two connections are spliced byte for byte (machinery/splice.py). A backend that does not answer is 500
  (the dial error), one that answers the upgrade with an error has it passed on, and one that answers neither
  101 nor an error is 500 `invalid upgrade response: status code N`. The apiserver's HTTP protocol hands these
  upgrades to the app rather than to uvicorn's websocket protocol (`UPGRADE_PATH`, apiserver/serving.py).
"""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
import logging
import posixpath
import random
import re
import ssl
import zlib
from collections.abc import AsyncIterator, Callable
from html import escape
from html.parser import HTMLParser
from typing import Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from apiserver import errors
from apiserver.endpoints.handlers import ResourceHandlers
from apiserver.endpoints.proxy import client_tls, kubelet_address
from apiserver.endpoints.request import read_body
from machinery.splice import SpliceSide, SpliceUpgrade, parse_response_head
from machinery.tls import UPGRADE_SCOPE_KEY, Upgrade
from machinery.types import Obj

log = logging.getLogger(__name__)

Endpoint = Callable[..., Any]

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
CONNECT_TIMEOUT = 10.0
# RFC 9110 7.6.1 and what must not travel further: the caller's credentials to the apiserver
_DROPPED_REQUEST = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
                              "upgrade", "host", "authorization", "content-length"})
_DROPPED_RESPONSE = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer",
                               "transfer-encoding", "upgrade", "content-length", "content-encoding"})
# upstream's corsRemovingTransport: the backend's CORS answer is not the apiserver's
_CORS = frozenset({"access-control-allow-credentials", "access-control-allow-headers", "access-control-allow-methods",
                   "access-control-allow-origin"})
# the requests the apiserver's HTTP protocol hands to the app as an Upgrade even for websocket (apiserver/serving.py)
UPGRADE_PATH = re.compile(rb"/api/v1/(?:namespaces/[^/?]+/)?(?:pods|services|nodes)/[^/?]+/proxy(?:[/?]|$)")
# an HTML answer is rewritten in memory, as upstream does, and in a worker thread (the stdlib's parser is Python: about
# 40 ms of CPU for a 110 KiB page of 2,000 links, which the event loop should not wait out); a larger one passes
# untouched
MAX_HTML_BYTES = 8 << 20
UPGRADE_TIMEOUT = 30.0  # dialling the backend and reading its answer to the upgrade
_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE  # upstream dials pods and endpoints over https without verifying them


def split_scheme_name_port(text: str) -> tuple[str, str, str]:
    """upstream net.SplitSchemeNamePort: (scheme, name, port); a bad form is 400."""
    parts = text.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        raise errors.bad_request(f'invalid request "{text}"')
    if not name or scheme not in ("", "http", "https"):
        raise errors.bad_request(f'invalid request "{text}"')
    return scheme, name, port


def proxyable(ip: str) -> str:
    """upstream proxyutil.IsProxyableIP: a global unicast address, else 400 "address not allowed"."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        raise errors.bad_request("address not allowed") from None
    if (address.is_loopback or address.is_link_local or address.is_multicast or address.is_unspecified
            or address.is_reserved):
        raise errors.bad_request("address not allowed")
    return f"[{ip}]" if address.version == 6 else ip


def _rest_of_path(request: Request, name: str) -> str:
    """The part after `{name}/proxy`, "" when there is none (upstream: JoinPreservingTrailingSlash of the
    location and it)."""
    path = request.url.path
    marker = f"/{name}/proxy"
    at = path.find(marker)
    rest = path[at + len(marker):] if at >= 0 else ""
    return rest if not rest or rest.startswith("/") else "/" + rest


async def _pod_location(request: Request, h: ResourceHandlers, namespace: str | None, name: str) -> str:
    scheme, pod_name, port = split_scheme_name_port(name)
    pod = await h.store.get(namespace, pod_name)
    host = proxyable((pod.get("status") or {}).get("podIP") or "")
    return f"{scheme or 'http'}://{host}" + (f":{port}" if port else "")


def _service_port(service: Obj, port: str) -> Obj:
    ports = (service.get("spec") or {}).get("ports") or []
    name = service["metadata"]["name"]
    for p in ports:
        if (port and (p.get("name") == port or str(p.get("port")) == port)) or (not port and len(ports) == 1):
            return dict(p)
    raise errors.unavailable(f'no service port "{port}" found for service "{name}"')


async def _service_location(request: Request, h: ResourceHandlers, namespace: str | None, name: str) -> str:
    scheme, service_name, port = split_scheme_name_port(name)
    service = await h.store.get(namespace, service_name)
    spec = service.get("spec") or {}
    if spec.get("type") == "ExternalName":
        external = spec.get("externalName") or ""
        return f"{scheme or 'http'}://{external}" + (f":{port}" if port else "")
    svc_port = _service_port(service, port)
    endpoints_store = request.app.state.server.stores[("", "endpoints")]
    try:
        endpoints = await endpoints_store.get(namespace, service_name)
    except errors.ApiError as e:
        if e.code == 404:
            raise errors.unavailable(f'no endpoints available for service "{service_name}"') from None
        raise
    candidates: list[tuple[str, int]] = []
    for subset in endpoints.get("subsets") or ():
        for ep_port in subset.get("ports") or ():
            # the Endpoints port carries the Service port's name (unnamed when the Service has one port)
            if (ep_port.get("name") or "") == (svc_port.get("name") or ""):
                candidates.extend((a["ip"], int(ep_port["port"])) for a in subset.get("addresses") or () if a.get("ip"))
    if not candidates:
        raise errors.unavailable(f'no endpoints available for service "{service_name}"')
    ip, target = random.choice(candidates)
    return f"{scheme or 'http'}://{proxyable(ip)}:{target}"


async def _node_location(request: Request, h: ResourceHandlers, namespace: str | None,
                         name: str) -> tuple[str, ssl.SSLContext | None]:
    scheme, node_name, port = split_scheme_name_port(name)
    node = await h.store.get(None, node_name)
    config = request.app.state.server.config
    tls = client_tls(config.kubelet_client_certificate, config.kubelet_client_key,
                      config.kubelet_certificate_authority)
    address = kubelet_address(node, "https" if tls else "http")
    if port:
        address = address.rsplit(":", 1)[0] + f":{port}"
    if scheme:
        address = scheme + address[address.index("://"):]
    return address, tls


# -- links: upstream's proxy Transport (k8s.io/apimachinery/pkg/util/proxy/transport.go) ------------------------

# upstream's atomsToAttrs: the tags whose attributes hold a URL
URL_ATTRS: dict[str, frozenset[str]] = {
    "a": frozenset({"href"}), "applet": frozenset({"codebase"}), "area": frozenset({"href"}),
    "audio": frozenset({"src"}), "base": frozenset({"href"}), "blockquote": frozenset({"cite"}),
    "body": frozenset({"background"}), "button": frozenset({"formaction"}), "command": frozenset({"icon"}),
    "del": frozenset({"cite"}), "embed": frozenset({"src"}), "form": frozenset({"action"}),
    "frame": frozenset({"longdesc", "src"}), "head": frozenset({"profile"}), "html": frozenset({"manifest"}),
    "iframe": frozenset({"longdesc", "src"}), "img": frozenset({"longdesc", "src", "usemap"}),
    "input": frozenset({"src", "usemap", "formaction"}), "ins": frozenset({"cite"}), "link": frozenset({"href"}),
    "object": frozenset({"classid", "codebase", "data", "usemap"}), "q": frozenset({"cite"}),
    "script": frozenset({"src"}), "source": frozenset({"src"}), "video": frozenset({"poster", "src"}),
}


class LinkRewriter:
    """upstream's Transport.rewriteURL for one proxied request: `prefix` is the proxy's path (the request's path
    less the part that went to the backend), `backend` the host:port dialled, `client_host` the request's Host."""

    def __init__(self, prefix: str, backend: str, client_host: str) -> None:
        self.prefix = prefix
        self.backend = backend
        self.client_host = client_host

    def url(self, value: str) -> str:
        """The URL as the client should see it; ValueError if it does not parse (Go's url.Parse would refuse)."""
        parts = urlsplit(value)
        parts.port  # noqa: B018  # a port that is no number raises ValueError, as Go's parser refuses it
        host = parts.netloc.rpartition("@")[2]
        if (host and host not in (self.backend, self.client_host)) or not parts.path.startswith("/"):
            return value  # another host's, or relative: it already resolves where it should
        scheme, netloc = parts.scheme, parts.netloc
        if host != self.client_host:  # upstream sets the Transport's scheme and host, both empty on the apiserver
            scheme, netloc = "", ""
        path = parts.path
        if not path.startswith(self.prefix):
            path = posixpath.normpath(f"{self.prefix}/{path}")  # Go's path.Join cleans the joined path
            if parts.path.endswith("/"):
                path += "/"
        return urlunsplit(SplitResult(scheme, netloc, path, parts.query, parts.fragment))


class _Links(HTMLParser):
    """Finds the start tags whose URL attributes the rewriter changes: (position, length of the raw tag, the tag
    written anew); everything else of the page stays as it was."""

    def __init__(self, rewrite: Callable[[str], str]) -> None:
        super().__init__(convert_charrefs=False)
        self.rewrite = rewrite
        self.edits: list[tuple[tuple[int, int], int, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag(tag, attrs, closed=False)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag(tag, attrs, closed=True)

    def _tag(self, tag: str, attrs: list[tuple[str, str | None]], closed: bool) -> None:
        names = URL_ATTRS.get(tag)
        if names is None:
            return
        changed = False
        out: list[tuple[str, str | None]] = []
        for name, value in attrs:
            if name in names and value is not None:
                try:
                    new = self.rewrite(value)
                except ValueError:
                    new = value  # upstream leaves a URL it cannot parse alone
                changed = changed or new != value
                value = new
            out.append((name, value))
        if changed:
            written = "".join(f" {k}" if v is None else f' {k}="{escape(v, quote=True)}"' for k, v in out)
            self.edits.append((self.getpos(), len(self.get_starttag_text() or ""),
                               f"<{tag}{written}{' /' if closed else ''}>"))


def rewrite_html(text: str, rewrite: Callable[[str], str]) -> str:
    """upstream's rewriteHTML: every URL attribute of the tags in URL_ATTRS through `rewrite`."""
    parser = _Links(rewrite)
    parser.feed(text)
    parser.close()
    if not parser.edits:
        return text
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]  # the parser counts lines by \n too
    out: list[str] = []
    at = 0
    for (line, column), length, tag in parser.edits:
        offset = line_starts[line - 1] + column
        out += [text[at:offset], tag]
        at = offset + length
    out.append(text[at:])
    return "".join(out)


def rewrite_html_body(body: bytes, encoding: str, rewrite: Callable[[str], str]) -> bytes:
    """The body decoded as its Content-Encoding says (gzip, deflate or none), its links rewritten (as UTF-8, as
    upstream assumes; bytes that are not pass through), encoded again the same way. An encoding that does not
    decode is an ApiError 500 (upstream's responder gets the reader's error)."""
    raw_deflate = False
    try:
        if encoding == "gzip":
            try:
                data = gzip.decompress(body)
            except gzip.BadGzipFile as e:
                raise ValueError(f"errorf making gzip reader: {e}") from None
        elif encoding == "deflate":
            try:
                data = zlib.decompress(body)
            except zlib.error:
                data, raw_deflate = zlib.decompress(body, -zlib.MAX_WBITS), True  # raw DEFLATE, as Go's flate writes
        else:
            data = body
    except (ValueError, EOFError, OSError, zlib.error) as e:
        raise errors.ApiError(500, "", str(e) or type(e).__name__) from None
    out = rewrite_html(data.decode("utf-8", "surrogateescape"), rewrite).encode("utf-8", "surrogateescape")
    if encoding == "gzip":
        return gzip.compress(out)
    if encoding == "deflate":
        if raw_deflate:
            compressor = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS)
            return compressor.compress(out) + compressor.flush()
        return zlib.compress(out, zlib.Z_BEST_COMPRESSION)
    return out


def _forwarded_uri(request: Request, prefix: str, rest: str) -> str:
    """upstream's X-Forwarded-Uri: path.Join(PathPrepend, the path asked), its trailing slash kept."""
    uri = posixpath.normpath(f"{prefix}/{rest}") if rest else prefix
    return uri + "/" if request.url.path.endswith("/") and not uri.endswith("/") else uri


async def _forward(request: Request, target: str, tls: ssl.SSLContext | bool, prefix: str, rest: str) -> Response:
    import aiohttp  # on the first proxied request, not with the apiserver (~9 MB), as in proxy.py

    headers = [(k, v) for k, v in request.headers.items()
               if k.lower() not in _DROPPED_REQUEST and not k.lower().startswith("impersonate-")]
    headers.append(("X-Forwarded-Uri", _forwarded_uri(request, prefix, rest)))
    body = await read_body(request) if request.method in ("POST", "PUT", "PATCH", "DELETE") else None
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls),
                                    timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT),
                                    auto_decompress=False)
    try:
        answer = await session.request(request.method, target, headers=headers, data=body, allow_redirects=False)
    except (aiohttp.ClientError, TimeoutError, OSError) as e:
        await session.close()
        log.info("proxy %s: %s", target, e)
        raise errors.unavailable(f"error trying to reach service: {e}") from None

    async def close() -> None:
        answer.release()
        await session.close()

    kept = {k: v for k, v in answer.headers.items() if k.lower() not in _DROPPED_RESPONSE and k.lower() not in _CORS}
    encoding = answer.headers.get("Content-Encoding", "")
    if encoding:
        kept["Content-Encoding"] = encoding  # passed on as it came, not decoded
    links = LinkRewriter(prefix, urlsplit(target).netloc, request.headers.get("host", ""))
    head = b""
    try:
        if location := answer.headers.get("Location"):
            try:
                kept["Location"] = links.url(location)
            except ValueError as e:
                raise errors.internal(f"error trying to parse Location header: {e}") from None
        elif (answer.headers.get("Content-Type", "").split(";", 1)[0].strip().lower() == "text/html"
              and encoding.lower() in ("", "gzip", "deflate")):
            while len(head) <= MAX_HTML_BYTES and (chunk := await answer.content.read(64 << 10)):
                head += chunk
            if len(head) <= MAX_HTML_BYTES:  # the whole page: rewritten
                page = await asyncio.to_thread(rewrite_html_body, head, encoding.lower(), links.url)
                await close()
                return Response(page, status_code=answer.status, headers=kept)
            log.info("proxy %s: an HTML answer over %d bytes passes without its links rewritten", target,
                     MAX_HTML_BYTES)
    except BaseException:
        await close()
        raise

    async def relay() -> AsyncIterator[bytes]:
        if head:
            yield head
        async for chunk in answer.content.iter_chunked(64 << 10):
            yield chunk

    return StreamingResponse(relay(), status_code=answer.status, headers=kept, background=BackgroundTask(close))


# -- protocol upgrades: upstream's UpgradeAwareHandler.tryUpgrade --------------------------------------------------

_DROPPED_UPGRADE = frozenset({"host", "authorization", "keep-alive", "proxy-connection", "te", "trailer",
                              "transfer-encoding"})
MAX_REFUSAL_BYTES = 1 << 20


def _upgrade_request(request: Request, target: str) -> bytes:
    """The client's request as the backend gets it: its method, the target's path and query, its headers (Upgrade
    and Connection too) less the caller's credentials, and X-Forwarded-For (upstream's CloneRequest and
    AppendForwardedForHeaders)."""
    parts = urlsplit(target)
    lines = [f"{request.method} {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1",
             f"Host: {parts.netloc}"]
    forwarded_for = ""
    for name, value in request.headers.items():
        lower = name.lower()
        if lower == "x-forwarded-for":
            forwarded_for = value
        elif lower not in _DROPPED_UPGRADE and not lower.startswith("impersonate-"):
            lines.append(f"{name}: {value}")
    if request.client is not None:
        forwarded_for = f"{forwarded_for}, {request.client.host}" if forwarded_for else request.client.host
    if forwarded_for:
        lines.append(f"X-Forwarded-For: {forwarded_for}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _upgrade(request: Request, target: str, tls: ssl.SSLContext | bool, upgrade: Upgrade) -> Response:
    parts = urlsplit(target)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    backend = SpliceSide(done, handshake=True)
    context = tls if isinstance(tls, ssl.SSLContext) else None
    spliced = False
    try:
        async with asyncio.timeout(UPGRADE_TIMEOUT):
            try:
                await loop.create_connection(lambda: backend, host, port, ssl=context,
                                             server_hostname=host if context is not None else None)
            except (OSError, ssl.SSLError) as e:
                log.info("proxy upgrade %s: %s", target, e)
                raise errors.ApiError(500, "", f"dial tcp {parts.netloc}: {e}") from None
            assert backend.transport is not None and backend.head is not None
            backend.transport.write(_upgrade_request(request, target))
            try:
                status, headers = parse_response_head(await backend.head)
            except (ConnectionError, ValueError) as e:
                raise errors.ApiError(500, "", f"error reading the upgrade response: {e}") from None
            if status == 101:
                spliced = True
                answer = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
                return SpliceUpgrade(upgrade, backend, done, answer)
            if status < 400:
                raise errors.ApiError(500, "", f"invalid upgrade response: status code {status}")
            # refused: the backend's answer goes to the client as it came (upstream writes it to the hijacked
            # connection), and the connection ends
            length = min(int(next((v for k, v in headers if k == "content-length"), "0") or 0), MAX_REFUSAL_BYTES)
            while len(backend.pending) < length and not backend.lost:
                backend.arrived.clear()
                await backend.arrived.wait()
            kept = {k: v for k, v in headers if k not in _DROPPED_RESPONSE}
            return Response(bytes(backend.pending[:length]), status_code=status, headers=kept)
    except TimeoutError:
        raise errors.ApiError(500, "", f"dial tcp {parts.netloc}: i/o timeout") from None
    finally:
        if not spliced and backend.transport is not None:
            backend.transport.close()


def proxy_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    async def handle(request: Request, name: str, namespace: str | None = None) -> Response:
        tls: ssl.SSLContext | bool = False
        if h.info.plural == "pods":
            base = await _pod_location(request, h, namespace, name)
        elif h.info.plural == "services":
            base = await _service_location(request, h, namespace, name)
        else:
            base, node_tls = await _node_location(request, h, namespace, name)
            tls = node_tls if node_tls is not None else False
        if base.startswith("https://") and tls is False:
            tls = _INSECURE
        rest = _rest_of_path(request, name)
        target = base + (rest or "/")
        if request.url.query:
            target += "?" + request.url.query
        upgrade: Upgrade | None = request.scope.get(UPGRADE_SCOPE_KEY)
        if upgrade is not None:
            return await _upgrade(request, target, tls, upgrade)
        if not rest and request.method == "GET":
            # upstream's proxyRedirectsforRootPath: the proxy's root ends in a slash, so relative links resolve
            query = "?" + request.url.query if request.url.query else ""
            return Response(status_code=301, headers={"Location": request.url.path + "/" + query})
        path = request.url.path
        prefix = path[:len(path) - len(rest)] if rest and path.endswith(rest) else path
        return await _forward(request, target, tls, prefix, rest)

    return {method: handle for method in METHODS}
