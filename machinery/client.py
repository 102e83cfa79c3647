"""The async API client every minik8s process talks to the apiserver through (client-go's role).

One aiohttp session per process component (HTTP/1.1 keep-alive, TLS and credentials from a
`ClientConfig`, a User-Agent naming the component so the audit log says who called). Typed
methods take and return the pydantic models of machinery.api; `*_raw` twins speak plain dicts
for callers that handle arbitrary kinds (mkubectl). Both go through one URL builder
(`ResourceInfo` paths) and one error decoder, `ApiClient.request`:

- a non-2xx answer raises `ApiError` carrying the apiserver's `Status` (is_not_found,
  is_conflict, is_already_exists, is_gone/is_expired ...);
- no answer at all (refused, reset, timed out) raises `ApiUnavailable`, which callers treat as
  "retry later" rather than as a verdict on their request.

Callers that talk to people (mkubectl) hang on a `warning_handler` (each Warning header's text,
client-go's rest.Config.WarningHandler) and a `request_logger` (client-go's debugging round tripper),
choose the Accept header per request (Tables), and use the same path for watches of any path
(`watch_path`), streamed answers (`stream`, pods/log) and websockets (`websocket`, pods/exec).

Credentials: the config's client certificate or bearer token, or a `token_source` (client-go's
oauth2.TokenSource behind a transport): an async callable asked for the bearer token before every
request, so a token it refreshes (service-account tokens from TokenRequest) is used from the next
request on. `CachingTokenSource` is the usual one: it fetches a token and refreshes it once 80% of
its lifetime has passed.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import random
import re
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, NamedTuple, TypeVar

import aiohttp
import orjson
from pydantic import BaseModel, ValidationError

from machinery import tracing
from machinery.api.autoscaling_v1 import Scale
from machinery.api.core_v1 import Pod
from machinery.api.meta import ObjectMeta, Preconditions, Status
from machinery.api.resources import ResourceInfo, resource_for_model
from machinery.kubeconfig import ClientConfig, load_kubeconfig
from machinery.selectors import escape_field_value

KUBE_VERSION = "v1.30.0"
# 429 TooManyRequests with Retry-After is retried (client-go's request.go: maxRetries 10)
MAX_RETRIES = 10
MAX_RETRY_AFTER = 10

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

Resource = ResourceInfo | type[BaseModel]
Selector = str | Mapping[str, str] | None
PatchType = Literal["merge", "strategic", "json", "apply"]

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",  # JSON is YAML, so the body is sent as JSON
}

# Reasons client-go assumes when an error body is not a Status (apierrors.NewGenericServerResponse).
_REASON_FOR_CODE: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def default_user_agent(component: str) -> str:
    """The User-Agent of a minik8s component, e.g. `kube-scheduler/v1.30.0 (minik8s)`."""
    return f"{component}/{KUBE_VERSION} (minik8s)"


# RFC 7234 warning-value: `299 - "text"` (the agent and date parts are optional)
_WARNING = re.compile(r'^\s*\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"')


def parse_warning(header: str) -> str:
    """The text of a `Warning` response header (client-go's warnings.go ParseWarningHeader)."""
    match = _WARNING.match(header)
    if not match:
        return header.strip()
    return re.sub(r"\\(.)", r"\1", match.group(1))


# What a client is told about: each Warning header's text (client-go's rest.Config.WarningHandler), and
# each request before it is sent (method, URL, query, body; client-go's debugging round tripper at -v=6/8).
WarningHandler = Callable[[str], None]
RequestLogger = Callable[[str, str, Mapping[str, str], bytes | None], None]


# -- token sources ----------------------------------------------------------------------------

TokenSource = Callable[[], Awaitable[str]]
# A fetch answers (token, expires at, as a Unix time).
TokenFetch = Callable[[], Awaitable[tuple[str, float]]]


class CachingTokenSource:
    """A token fetched once and refreshed after 80% of its lifetime (client-go's cachingTokenSource
    with the 20% leeway its service-account token sources use). One fetch at a time; if a refresh
    fails while the cached token is still valid, that token is kept and the refresh retried after
    `retry` seconds, so an apiserver restart does not break a component that still holds a token."""

    def __init__(self, fetch: TokenFetch, *, retry: float = 1.0) -> None:
        self._fetch = fetch
        self._retry = retry
        self._token = ""
        self._expires = 0.0
        self._refresh_at = 0.0
        self._lock = asyncio.Lock()

    @property
    def expires(self) -> float:
        return self._expires

    async def __call__(self) -> str:
        if time.time() < self._refresh_at:
            return self._token
        async with self._lock:
            now = time.time()
            if now < self._refresh_at:
                return self._token
            try:
                token, expires = await self._fetch()
            except Exception:
                if self._token and now < self._expires:
                    self._refresh_at = now + self._retry
                    return self._token
                raise
            self._token, self._expires = token, expires
            self._refresh_at = now + 0.8 * max(0.0, expires - now)
            return token


# -- errors -----------------------------------------------------------------------------------


class ClientError(Exception):
    """Base of everything the API client raises on purpose."""


class ApiUnavailable(ClientError):
    """The apiserver gave no answer (connection refused/reset, timeout): retry later."""


class InvalidRequest(ClientError):
    """A request the client refuses to send (client-go's Request.Name check: "." and ".." are no names)."""


class WatchDecodeError(ClientError):
    """A watch stream carried a line that is not a watch event: the stream cannot be trusted."""


class ApiError(ClientError):
    """The apiserver answered with a non-2xx status; `status` is its Status object."""

    def __init__(self, status: Status, code: int, method: str = "", url: str = "") -> None:
        self.status = status
        self.code = code
        self.method = method
        self.url = url
        where = f"{method} {url}: " if method else ""
        super().__init__(f"{where}{code} {status.reason or ''}: {status.message or ''}".rstrip(": "))

    @property
    def reason(self) -> str:
        return self.status.reason or ""

    @property
    def message(self) -> str:
        return self.status.message or ""

    @property
    def is_not_found(self) -> bool:
        return self.reason == "NotFound" or (not self.reason and self.code == 404)

    @property
    def is_already_exists(self) -> bool:
        return self.reason == "AlreadyExists"

    @property
    def is_conflict(self) -> bool:
        """A stale resourceVersion (optimistic concurrency), not AlreadyExists, though both are 409."""
        return self.reason == "Conflict" or (not self.reason and self.code == 409)

    @property
    def is_gone(self) -> bool:
        """410: the resourceVersion asked for is compacted away (reason Expired or Gone): relist."""
        return self.code == 410 or self.reason in ("Expired", "Gone")

    @property
    def is_expired(self) -> bool:
        return self.reason == "Expired"

    @property
    def is_invalid(self) -> bool:
        return self.reason == "Invalid" or (not self.reason and self.code == 422)

    @property
    def is_bad_request(self) -> bool:
        return self.reason == "BadRequest" or (not self.reason and self.code == 400)

    @property
    def is_unauthorized(self) -> bool:
        return self.code == 401

    @property
    def is_forbidden(self) -> bool:
        return self.code == 403

    @property
    def is_too_many_requests(self) -> bool:
        return self.code == 429

    @property
    def is_server_error(self) -> bool:
        return self.code >= 500


def is_not_found(err: BaseException) -> bool:
    """apierrors.IsNotFound: usable on any exception (False for non-API errors)."""
    return isinstance(err, ApiError) and err.is_not_found


def is_conflict(err: BaseException) -> bool:
    return isinstance(err, ApiError) and err.is_conflict


def is_already_exists(err: BaseException) -> bool:
    return isinstance(err, ApiError) and err.is_already_exists


def is_gone(err: BaseException) -> bool:
    return isinstance(err, ApiError) and err.is_gone


def status_from_body(code: int, body: bytes) -> Status:
    """The Status inside an error body, or one made up from the code when the body is not a Status."""
    data: Any = None
    with contextlib.suppress(orjson.JSONDecodeError):
        data = orjson.loads(body) if body else None
    if isinstance(data, dict) and data.get("kind") == "Status":
        status = _to_status(data)
        if status.code is None:
            status = status.model_copy(update={"code": code})
        return status
    text = body.decode("utf-8", "replace").strip()[:1024]
    return Status(
        status="Failure",
        code=code,
        reason=_REASON_FOR_CODE.get(code, "Unknown" if code >= 400 else ""),
        message=text or f"the server responded with status {code}",
    )


def _to_status(data: dict[str, Any]) -> Status:
    """Validate a Status leniently: a malformed one still yields code/reason/message."""
    try:
        return Status.model_validate(data)
    except ValidationError:
        code = data.get("code")
        return Status(
            status=str(data.get("status") or "Failure"),
            code=code if isinstance(code, int) else None,
            reason=str(data.get("reason") or "") or None,
            message=str(data.get("message") or "") or None,
        )


# -- watch events -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WatchEvent(Generic[T]):
    """One line of a watch stream. `object` is the model (or a dict for raw watches); for ERROR
    it is a `Status`. `raw` keeps the decoded JSON of the object."""

    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: T | Status
    raw: dict[str, Any]

    @property
    def resource_version(self) -> str | None:
        meta = self.raw.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        return rv if isinstance(rv, str) and rv else None


WATCH_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})


