"""API errors as upstream's k8s.io/apimachinery/pkg/api/errors builds them: every failure leaves
the apiserver as a meta/v1 Status with upstream's reason, code and message wording."""

from __future__ import annotations

from typing import Any

from apiserver.validation import FieldError
from machinery.api.resources import ResourceInfo


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # upstream's omitempty: an error that is no Status has none (StatusReasonUnknown)
            body["reason"] = self.reason
        if self.details is not None:  # upstream's pointer: an empty one is written as {}
            body["details"] = self.details
        body["code"] = self.code  # after details: upstream's field order (meta/v1 Status), which some clients compare
        return body


def _details(info: ResourceInfo | None, name: str | None, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if info is not None:
        if info.group:
            details["group"] = info.group
        details["kind"] = info.plural
    details.update(extra)
    return details


def not_found(info: ResourceInfo, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{info.group_resource} "{name}" not found', _details(info, name))


def already_exists(info: ResourceInfo, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{info.group_resource} "{name}" already exists',
                    _details(info, name))


def conflict(info: ResourceInfo, name: str, why: str = "") -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {info.group_resource} "{name}": {why}',
                    _details(info, name))


def invalid(info: ResourceInfo, name: str, errors: list[FieldError]) -> ApiError:
    """422 Invalid: `Deployment.apps "nginx" is invalid: spec.replicas: Invalid value: -1: ...`."""
    qualified_kind = f"{info.kind}.{info.group}" if info.group else info.kind
    summary = errors[0].full() if len(errors) == 1 else "[" + ", ".join(e.full() for e in errors) + "]"
    causes = [{"reason": e.reason, "message": e.message(), "field": e.field} for e in errors]
    details = _details(info, name, causes=causes)
    details["kind"] = info.kind
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(info: ResourceInfo, name: str, why: str) -> ApiError:
    return ApiError(403, "Forbidden", f'{info.group_resource} "{name}" is forbidden: {why}', _details(info, name))


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def method_not_supported(info: ResourceInfo, action: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", f"{action} is not supported on resources of kind {info.group_resource}",
                    _details(info, None))


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", f'the body of the request was in an unknown format - '
                    f'accepted media types include: application/json, application/yaml; got "{content_type}"')


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)


def timeout(message: str) -> ApiError:
    return ApiError(504, "Timeout", message)


def page_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def paths_not_installed() -> ApiError:
    """A path the server does not know (yet) while it is still installing the ones it will serve: the
    custom resources of the CRDs there are (upstream k8s.io/apiserver/pkg/util/notfoundhandler, until the
    MuxAndDiscoveryComplete signals, the apiextensions' CRDInformerHasNotSynced among them). Clients
    retry a 503 and obey its Retry-After; a 404 would tell them the resource does not exist."""
    return ApiError(503, "ServiceUnavailable",
                    "the request has been made before all known HTTP paths have been installed, please try again",
                    {"retryAfterSeconds": 5})
