"""How mkubectl words failures: one readable line on stderr, as kubectl's cmdutil.CheckErr does.

- the apiserver unreachable: `The connection to the server HOST:PORT was refused - did you specify
  the right host or port?` (other network failures: `Unable to connect to the server: ...`);
- a Status from the server: `Error from server (NotFound): deployments.apps "x" not found`;
- 422 Invalid: `The Deployment "x" is invalid: spec.replicas: Invalid value: -1: ...` (several
  causes: one `* field: message` line each, as kubectl prints them);
- everything mkubectl itself refuses: `error: ...`.
"""

from __future__ import annotations

import errno
from urllib.parse import urlsplit

import aiohttp

from machinery.api.meta import Status
from machinery.client import ApiError, ApiUnavailable
from machinery.kubeconfig import KubeconfigError


class CommandError(Exception):
    """A failure already worded for the user: printed as `error: <message>`."""


class RawError(Exception):
    """A failure printed exactly as given (kubectl prints some messages without `error: `)."""


class ExitCode(Exception):
    """Leave with this exit code and print nothing more (e.g. exec relays the command's code)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def with_source(err: ApiError, verb: str, source: str) -> ApiError:
    """cmdutil.AddSourceToErr: `error when creating "file.yaml": <message>` (the Status otherwise kept)."""
    if not source:
        return err
    status = err.status.model_copy(update={"message": f'error when {verb} "{source}": {err.status.message or ""}'})
    return ApiError(status, err.code, err.method, err.url)


def status_message(status: Status, code: int) -> str:
    """kubectl's wording of an error Status."""
    reason = status.reason or ""
    message = status.message or ""
    details = status.details
    if reason == "Invalid" or (not reason and code == 422):
        text = "The request is invalid"
        if details is None:
            return f"{text}: {message}" if message else text
        if details.kind or details.name:
            text = f'The {details.kind or ""} "{details.name or ""}" is invalid'
        elif message:
            text = f"{text}: {message}"
        causes = [f"{c.field or ''}: {c.message or ''}" for c in details.causes or []]
        if not causes:
            return text
        if len(causes) == 1:
            return f"{text}: {causes[0]}"
        return f"{text}: \n" + "\n".join(f"* {c}" for c in causes)
    if reason == "Unauthorized" or code == 401:
        return f"error: You must be logged in to the server ({message or 'Unauthorized'})"
    if reason:
        return f"Error from server ({reason}): {message}"
    return f"Error from server: {message}"


def unavailable_message(err: ApiUnavailable, server: str) -> str:
    cause = err.__cause__
    host = urlsplit(server).netloc or server
    refused = isinstance(cause, ConnectionRefusedError) or (
        isinstance(cause, aiohttp.ClientConnectorError) and cause.os_error.errno == errno.ECONNREFUSED
    )
    if refused:
        return f"The connection to the server {host} was refused - did you specify the right host or port?"
    if isinstance(cause, aiohttp.ClientConnectorError):
        return f"Unable to connect to the server: dial tcp {host}: {cause.os_error.strerror or cause.os_error}"
    if isinstance(cause, TimeoutError):
        return f"Unable to connect to the server: net/http: request to {host} timed out"
    detail = str(cause) if cause is not None else str(err)
    return f"Unable to connect to the server: {detail or type(cause).__name__}"


def format_error(exc: BaseException, server: str = "") -> str:
    """The line(s) mkubectl prints for `exc` (no trailing newline)."""
    if isinstance(exc, ApiError):
        return status_message(exc.status, exc.code)
    if isinstance(exc, ApiUnavailable):
        return unavailable_message(exc, server)
    if isinstance(exc, RawError):
        return str(exc)
    if isinstance(exc, KubeconfigError | CommandError):
        return f"error: {exc}"
    text = str(exc) or type(exc).__name__
    return f"error: {text}"