def decode_watch_line(line: str | bytes, model: type[M] | None = None) -> WatchEvent[Any] | None:
    """Decode one newline-delimited watch event; None for a blank keep-alive line.

    BOOKMARK objects carry little more than metadata.resourceVersion; if the model refuses such
    a stub it is built without validation, since only its resourceVersion may be read.
    """
    if not line.strip():
        return None
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise WatchDecodeError(f"watch line is not JSON: {line[:200]!r}") from e
    if not isinstance(data, dict):
        raise WatchDecodeError(f"watch line is not an object: {line[:200]!r}")
    etype = data.get("type")
    raw = data.get("object")
    if etype not in WATCH_EVENT_TYPES or not isinstance(raw, dict):
        raise WatchDecodeError(f"not a watch event: {line[:200]!r}")
    if etype == "ERROR":
        return WatchEvent(etype, _to_status(raw), raw)
    if model is None:
        return WatchEvent(etype, raw, raw)
    try:
        obj: Any = model.model_validate(raw)
    except ValidationError as e:
        if etype != "BOOKMARK":
            raise WatchDecodeError(f"{etype} object is not a valid {model.__name__}: {e}") from e
        rv = (raw.get("metadata") or {}).get("resourceVersion")
        obj = model.model_construct(metadata=ObjectMeta(resource_version=rv))
    return WatchEvent(etype, obj, raw)


