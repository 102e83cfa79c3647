"""`metrics.k8s.io` through the apiserver: a route to the metrics-server named by
`--metrics-server-url` (minik8s's stand-in for an APIService of upstream's kube-aggregator).

The gate has already authenticated, authorized (RBAC on `nodes.metrics.k8s.io`, `pods.metrics.k8s.io`:
`system:aggregated-metrics-reader` gives them to view, edit and admin) and audited the request; the
apiserver then passes it on as the aggregator's proxy handler does: the same path and query, the user
in `X-Remote-User`, `X-Remote-Group` (and `X-Remote-Extra-*`) headers, over HTTPS presenting
`--proxy-client-cert-file` (the front-proxy client certificate the metrics-server trusts) and verifying
the server against `--metrics-server-certificate-authority`. The group is listed in `/apis` with the
static discovery of the version (nodes and pods, get and list); when the metrics-server cannot be
reached the answer is 503 ServiceUnavailable, as for an unavailable APIService.
"""

from __future__ import annotations

import functools
import logging
import ssl
from typing import Any
from urllib.parse import quote

import aiohttp
from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors

log = logging.getLogger(__name__)

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"

API_GROUP_ENTRY = {"name": GROUP, "versions": [{"groupVersion": GROUP_VERSION, "version": VERSION}],
                   "preferredVersion": {"groupVersion": GROUP_VERSION, "version": VERSION}}
RESOURCE_LIST = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
    "resources": [
        {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": ["get", "list"]},
        {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]},
    ],
}
TIMEOUT = 30.0


@functools.cache
def proxy_tls(cert_file: str | None, key_file: str | None, ca_file: str | None) -> ssl.SSLContext | None:
    if not cert_file and not ca_file:
        return None
    ctx = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not ca_file:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file and key_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def user_headers(user: Any) -> dict[str, str]:
    """The front-proxy request headers of the authenticated user (upstream's requestheader names)."""
    if user is None:
        return {}
    headers = {"X-Remote-User": user.name}
    groups = list(getattr(user, "groups", ()) or ())
    if groups:
        headers["X-Remote-Group"] = ",".join(groups)
    for key, values in (getattr(user, "extra", None) or {}).items():
        headers[f"X-Remote-Extra-{quote(key, safe='')}"] = ",".join(values)
    return headers


class MetricsProxy:
    def __init__(self, url: str, cert_file: str | None, key_file: str | None, ca_file: str | None) -> None:
        self.url = url.rstrip("/")
        self.tls = proxy_tls(cert_file, key_file, ca_file)
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.tls if self.tls is not None else False),
                timeout=aiohttp.ClientTimeout(total=TIMEOUT))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def __call__(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            raise errors.ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the requested "
                                                           f"resource ({request.method} {request.url.path})")
        target = self.url + request.url.path
        if request.url.query:
            target += "?" + request.url.query
        headers = user_headers(request.scope.get("user"))
        accept = request.headers.get("accept")
        if accept:
            headers["Accept"] = accept
        try:
            async with self.session().get(target, headers=headers) as r:
                body = await r.read()
                return Response(body, status_code=r.status,
                                media_type=r.headers.get("Content-Type", "application/json"))
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            log.warning("metrics.k8s.io: %s: %s", target, e)
            raise errors.unavailable(f"the server is currently unable to handle the request "
                                     f"({GROUP_VERSION} is not reachable: {e})") from None
