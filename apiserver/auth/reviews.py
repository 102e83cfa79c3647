"""Access reviews (authorization.k8s.io/v1): SelfSubjectAccessReview ("may I?", what
`kubectl auth can-i` sends) and SubjectAccessReview ("may they?"). Each is created, answered
by the same authorizer the request chain uses, and returned with its status; nothing is stored.

kubectl's typed client sends these reviews as protobuf (`application/vnd.kubernetes.protobuf`,
the runtime.Unknown envelope), whatever else it speaks JSON; the few fields of a review are
decoded here, and the answer goes back as JSON, which client-go reads by its Content-Type."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.auth.authn import UNSECURED, UserInfo
from apiserver.auth.authz import Attributes, Authorizer
from apiserver.registry.generic import WriteOptions, loc_to_path
from apiserver.request import decode_object, read_body, write_options
from machinery.api.resources import ResourceInfo

Obj = dict[str, Any]


def attributes_of(user: UserInfo, spec: Obj) -> Attributes:
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if resource is not None:
        field_selector = ((resource.get("fieldSelector") or {}).get("rawSelector")) or ""
        return Attributes(user, resource.get("verb") or "", True, "", resource.get("group") or "",
                          resource.get("version") or "", resource.get("resource") or "",
                          resource.get("subresource") or "", resource.get("namespace") or "",
                          resource.get("name") or "", field_selector)
    if non_resource is not None:
        return Attributes(user, non_resource.get("verb") or "", False, non_resource.get("path") or "")
    raise errors.ApiError(422, "Invalid", "spec: Invalid value: exactly one of nonResourceAttributes or "
                          "resourceAttributes must be specified",
                          {"causes": [{"reason": "FieldValueInvalid", "field": "spec",
                                       "message": "exactly one of nonResourceAttributes or resourceAttributes "
                                                  "must be specified"}]})


PROTOBUF = "application/vnd.kubernetes.protobuf"
_ENVELOPE = b"k8s\x00"


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """A protobuf message's (field number, value) pairs: varints as ints, length-delimited as bytes."""
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(data, i)
            if i + size > len(data):
                raise ValueError("truncated field")
            out.append((number, data[i:i + size]))
            i += size
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def _strings(data: bytes, names: dict[int, str]) -> Obj:
    out: Obj = {}
    for number, value in _fields(data):
        if number in names and isinstance(value, bytes):
            out[names[number]] = value.decode("utf-8")
    return out


_RESOURCE_ATTRIBUTES = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource",
                        7: "name"}
_NON_RESOURCE_ATTRIBUTES = {1: "path", 2: "verb"}


def decode_protobuf_review(body: bytes, kind: str) -> Obj:
    """The JSON form of a (Self)SubjectAccessReview sent as Kubernetes protobuf."""
    if not body.startswith(_ENVELOPE):
        raise ValueError("not a Kubernetes protobuf envelope")
    raw = next((v for n, v in _fields(body[4:]) if n == 2 and isinstance(v, bytes)), b"")
    spec: Obj = {}
    for number, value in _fields(raw):
        if number != 2 or not isinstance(value, bytes):
            continue  # metadata (1) and status (3) carry nothing a review needs
        groups: list[str] = []
        for field, item in _fields(value):
            if not isinstance(item, bytes):
                continue
            if field == 1:
                attrs = _strings(item, _RESOURCE_ATTRIBUTES)
                selector = next((v for n, v in _fields(item) if n == 8 and isinstance(v, bytes)), None)
                if selector is not None:
                    raw_selector = _strings(selector, {1: "rawSelector"})
                    if raw_selector:
                        attrs["fieldSelector"] = raw_selector
                spec["resourceAttributes"] = attrs
            elif field == 2:
                spec["nonResourceAttributes"] = _strings(item, _NON_RESOURCE_ATTRIBUTES)
            elif field == 3 and kind == "SubjectAccessReview":
                spec["user"] = item.decode("utf-8")
            elif field == 4 and kind == "SubjectAccessReview":
                groups.append(item.decode("utf-8"))
            elif field == 6 and kind == "SubjectAccessReview":
                spec["uid"] = item.decode("utf-8")
        if groups:
            spec["groups"] = groups
    return {"spec": spec}


class ReviewStore:
    """Stands where a Store would for a virtual resource: `create` is the only verb."""

    def __init__(self, info: ResourceInfo, authorizer: Authorizer):
        self.info = info
        self.authorizer = authorizer

    def _checked(self, body: Obj) -> Obj:
        try:
            return self.info.model.from_dict(body).to_dict()  # type: ignore[attr-defined]
        except ValidationError as e:
            p = e.errors()[0]
            path = loc_to_path(p["loc"])
            raise errors.ApiError(422, "Invalid", f'{self.info.kind}.{self.info.group} "" is invalid: {path}: '
                                  f'{p["msg"]}', {"kind": self.info.kind, "group": self.info.group,
                                                  "causes": [{"reason": "FieldValueInvalid", "message": p["msg"],
                                                              "field": path}]}) from e

    async def handle(self, request: Request) -> Response:
        """POST: decode (JSON, YAML or protobuf), answer, 201 with the review and its status."""
        from apiserver.handlers import json_response

        opts = write_options(request)
        content_type = request.headers.get("content-type", "application/json")
        raw = await read_body(request)
        if content_type.split(";")[0].strip() == PROTOBUF:
            try:
                body = decode_protobuf_review(raw, self.info.kind)
            except (ValueError, UnicodeDecodeError) as e:
                raise errors.bad_request(f"the body of the request could not be decoded: {e}") from None
        else:
            body, _ = decode_object(raw, content_type)
        return json_response(await self.create(None, body, opts), 201)

    async def create(self, namespace: str | None, body: Obj, opts: WriteOptions) -> Obj:
        body.setdefault("apiVersion", self.info.api_version)
        body.setdefault("kind", self.info.kind)
        review = self._checked(body)
        spec = review.get("spec") or {}
        if self.info.kind == "SelfSubjectAccessReview":
            user = opts.user if isinstance(opts.user, UserInfo) else UNSECURED
        else:
            if not spec.get("user") and not spec.get("groups"):
                raise errors.ApiError(422, "Invalid", 'SubjectAccessReview.authorization.k8s.io "" is invalid: '
                                      "spec.user: Invalid value: \"\": at least one of user or group must be "
                                      "specified", {"kind": "SubjectAccessReview"})
            user = UserInfo(spec.get("user") or "", tuple(spec.get("groups") or ()), spec.get("uid") or "")
        allowed, reason = self.authorizer.authorize(attributes_of(user, spec))
        status: Obj = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        review["status"] = status
        review.setdefault("metadata", {}).pop("creationTimestamp", None)
        return review