# -- the client -------------------------------------------------------------------------------


class ListResult(NamedTuple, Generic[M]):
    items: builtins.list[M]
    resource_version: str
    continue_: str


def _info(resource: Resource) -> ResourceInfo:
    if isinstance(resource, ResourceInfo):
        return resource
    try:
        return resource_for_model(resource)
    except KeyError:
        raise ValueError(f"{resource.__name__} is not a resource served by the apiserver") from None


def format_selector(value: Selector) -> str | None:
    """Label/field selectors as the wire wants them; a mapping means equality on every pair (values
    escaped as field selectors need: a `,` or `=` inside a value is not a separator; valid label
    values contain neither, so the escaping changes nothing for them)."""
    if value is None or isinstance(value, str):
        return value or None
    return ",".join(f"{k}={escape_field_value(v)}" for k, v in value.items()) or None


def _query(params: Mapping[str, Any] | None) -> dict[str, str]:
    """Query parameters as strings (booleans the way Kubernetes spells them), None left out."""
    out = {}
    for key, value in (params or {}).items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def _dump(obj: BaseModel | Mapping[str, Any] | builtins.list[Any]) -> bytes:
    if isinstance(obj, BaseModel):  # fields in declaration order, as Go marshals a struct
        return orjson.dumps(obj.model_dump(mode="json", by_alias=True, exclude_none=True))
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)  # keys sorted, as Go marshals a map


