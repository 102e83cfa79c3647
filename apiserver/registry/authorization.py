"""Access reviews (authorization.k8s.io/v1; upstream pkg/registry/authorization/*): SelfSubjectAccessReview
("may I?", what `kubectl auth can-i` sends), SubjectAccessReview ("may they?") and
SelfSubjectRulesReview ("what may I do in this namespace?", `kubectl auth can-i --list`), and
authentication.k8s.io's SelfSubjectReview ("who am I?", `kubectl auth whoami`). Each is
created, answered by the same authorizer the request chain uses, and returned with its status;
nothing is stored. The HTTP side (a POST decoded, answered 201) is apiserver/endpoints/subresources.py.

kubectl's typed client sends these reviews as protobuf (apiserver/protobuf.py decodes them, as
every request body); the answer goes back as JSON, which client-go reads by its Content-Type."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import ValidationError

from apiserver import errors
from apiserver.auth.authn import UNSECURED
from apiserver.auth.authz import Attributes, Authorizer
from apiserver.registry.generic import WriteOptions, loc_to_path
from machinery.api.resources import ResourceInfo
from machinery.authn.user import UserInfo
from machinery.timeutil import now_rfc3339
from machinery.types import Obj

# a token and the audiences asked → the user (None: not authenticated), the audiences it is good for, and why not
TokenReviewer = Callable[[str, tuple[str, ...]], Awaitable[tuple[UserInfo | None, list[str], str]]]


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


class ReviewStore:
    """Stands where a Store would for a virtual resource: `create` is the only verb."""

    def __init__(self, info: ResourceInfo, authorizer: Authorizer, token_reviewer: TokenReviewer | None = None):
        self.info = info
        self.authorizer = authorizer
        self.token_reviewer = token_reviewer

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

    async def create(self, namespace: str | None, body: Obj, opts: WriteOptions) -> Obj:
        body.setdefault("apiVersion", self.info.api_version)
        body.setdefault("kind", self.info.kind)
        body.pop("status", None)  # the answer; what a client sends there (kubectl: an empty one) is ignored
        review = self._checked(body)
        if self.info.kind == "TokenReview":
            return await self._token_review(review)
        if self.info.kind == "SelfSubjectReview":
            return self._self_subject_review(opts.user if isinstance(opts.user, UserInfo) else UNSECURED)
        spec = review.get("spec") or {}
        if self.info.kind == "SelfSubjectRulesReview":
            return self._rules_review(opts.user if isinstance(opts.user, UserInfo) else UNSECURED, spec)
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

    async def _token_review(self, review: Obj) -> Obj:
        """Upstream's tokenreview REST: the token as the apiserver's own authenticators see it, for the
        audiences asked (the apiserver's when none); the review comes back with its spec and a status."""
        spec = review.get("spec") or {}
        token = spec.get("token") or ""
        if not token:
            raise errors.bad_request("token is required for TokenReview in authentication")
        status: Obj = {"authenticated": False, "user": {}}
        if self.token_reviewer is not None:
            user, audiences, error = await self.token_reviewer(token, tuple(spec.get("audiences") or ()))
            if user is not None:
                status = {"authenticated": True, "user": user.to_dict(), "audiences": audiences}
            if error:
                status["error"] = error
        review["status"] = status
        review.setdefault("metadata", {}).pop("creationTimestamp", None)
        return review

    def _self_subject_review(self, user: UserInfo) -> Obj:
        """Upstream's selfsubjectreview REST (`kubectl auth whoami`): the user as the request was
        authenticated, after impersonation, with a creation time and nothing stored."""
        return {"kind": self.info.kind, "apiVersion": self.info.api_version,
                "metadata": {"creationTimestamp": now_rfc3339()}, "status": {"userInfo": user.to_dict()}}

    def _rules_review(self, user: UserInfo, spec: Obj) -> Obj:
        """Upstream's selfsubjectrulesreview REST: the union of what each authorizer enumerates; the
        answer carries no spec, as upstream's does not."""
        namespace = spec.get("namespace") or ""
        if not namespace:
            raise errors.bad_request("no namespace on request")
        resource_rules, url_rules, incomplete, errs = self.authorizer.rules_for(user, namespace)
        status: Obj = {"resourceRules": resource_rules, "nonResourceRules": url_rules, "incomplete": incomplete}
        if errs:
            status["evaluationError"] = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
        return {"kind": self.info.kind, "apiVersion": self.info.api_version, "metadata": {}, "spec": {},
                "status": status}
