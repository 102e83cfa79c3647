"""authentication.k8s.io/v1alpha1: the SelfSubjectReview of `kubectl auth whoami` as kubectl 1.26-1.27 ask
for it (1.28+ ask for v1 first and fall back to v1alpha1 on 404); the same type as v1's."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.authentication_v1 import SelfSubjectReviewStatus, UserInfo
from machinery.api.base import ApiModel
from machinery.api.meta import ObjectMeta

__all__ = ["SelfSubjectReview", "SelfSubjectReviewStatus", "UserInfo"]


class SelfSubjectReview(ApiModel):
    api_version: Literal["authentication.k8s.io/v1alpha1"] = "authentication.k8s.io/v1alpha1"
    kind: Literal["SelfSubjectReview"] = "SelfSubjectReview"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    status: SelfSubjectReviewStatus | None = None