def _checked_path(path: str) -> str:
    """client-go's Request.Name check: "." and ".." are no names (the URL library would resolve them and
    the request would reach another object: a delete of pod ".." the namespace)."""
    for segment in path.split("/"):
        if segment in (".", ".."):
            raise InvalidRequest(f'invalid resource name "{segment}": [may not be \'{segment}\']')
    return path


def _meta(obj: BaseModel) -> ObjectMeta:
    meta = getattr(obj, "metadata", None)
    if not isinstance(meta, ObjectMeta):
        raise ValueError(f"{type(obj).__name__} has no metadata")
    return meta


def _ssl_context(config: ClientConfig) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=config.ca_file)
    if config.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if config.cert_file and config.key_file:
        ctx.load_cert_chain(config.cert_file, config.key_file)
    return ctx


class ApiClient:
    """Typed and raw access to the apiserver over one pooled HTTP/1.1 connection set."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        user_agent: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        max_connections: int = 256,
        token_source: TokenSource | None = None,
        warning_handler: WarningHandler | None = None,
        request_logger: RequestLogger | None = None,
    ) -> None:
        self.config = config
        self.token_source = token_source
        self.warning_handler = warning_handler
        self.request_logger = request_logger
        self.user_agent = user_agent or config.user_agent or default_user_agent("minik8s-client")
        self._base = config.server.rstrip("/")
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._max_connections = max_connections
        self._headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if config.token:
            self._headers["Authorization"] = f"Bearer {config.token}"
        self._ssl: ssl.SSLContext | None = _ssl_context(config) if self._base.startswith("https://") else None
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        """The session, opened on first use: aiohttp binds it to the running event loop. aiohttp,
        not httpx: it costs about an eighth of the CPU per request, which is the scheduler's and the
        controllers' budget under a burst."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, keepalive_timeout=60.0,
                                             ssl=self._ssl if self._ssl is not None else True)
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, auto_decompress=True,
                timeout=aiohttp.ClientTimeout(total=self._timeout, sock_connect=self._connect_timeout),
                trust_env=False,  # a proxy from the environment must not sit between components and apiserver
            )
        return self._session

    @property
    def server(self) -> str:
        """The apiserver's base URL."""
        return self._base

    async def _headers_for(self, headers: dict[str, str] | None = None) -> dict[str, str] | None:
        """Per-request headers, with the token source's current bearer token and the current span's trace
        context (W3C traceparent, when tracing is on: machinery/tracing.py)."""
        if self.token_source is not None:
            headers = {**(headers or {}), "Authorization": f"Bearer {await self.token_source()}"}
        if tracing.TRACER is not None:
            headers = tracing.inject(headers)
        return headers

    def _warnings(self, response: aiohttp.ClientResponse) -> None:
        if self.warning_handler is not None:
            for header in response.headers.getall("Warning", []):
                text = parse_warning(header)
                if text:
                    self.warning_handler(text)

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, *, context: str | None = None, user_agent: str | None = None
    ) -> ApiClient:
        return cls(load_kubeconfig(path, context=context, user_agent=user_agent))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the one place requests are made and errors decoded ---------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: BaseModel | Mapping[str, Any] | builtins.list[Any] | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        accept: str | None = None,
    ) -> Any:
        """Send one request; the decoded JSON answer, or ApiError/ApiUnavailable. `accept` overrides
        the Accept header (e.g. kubectl's `as=Table`)."""
        query = _query(params)
        url = self._base + _checked_path(path)
        headers: dict[str, str] = {}
        if body is not None:
            headers["Content-Type"] = content_type
        if accept:
            headers["Accept"] = accept
        content = _dump(body) if body is not None else None
        extra: dict[str, Any] = {} if timeout is None else {"timeout": aiohttp.ClientTimeout(total=timeout)}
        if self.request_logger is not None:
            self.request_logger(method, url, query, content)
        for attempt in range(MAX_RETRIES + 1):
            try:
                async with self._http().request(method, url, params=query, data=content,
                                                headers=await self._headers_for(headers) or None,
                                                **extra) as response:
                    payload = await response.read()
                    code = response.status
                    retry_after = response.headers.get("Retry-After")
                    self._warnings(response)
            except (aiohttp.ClientError, TimeoutError) as e:
                raise ApiUnavailable(f"{method} {path}: {type(e).__name__}: {e}") from e
            # the apiserver's max-in-flight limit: come back when it says, as client-go's request retry does
            if code != 429 or attempt == MAX_RETRIES or retry_after is None or not retry_after.isdigit():
                break
            await asyncio.sleep(min(int(retry_after), MAX_RETRY_AFTER))
        if not 200 <= code < 300:
            raise ApiError(status_from_body(code, payload), code, method, url)
        if not payload:
            return None
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError as e:
            raise ClientError(f"{method} {path}: answer is not JSON: {payload[:200]!r}") from e

    async def _request_object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """request() for an answer that must be a JSON object (an object, a list, a Status)."""
        answer = await self.request(method, path, **kwargs)
        if not isinstance(answer, dict):
            raise ClientError(f"{method} {path}: answer is not a JSON object: {answer!r:.200}")
        return answer

    # -- raw (dict) API ---------------------------------------------------------------------

    async def get_raw(
        self, resource: Resource, name: str, namespace: str | None = None, *, subresource: str | None = None
    ) -> dict[str, Any]:
        return await self._request_object("GET", _info(resource).object_path(name, namespace, subresource))

    async def list_raw(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: Selector = None,
        field_selector: Selector = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        params = {
            "labelSelector": format_selector(label_selector),
            "fieldSelector": format_selector(field_selector),
            "limit": limit,
            "continue": continue_ or None,
            "resourceVersion": resource_version,
        }
        return await self._request_object("GET", _info(resource).collection_path(namespace), params=params)

    async def create_raw(
        self,
        resource: Resource,
        body: BaseModel | Mapping[str, Any],
        namespace: str | None = None,
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        params = {"fieldManager": field_manager, "dryRun": "All" if dry_run else None}
        path = _info(resource).collection_path(namespace)
        return await self._request_object("POST", path, params=params, body=body)

    async def update_raw(
        self,
        resource: Resource,
        name: str,
        body: BaseModel | Mapping[str, Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        path = _info(resource).object_path(name, namespace, subresource)
        return await self._request_object("PUT", path, params={"fieldManager": field_manager}, body=body)

    async def patch_raw(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | builtins.list[Any],
        patch_type: PatchType = "merge",
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> dict[str, Any]:
        """PATCH; "apply" (server-side apply) needs a field_manager, as upstream insists."""
        if patch_type not in PATCH_CONTENT_TYPES:
            raise ValueError(f"unknown patch type {patch_type!r}")
        if patch_type == "json" and not isinstance(patch, builtins.list):
            raise ValueError("a JSON patch is a list of operations")
        if patch_type != "json" and not isinstance(patch, Mapping):
            raise ValueError(f"a {patch_type} patch is an object")
        if patch_type == "apply" and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        params = {"fieldManager": field_manager, "force": None if force is None else str(force).lower()}
        return await self._request_object(
            "PATCH",
            _info(resource).object_path(name, namespace, subresource),
            params=params,
            body=patch,
            content_type=PATCH_CONTENT_TYPES[patch_type],
        )

    async def delete_raw(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: Literal["Orphan", "Background", "Foreground"] | None = None,
        grace_period_seconds: int | None = None,
        preconditions: Preconditions | Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """DELETE with DeleteOptions in the body; the answer is the object (still terminating) or a Status."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if isinstance(preconditions, Preconditions):
            options["preconditions"] = preconditions.model_dump(mode="json", by_alias=True, exclude_none=True)
        elif preconditions:
            options["preconditions"] = dict(preconditions)
        return await self._request_object("DELETE", _info(resource).object_path(name, namespace), body=options)

    async def delete_collection_raw(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: Selector = None,
        field_selector: Selector = None,
        propagation_policy: Literal["Orphan", "Background", "Foreground"] | None = None,
    ) -> dict[str, Any]:
        params = {
            "labelSelector": format_selector(label_selector),
            "fieldSelector": format_selector(field_selector),
        }
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy is not None:
            body["propagationPolicy"] = propagation_policy
        path = _info(resource).collection_path(namespace)
        return await self._request_object("DELETE", path, params=params, body=body)

    def watch_raw(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: Selector = None,
        field_selector: Selector = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
    ) -> AsyncGenerator[WatchEvent[dict[str, Any]], None]:
        """Watch events with dict objects (ERROR events carry a Status)."""
        return self._watch(
            None, _info(resource), namespace, resource_version, label_selector, field_selector,
            allow_bookmarks, timeout_seconds,
        )

    def _watch(
        self,
        model: type[M] | None,
        info: ResourceInfo,
        namespace: str | None,
        resource_version: str | None,
        label_selector: Selector,
        field_selector: Selector,
        allow_bookmarks: bool,
        timeout_seconds: int | None,
    ) -> AsyncGenerator[WatchEvent[Any], None]:
        """The streaming GET ?watch=true: a non-2xx answer (e.g. 410 Expired) raises ApiError before
        the first event; a broken stream raises ApiUnavailable; a server-side timeout just ends."""
        params = {
            "resourceVersion": resource_version or None,
            "labelSelector": format_selector(label_selector),
            "fieldSelector": format_selector(field_selector),
            "allowWatchBookmarks": "true" if allow_bookmarks else None,
            "timeoutSeconds": timeout_seconds,
        }
        return self.watch_path(info.collection_path(namespace), params, model=model)

    async def watch_path(
        self,
        path: str,
        params: Mapping[str, Any] | None = None,
        *,
        model: type[M] | None = None,
        accept: str | None = None,
    ) -> AsyncGenerator[WatchEvent[Any], None]:
        """GET `path` with ?watch=true and these parameters: the events (objects as `model`, or dicts),
        ERROR events included (their object is a Status). `accept` asks for another rendering (a
        Table watch). Raises as `_watch` does."""
        query = _query({**(params or {}), "watch": "true"})
        timeout_seconds = query.get("timeoutSeconds")
        # No read timeout unless the server promised to end the stream: a quiet watch is normal.
        read_timeout = None if not timeout_seconds else float(timeout_seconds) + 30.0
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout, sock_read=read_timeout)
        url = self._base + _checked_path(path)
        headers = await self._headers_for({"Accept": accept} if accept else None)
        if self.request_logger is not None:
            self.request_logger("GET", url, query, None)
        try:
            async with self._http().get(url, params=query, timeout=timeout, headers=headers) as response:
                self._warnings(response)
                if not 200 <= response.status < 300:
                    body = await response.read()
                    raise ApiError(status_from_body(response.status, body), response.status, "GET", url)
                pending = b""
                # events are one JSON document per line, and a line may be far longer than aiohttp's
                # readline limit (an object may be megabytes): split the chunks ourselves
                async for chunk in response.content.iter_any():
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        event = decode_watch_line(line, model)
                        if event is not None:
                            yield event
                if pending.strip():
                    event = decode_watch_line(pending, model)
                    if event is not None:
                        yield event
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ApiUnavailable(f"watch {path}: {type(e).__name__}: {e}") from e

    # -- streams and websockets (client-go's Request.Stream, the websocket executor of exec) ---------

    async def stream(self, path: str, params: Mapping[str, Any] | None = None, *,
                     accept: str = "text/plain, */*") -> AsyncIterator[bytes]:
        """A streamed answer (pods/log) chunk by chunk, for as long as the server sends it; a non-2xx
        answer raises ApiError with its Status."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout, sock_read=None)
        url = self._base + _checked_path(path)
        query = _query(params)
        if self.request_logger is not None:
            self.request_logger("GET", url, query, None)
        try:
            async with self._http().get(url, params=query, timeout=timeout,
                                        headers=await self._headers_for({"Accept": accept})) as response:
                self._warnings(response)
                if not 200 <= response.status < 300:
                    body = await response.read()
                    raise ApiError(status_from_body(response.status, body), response.status, "GET", url)
                async for chunk in response.content.iter_any():
                    yield chunk
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ApiUnavailable(f"GET {path}: {type(e).__name__}: {e}") from e

    async def websocket(self, path: str, query: builtins.list[tuple[str, str]], protocols: tuple[str, ...]
                        ) -> aiohttp.ClientWebSocketResponse:
        """Open a websocket on the apiserver (pods/exec, pods/attach); the caller closes it. A refused
        upgrade raises aiohttp.WSServerHandshakeError (its status says why)."""
        url = self._base.replace("http://", "ws://", 1).replace("https://", "wss://", 1) + _checked_path(path)
        if self.request_logger is not None:
            self.request_logger("GET", url, dict(query), None)
        try:
            return await self._http().ws_connect(
                url, params=query, protocols=protocols, autoping=True, max_msg_size=0,
                headers=await self._headers_for(),
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=10.0),
            )
        except aiohttp.WSServerHandshakeError:
            raise
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ApiUnavailable(f"GET {path}: {type(e).__name__}: {e}") from e

    # -- typed API --------------------------------------------------------------------------

    async def get(self, model: type[M], name: str, namespace: str | None = None) -> M:
        return model.model_validate(await self.get_raw(model, name, namespace))

    async def list(
        self,
        model: type[M],
        namespace: str | None = None,
        *,
        label_selector: Selector = None,
        field_selector: Selector = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
    ) -> ListResult[M]:
        """One list call: (items, the list's resourceVersion to watch from, continue token or "")."""
        data = await self.list_raw(
            model, namespace, label_selector=label_selector, field_selector=field_selector,
            limit=limit, continue_=continue_, resource_version=resource_version,
        )
        meta = data.get("metadata") or {}
        items = [model.model_validate(item) for item in data.get("items") or []]
        return ListResult(items, meta.get("resourceVersion") or "", meta.get("continue") or "")

    async def create(
        self, obj: M, *, namespace: str | None = None, field_manager: str | None = None, dry_run: bool = False
    ) -> M:
        info = _info(type(obj))
        ns = self._namespace_for(info, obj, namespace)
        data = await self.create_raw(info, obj, ns, field_manager=field_manager, dry_run=dry_run)
        return type(obj).model_validate(data)

    async def update(self, obj: M, *, field_manager: str | None = None) -> M:
        """PUT the whole object; its metadata.resourceVersion makes it a compare-and-swap (409 if stale)."""
        return await self._put(obj, None, field_manager)

    async def update_status(self, obj: M, *, field_manager: str | None = None) -> M:
        """PUT to /status: only the status is written, the spec in `obj` is ignored by the server."""
        return await self._put(obj, "status", field_manager)

    async def _put(self, obj: M, subresource: str | None, field_manager: str | None) -> M:
        info = _info(type(obj))
        name = _meta(obj).name
        if not name:
            raise ValueError(f"cannot update a {info.kind} without metadata.name")
        ns = self._namespace_for(info, obj, None)
        data = await self.update_raw(
            info, name, obj, ns, subresource=subresource, field_manager=field_manager
        )
        return type(obj).model_validate(data)

    async def patch(
        self,
        model: type[M],
        name: str,
        patch: Mapping[str, Any] | builtins.list[Any],
        patch_type: PatchType = "merge",
        namespace: str | None = None,
        *,
        subresource: Literal["status"] | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> M:
        """PATCH the object or its status (other subresources speak other kinds: use patch_raw)."""
        if subresource not in (None, "status"):
            raise ValueError(f"subresource {subresource!r} does not return a {model.__name__}; use patch_raw")
        data = await self.patch_raw(
            model, name, patch, patch_type, namespace,
            subresource=subresource, field_manager=field_manager, force=force,
        )
        return model.model_validate(data)

    async def delete(
        self,
        model: type[M],
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: Literal["Orphan", "Background", "Foreground"] | None = None,
        grace_period_seconds: int | None = None,
        preconditions: Preconditions | Mapping[str, str] | None = None,
    ) -> M | Status:
        """The object if deletion is pending (finalizers, grace period), else the success Status."""
        data = await self.delete_raw(
            model, name, namespace, propagation_policy=propagation_policy,
            grace_period_seconds=grace_period_seconds, preconditions=preconditions,
        )
        if isinstance(data, dict) and data.get("kind") == "Status":
            return _to_status(data)
        return model.model_validate(data)

    async def bind(
        self, pod_name: str, namespace: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        """POST pods/{name}/binding: the scheduler's decision; pod_uid guards against a recreated pod.

        The body is the Binding's JSON written as a dict: a burst binds a thousand pods a second, and building
        and dumping the model cost ~40 µs of the scheduler's loop each, a tenth of what one binding costs it."""
        metadata = {"name": pod_name, "namespace": namespace}
        if pod_uid:
            metadata["uid"] = pod_uid
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        await self.request("POST", _info(Pod).object_path(pod_name, namespace, "binding"), body=binding)

    async def get_scale(self, model: type[BaseModel], name: str, namespace: str | None = None) -> Scale:
        return Scale.model_validate(await self.get_raw(model, name, namespace, subresource="scale"))

    async def update_scale(self, model: type[BaseModel], scale: Scale) -> Scale:
        name = scale.metadata.name
        if not name:
            raise ValueError("scale needs metadata.name")
        data = await self.update_raw(model, name, scale, scale.metadata.namespace, subresource="scale")
        return Scale.model_validate(data)

    def watch(
        self,
        model: type[M],
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: Selector = None,
        field_selector: Selector = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
    ) -> AsyncGenerator[WatchEvent[M], None]:
        """Typed watch events, as an async generator: the request is sent on first iteration. Close it
        when leaving early (`async with contextlib.aclosing(client.watch(...)) as events:`) so the
        connection is released at once rather than at garbage collection."""
        return self._watch(
            model, _info(model), namespace, resource_version, label_selector, field_selector,
            allow_bookmarks, timeout_seconds,
        )

    @staticmethod
    def _namespace_for(info: ResourceInfo, obj: BaseModel, namespace: str | None) -> str | None:
        if not info.namespaced:
            return None
        ns = namespace or _meta(obj).namespace
        if not ns:
            raise ValueError(f"{info.kind} is namespaced: set metadata.namespace or pass namespace=")
        return ns


async def retry_on_conflict(
    fn: Callable[[], Awaitable[T]],
    attempts: int = 10,
    delay: float = 0.01,
    jitter: float = 1.0,
    *,
    factor: float = 2.0,
    max_delay: float = 0.5,
) -> T:
    """client-go's RetryOnConflict: rerun `fn` (which must re-read what it updates) on 409 Conflict.

    `fn` takes no arguments; anything but a Conflict, and the last Conflict, propagates. The n-th
    retry waits delay * factor**(n-1) (at most max_delay), stretched by up to `jitter` times at
    random: writers that collided must not all come back at the same instant, or they collide
    again in lockstep and only one of them wins per round (with client-go's flat 10 ms +-10%,
    20 concurrent writers on one object need up to 9 rounds, so 5 attempts lose updates).
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for attempt in range(1, attempts + 1):
        try:
            return await fn()
        except ApiError as e:
            if not e.is_conflict or attempt == attempts:
                raise
        backoff = min(delay * factor ** (attempt - 1), max_delay)
        await asyncio.sleep(backoff * (1 + jitter * random.random()))
    raise AssertionError("unreachable")
