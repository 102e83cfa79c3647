"""authentication.k8s.io/v1 TokenRequest: the serviceaccounts/{name}/token subresource (upstream
k8s.io/api/authentication/v1/types.go)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.meta import ObjectMeta, Time


class BoundObjectReference(ApiModel):
    """The object a token is bound to: the token is valid only while it exists (a Pod or a Secret)."""

    kind: str | None = None
    api_version: str | None = None
    name: str | None = None
    uid: str | None = None


class TokenRequestSpec(ApiModel):
    audiences: list[str] | None = None  # Go's `json:"audiences"` sends null when empty
    expiration_seconds: int | None = None
    bound_object_ref: BoundObjectReference | None = None


class TokenRequestStatus(ApiModel):
    """Written by the server; clients send it empty (kubectl: `expirationTimestamp: null`)."""

    token: str | None = None
    expiration_timestamp: Time | None = None


class TokenRequest(ApiModel):
    api_version: Literal["authentication.k8s.io/v1"] = "authentication.k8s.io/v1"
    kind: Literal["TokenRequest"] = "TokenRequest"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TokenRequestSpec = Field(default_factory=TokenRequestSpec)
    status: TokenRequestStatus | None = None


class UserInfo(ApiModel):
    """The user as the apiserver authenticated it (authentication/v1 UserInfo)."""

    username: str | None = None
    uid: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None


class SelfSubjectReviewStatus(ApiModel):
    user_info: UserInfo | None = None


class SelfSubjectReview(ApiModel):
    """`kubectl auth whoami`: created, answered with the caller's own user info, never stored
    (upstream pkg/registry/authentication/selfsubjectreview)."""

    api_version: Literal["authentication.k8s.io/v1"] = "authentication.k8s.io/v1"
    kind: Literal["SelfSubjectReview"] = "SelfSubjectReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    status: SelfSubjectReviewStatus | None = None


class TokenReviewSpec(ApiModel):
    token: str | None = None
    audiences: list[str] | None = None


class TokenReviewStatus(ApiModel):
    authenticated: bool | None = None
    user: UserInfo | None = None
    audiences: list[str] | None = None
    error: str | None = None


class TokenReview(ApiModel):
    """A token's review (upstream pkg/registry/authentication/tokenreview): who the token's bearer is, for
    the components that delegate authentication (their secure ports); created, answered, never stored."""

    api_version: Literal["authentication.k8s.io/v1"] = "authentication.k8s.io/v1"
    kind: Literal["TokenReview"] = "TokenReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TokenReviewSpec = Field(default_factory=TokenReviewSpec)
    status: TokenReviewStatus | None = None
