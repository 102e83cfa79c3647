"""machinery.delegated_auth's caller identity: a verified client certificate first, else a bearer token
through a TokenReview, cached as upstream's delegating authenticator caches (answers either way for the
TTL; an apiserver that cannot be reached is no answer and is asked again)."""

from __future__ import annotations

import asyncio
from typing import Any

from machinery.delegated_auth import TOKEN_REVIEW_PATH, TokenReviewer, authenticate


class Reviews:
    """The apiserver's side of TokenReview, for the reviewer's logic alone."""

    def __init__(self, users: dict[str, dict[str, Any]]) -> None:
        self.users = users
        self.asked: list[str] = []
        self.down = False

    async def request(self, method: str, path: str, *, body: Any = None) -> Any:
        assert (method, path) == ("POST", TOKEN_REVIEW_PATH) and body["kind"] == "TokenReview"
        if self.down:
            raise ConnectionError("apiserver unreachable")
        token = body["spec"]["token"]
        self.asked.append(token)
        user = self.users.get(token)
        return {**body, "status": {"authenticated": True, "user": user} if user else {"authenticated": False}}


def scope(authorization: bytes | None = None, peercert: Any = None) -> dict[str, Any]:
    headers = [(b"authorization", authorization)] if authorization is not None else []
    return {"type": "http", "headers": headers, "peercert": peercert}


def test_a_bearer_token_is_reviewed_once_per_ttl_and_a_certificate_needs_no_review() -> None:
    reviews = Reviews({"good": {"username": "system:serviceaccount:ns:prom", "uid": "u1",
                                "groups": ["system:serviceaccounts", "system:authenticated"],
                                "extra": {"authentication.kubernetes.io/pod-name": ["prom-0"]}}})
    tokens = TokenReviewer(reviews, ttl=60)

    async def run() -> None:
        user = await authenticate(scope(b"Bearer good"), tokens)
        assert user is not None and user.name == "system:serviceaccount:ns:prom" and user.uid == "u1"
        assert user.groups == ("system:serviceaccounts", "system:authenticated")
        assert user.extra == {"authentication.kubernetes.io/pod-name": ("prom-0",)}
        assert await authenticate(scope(b"Bearer good"), tokens) == user
        assert await authenticate(scope(b"Bearer bad"), tokens) is None
        assert await authenticate(scope(b"Bearer bad"), tokens) is None
        assert reviews.asked == ["good", "bad"]  # both answers cached
        assert await authenticate(scope(b"Basic Zm9vOmJhcg=="), tokens) is None
        assert await authenticate(scope(b"Bearer "), tokens) is None
        assert await authenticate(scope(), tokens) is None
        cert = {"subject": ((("commonName", "jane"),), (("organizationName", "devs"),))}
        who = await authenticate(scope(b"Bearer good", cert), tokens)
        assert who is not None and who.name == "jane" and "devs" in who.groups
        assert reviews.asked == ["good", "bad"]
        assert await authenticate(scope(b"Bearer good"), None) is None  # no token authenticator

    asyncio.run(run())


def test_an_unreachable_apiserver_is_not_cached() -> None:
    reviews = Reviews({"good": {"username": "bob"}})
    tokens = TokenReviewer(reviews)

    async def run() -> None:
        reviews.down = True
        assert await tokens.user("good") is None
        reviews.down = False
        user = await tokens.user("good")
        assert user is not None and user.name == "bob"

    asyncio.run(run())
