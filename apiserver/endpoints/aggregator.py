"""API groups served by other servers behind the apiserver: minik8s's stand-in for upstream's
kube-aggregator (staging/src/k8s.io/kube-aggregator/pkg/apiserver/handler_proxy.go), with one APIService per
group given by flags instead of APIService objects:

- `metrics.k8s.io/v1beta1` at `--metrics-server-url` (the metrics-server: nodes and pods, get and list);
- `road.minik8s.io/v1alpha1` at `--road-server-url` (the road server, python -m road: the road of an
  object, get and watch).

The gate has already authenticated, authorized (RBAC on e.g. `pods.metrics.k8s.io`,
`deployments.road.minik8s.io`: `system:aggregated-metrics-reader` and `system:aggregated-road-reader` give
them to view, edit and admin) and audited the request; the apiserver then passes it on as the aggregator's
proxy handler does: the same path and query, the user in `X-Remote-User`, `X-Remote-Group` (and
`X-Remote-Extra-*`) headers, over HTTPS presenting `--proxy-client-cert-file` (the front-proxy client
certificate the server trusts) and verifying the server against the group's CA flag. A watch
(`?watch=true`) is streamed as the server sends it, for as long as both ends keep it. Each group is listed in
`/apis` with the static discovery of its version; when its server cannot be reached the answer is 503
ServiceUnavailable, as for an unavailable APIService.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from apiserver import errors
from apiserver.endpoints.proxy import client_tls
from apiserver.requestinfo import of_scope
from machinery.api.resources import RESOURCES

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)

TIMEOUT = 30.0


@dataclass(frozen=True)
class APIGroupVersion:
    """What the apiserver says about a group served elsewhere: discovery of its one version."""

    group: str
    version: str
    resources: tuple[dict[str, Any], ...]

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def api_group_entry(self) -> dict[str, Any]:
        gv = {"groupVersion": self.group_version, "version": self.version}
        return {"name": self.group, "versions": [gv], "preferredVersion": gv}

    @property
    def resource_list(self) -> dict[str, Any]:
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": self.group_version,
                "resources": [dict(r) for r in self.resources]}

    @property
    def namespaced(self) -> frozenset[str]:
        return frozenset(r["name"] for r in self.resources if r.get("namespaced"))


METRICS = APIGroupVersion("metrics.k8s.io", "v1beta1", (
    {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": ["get", "list"]},
    {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]},
))


def _road_resources() -> tuple[dict[str, Any], ...]:
    """The road server's resources: a Road for any resource the API serves, by its plural (as road/api.py)."""
    seen: dict[str, bool] = {}
    for info in RESOURCES:
        if not info.virtual and "get" in info.verbs:
            seen.setdefault(info.plural, info.namespaced)
    return tuple({"name": plural, "singularName": "", "namespaced": namespaced, "kind": "Road",
                  "verbs": ["get", "watch"]} for plural, namespaced in sorted(seen.items()))


ROAD = APIGroupVersion("road.minik8s.io", "v1alpha1", _road_resources())


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


class Proxy:
    """The proxy to one group's server (upstream's proxyHandler of one APIService)."""

    def __init__(self, api: APIGroupVersion, url: str, cert_file: str | None, key_file: str | None,
                 ca_file: str | None) -> None:
        self.api = api
        self.url = url.rstrip("/")
        self.tls = client_tls(cert_file, key_file, ca_file)  # the front-proxy client certificate
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            import aiohttp  # on the first proxied request, not with the apiserver (~9 MB), as in proxy.py

            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.tls if self.tls is not None else False))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _unavailable(self, target: str, e: BaseException) -> errors.ApiError:
        log.warning("%s: %s: %s", self.api.group, target, e)
        return errors.unavailable(f"the server is currently unable to handle the request "
                                  f"({self.api.group_version} is not reachable: {e})")

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
        if of_scope(request.scope).long_running:
            return await self._stream(target, headers)
        import aiohttp

        try:
            async with self.session().get(target, headers=headers,
                                          timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as r:
                body = await r.read()
                return Response(body, status_code=r.status,
                                media_type=r.headers.get("Content-Type", "application/json"))
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise self._unavailable(target, e) from None

    async def _stream(self, target: str, headers: dict[str, str]) -> Response:
        """A watch: the answer's head now, its body chunk by chunk as the server writes it."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, sock_connect=TIMEOUT, sock_read=None)
        try:
            r = await self.session().get(target, headers=headers, timeout=timeout)
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise self._unavailable(target, e) from None
        if r.status >= 300:
            try:
                body = await r.read()
            finally:
                r.release()
            return Response(body, status_code=r.status, media_type=r.headers.get("Content-Type", "application/json"))

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in r.content.iter_any():
                    yield chunk
            except (aiohttp.ClientError, OSError) as e:
                log.info("%s: watch %s ended: %s", self.api.group, target, e)
            finally:
                r.close()

        return StreamingResponse(chunks(), status_code=r.status,
                                 media_type=r.headers.get("Content-Type", "application/json"))
