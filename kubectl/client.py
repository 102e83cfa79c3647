"""mkubectl's API client: machinery's ApiClient plus what a CLI needs on top.

- every request may choose its Accept header (kubectl's `as=Table` for `get`) and every answer's
  `Warning` headers are printed to stderr as `Warning: ...`, as kubectl does;
- Table watches (`get -w`), plain-text streams (`logs -f`) and websockets (`exec`) reuse the
  client's aiohttp session, so TLS, credentials and the User-Agent are configured once.

Errors stay machinery's: ApiError (with the server's Status) and ApiUnavailable.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
import orjson
from pydantic import BaseModel

from kubectl.errors import CommandError
from machinery.client import (
    ApiClient,
    ApiError,
    ApiUnavailable,
    ClientError,
    decode_watch_line,
    default_user_agent,
    status_from_body,
)
from machinery.kubeconfig import ClientConfig

TABLE_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                "application/json")
USER_AGENT = default_user_agent("mkubectl")

# RFC 7234 warning-value: `299 - "text"` (the agent and date parts are optional)
_WARNING = re.compile(r'^\s*\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"')


def _query(params: Mapping[str, Any] | None) -> dict[str, str]:
    """Query parameters as strings (booleans spelled as Kubernetes does), None left out."""
    out = {}
    for key, value in (params or {}).items():
        if value is not None:
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def _checked_path(path: str) -> str:
    """client-go's Request.Name check: "." and ".." are no names (the URL library would resolve them and
    the request would reach another object: `delete pod ..` the namespace)."""
    for segment in path.split("/"):
        if segment in (".", ".."):
            raise CommandError(f'invalid resource name "{segment}": [may not be \'{segment}\']')
    return path


def _dump(obj: BaseModel | Mapping[str, Any] | list[Any]) -> bytes:
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)  # as Go marshals maps: keys sorted


def parse_warning(header: str) -> str:
    match = _WARNING.match(header)
    if not match:
        return header.strip()
    return re.sub(r"\\(.)", r"\1", match.group(1))


class KubectlClient(ApiClient):
    """ApiClient with Accept control, Warning headers, table watches, text streams and websockets."""

    def __init__(self, config: ClientConfig, *, timeout: float = 30.0,
                 warn: Callable[[str], None] | None = None, verbosity: int = 0) -> None:
        super().__init__(config, user_agent=config.user_agent or USER_AGENT, timeout=timeout, connect_timeout=10.0,
                         max_connections=16)
        self._warn = warn or (lambda text: print(f"Warning: {text}", file=sys.stderr, flush=True))
        self._warned: set[str] = set()
        self.verbosity = verbosity

    def _log(self, method: str, url: str, params: Mapping[str, str], content: bytes | None) -> None:
        """kubectl's -v=6 (requests) and -v=8 (request bodies) logging, on stderr."""
        if self.verbosity >= 6:
            query = "&".join(f"{k}={v}" for k, v in params.items())
            print(f"mkubectl: {method} {url}{'?' + query if query else ''}", file=sys.stderr, flush=True)
        if self.verbosity >= 8 and content is not None:
            print(f"mkubectl: Request Body: {content.decode(errors='replace')}", file=sys.stderr, flush=True)

    @property
    def server(self) -> str:
        return self._base

    def _warnings(self, response: aiohttp.ClientResponse) -> None:
        for header in response.headers.getall("Warning", []):
            text = parse_warning(header)
            if text and text not in self._warned:  # kubectl deduplicates within one invocation
                self._warned.add(text)
                self._warn(text)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: BaseModel | Mapping[str, Any] | list[Any] | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        accept: str | None = None,
    ) -> Any:
        """One request: the decoded JSON answer, or ApiError/ApiUnavailable (warnings printed)."""
        headers: dict[str, str] = {}
        if body is not None:
            headers["Content-Type"] = content_type
        if accept:
            headers["Accept"] = accept
        content = _dump(body) if body is not None else None
        extra: dict[str, Any] = {} if timeout is None else {"timeout": aiohttp.ClientTimeout(total=timeout)}
        url = self._base + _checked_path(path)
        query = _query(params)
        self._log(method, url, query, content)
        try:
            async with self._http().request(method, url, params=query, data=content, headers=headers,
                                            **extra) as response:
                payload = await response.read()
                code = response.status
                self._warnings(response)
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ApiUnavailable(f"{method} {path}: {type(e).__name__}: {e}") from e
        if not 200 <= code < 300:
            raise ApiError(status_from_body(code, payload), code, method, url)
        if not payload:
            return None
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError as e:
            raise ClientError(f"{method} {path}: answer is not JSON: {payload[:200]!r}") from e

    async def watch_events(self, path: str, params: Mapping[str, Any], *, accept: str | None = None
                           ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """A watch stream as (type, object) pairs; ERROR events raise ApiError with their Status.
        The stream simply ends when the server closes it."""
        query = _query({**params, "watch": "true"})
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout, sock_read=None)
        headers = {"Accept": accept} if accept else None
        url = self._base + _checked_path(path)
        try:
            async with self._http().get(url, params=query, headers=headers, timeout=timeout) as response:
                self._warnings(response)
                if not 200 <= response.status < 300:
                    body = await response.read()
                    raise ApiError(status_from_body(response.status, body), response.status, "GET", url)
                pending = b""
                async for chunk in response.content.iter_any():
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        event = decode_watch_line(line)
                        if event is None:
                            continue
                        if event.type == "ERROR":
                            status = event.object
                            code = getattr(status, "code", None) or 500
                            raise ApiError(status, code, "GET", url)  # type: ignore[arg-type]
                        yield event.type, event.raw
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ApiUnavailable(f"watch {path}: {type(e).__name__}: {e}") from e

    async def stream_text(self, path: str, params: Mapping[str, Any]) -> AsyncIterator[bytes]:
        """A plain-text answer (pods/log) chunk by chunk, for as long as the server sends it."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout, sock_read=None)
        url = self._base + path
        try:
            async with self._http().get(url, params=_query(params), timeout=timeout,
                                        headers={"Accept": "text/plain, */*"}) as response:
                self._warnings(response)
                if not 200 <= response.status < 300:
                    body = await response.read()
                    raise ApiError(status_from_body(response.status, body), response.status, "GET", url)
                async for chunk in response.content.iter_any():
                    yield chunk
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ApiUnavailable(f"GET {path}: {type(e).__name__}: {e}") from e

    async def websocket(self, path: str, query: list[tuple[str, str]], protocols: tuple[str, ...]
                        ) -> aiohttp.ClientWebSocketResponse:
        """Open a websocket on the apiserver (pods/exec); the caller closes it."""
        url = self._base.replace("http://", "ws://", 1).replace("https://", "wss://", 1) + path
        try:
            return await self._http().ws_connect(
                url, params=query, protocols=protocols, autoping=True, max_msg_size=0,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=10.0),
            )
        except aiohttp.WSServerHandshakeError:
            raise
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ApiUnavailable(f"GET {path}: {type(e).__name__}: {e}") from e
