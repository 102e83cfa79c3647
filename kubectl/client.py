"""mkubectl's API client: machinery's ApiClient (one request path: TLS, credentials, retries, errors),
configured as kubectl configures client-go's rest.Config:

- every answer's `Warning` headers are printed to stderr as `Warning: ...`, once per text per
  invocation, as kubectl's warning handler does;
- -v=6 logs each request and -v=8 its body on stderr (kubectl's debugging round tripper);
- `get` asks for Tables (TABLE_ACCEPT) and `get -w` watches them: `watch_events` turns an ERROR
  event into ApiError, as kubectl's watch printer reports it.

Errors stay machinery's: ApiError (with the server's Status), ApiUnavailable and InvalidRequest.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from machinery.client import ApiClient, ApiError, default_user_agent
from machinery.kubeconfig import ClientConfig

TABLE_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                "application/json")
USER_AGENT = default_user_agent("mkubectl")


class KubectlClient(ApiClient):
    """ApiClient with kubectl's warning printing, request logging and table watches."""

    def __init__(self, config: ClientConfig, *, timeout: float = 30.0,
                 warn: Callable[[str], None] | None = None, verbosity: int = 0) -> None:
        super().__init__(config, user_agent=config.user_agent or USER_AGENT, timeout=timeout, connect_timeout=10.0,
                         max_connections=16, warning_handler=self._warn_once,
                         request_logger=self._log if verbosity >= 6 else None)
        self._warn = warn or (lambda text: print(f"Warning: {text}", file=sys.stderr, flush=True))
        self._warned: set[str] = set()
        self.verbosity = verbosity

    def _warn_once(self, text: str) -> None:
        if text not in self._warned:  # kubectl deduplicates within one invocation
            self._warned.add(text)
            self._warn(text)

    def _log(self, method: str, url: str, params: Mapping[str, str], content: bytes | None) -> None:
        """kubectl's -v=6 (requests) and -v=8 (request bodies) logging, on stderr."""
        query = "&".join(f"{k}={v}" for k, v in params.items())
        print(f"mkubectl: {method} {url}{'?' + query if query else ''}", file=sys.stderr, flush=True)
        if self.verbosity >= 8 and content is not None:
            print(f"mkubectl: Request Body: {content.decode(errors='replace')}", file=sys.stderr, flush=True)

    async def watch_events(self, path: str, params: Mapping[str, Any], *, accept: str | None = None
                           ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """A watch stream as (type, object) pairs; ERROR events raise ApiError with their Status.
        The stream simply ends when the server closes it."""
        async for event in self.watch_path(path, params, accept=accept):
            if event.type == "ERROR":
                status = event.object
                code = getattr(status, "code", None) or 500
                raise ApiError(status, code, "GET", self.server + path)
            yield event.type, event.raw
