"""apiserver.registry.token.LiveTokenValidator and the authenticator around it: a verified
token holds only while its service account (and bound pod) exist with the uids it names, as
upstream's pkg/serviceaccount/claims.go validator decides (things deleted less than a minute ago
still count, as its leeway allows)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric import ec

from apiserver import errors
from apiserver.auth import serviceaccount as sa
from apiserver.auth.authn import Authenticator
from apiserver.registry.token import LiveTokenValidator
from apiserver.storage.cacher import CachedObject
from apiserver.storage.predicate import Attrs


class Cache:
    """What the validator reads of a Store: `cached(namespace, name)`, and `get` from storage (`stored`:
    what etcd holds that the watch cache has not seen yet)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], CachedObject] = {}
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.gets = 0
        self.rv = 0

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        self.gets += 1
        cached = self.objects.get((namespace, name))
        if cached is not None:
            return dict(orjson.loads(cached.raw))
        if (namespace, name) in self.stored:
            return self.stored[(namespace, name)]
        raise errors.ApiError(404, "NotFound", f'serviceaccounts "{name}" not found')

    def put(self, namespace: str, name: str, uid: str, deleted_ago: float | None = None) -> None:
        meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
        if deleted_ago is not None:
            meta["deletionTimestamp"] = datetime.fromtimestamp(time.time() - deleted_ago, UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
        self.rv += 1
        self.objects[(namespace, name)] = CachedObject(f"/x/{namespace}/{name}", self.rv,
                                                       orjson.dumps({"metadata": meta}), Attrs({}, {}))

    def cached(self, namespace: str, name: str) -> CachedObject | None:
        return self.objects.get((namespace, name))


def review(authn: Authenticator, token: str, audiences: tuple[str, ...]) -> tuple[Any, list[str], str]:
    return asyncio.run(authn.review(token, audiences))


def claims(uid: str = "sa-uid", pod: sa.BoundObject | None = None, secret: sa.BoundObject | None = None
           ) -> sa.ServiceAccountClaims:
    return sa.ServiceAccountClaims("ns", "robot", uid, None, pod, secret, "jti")


def test_the_account_must_exist_with_the_tokens_uid() -> None:
    accounts, pods = Cache(), Cache()
    check = LiveTokenValidator(accounts, pods)  # type: ignore[arg-type]
    now = time.time()
    assert check(claims(), now) == 'serviceaccounts "robot" not found'
    accounts.put("ns", "robot", "sa-uid")
    assert check(claims(), now) is None
    accounts.put("ns", "robot", "another-uid")  # deleted and recreated: a new uid, seen at a new revision
    assert check(claims(), now) == "service account UID (another-uid) does not match claim (sa-uid)"
    accounts.put("ns", "robot", "sa-uid", deleted_ago=10)  # being deleted a moment ago: still within the leeway
    assert check(claims(), time.time()) is None
    accounts.put("ns", "robot", "sa-uid", deleted_ago=120)
    assert check(claims(), time.time()) == "service account ns/robot has been deleted"


def test_a_bound_pod_must_exist_with_its_uid() -> None:
    accounts, pods = Cache(), Cache()
    accounts.put("ns", "robot", "sa-uid")
    check = LiveTokenValidator(accounts, pods)  # type: ignore[arg-type]
    bound = claims(pod=sa.BoundObject("Pod", "job", "pod-uid"))
    assert check(bound, time.time()) == "service account token has been invalidated"
    pods.put("ns", "job", "pod-uid")
    assert check(bound, time.time()) is None
    pods.put("ns", "job", "pod-uid", deleted_ago=5)
    assert check(bound, time.time()) is None
    pods.put("ns", "job", "pod-uid", deleted_ago=90)
    assert check(bound, time.time()) == "service account token has been invalidated"
    pods.put("ns", "job", "other-pod")
    assert check(bound, time.time()) == "pod UID (other-pod) does not match service account pod ref claim (pod-uid)"
    # no Secrets are served: a secret-bound token cannot hold
    assert check(claims(secret=sa.BoundObject("Secret", "s", "u")), time.time()) == \
        "service account token has been invalidated"


def test_the_authenticator_asks_on_every_request_not_only_the_first() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    accounts, pods = Cache(), Cache()
    accounts.put("ns", "robot", "sa-uid")
    authn = Authenticator(verifier=sa.TokenVerifier([key.public_key()]),
                          validator=LiveTokenValidator(accounts, pods))  # type: ignore[arg-type]
    token = sa.sign_token(key, "ns", "robot", uid="sa-uid",
                          bound=sa.BoundObject("Pod", "job", "pod-uid"))
    assert authn.from_token(token) is None  # the pod is not there
    pods.put("ns", "job", "pod-uid")
    user = authn.from_token(token)
    assert user is not None and user.uid == "sa-uid"
    assert user.extra["authentication.kubernetes.io/pod-name"] == ("job",)
    assert user.extra["authentication.kubernetes.io/pod-uid"] == ("pod-uid",)
    del accounts.objects[("ns", "robot")]  # the verified token is cached; the account check is not
    assert authn.from_token(token) is None


def test_a_token_review_answers_for_the_audiences_asked() -> None:
    """Upstream's tokenreview REST: the apiserver's own audiences when none are asked; a token for another
    audience is not authenticated, with the JWT authenticator's message; static tokens are audience-agnostic."""
    from machinery.authn.user import UserInfo

    key = ec.generate_private_key(ec.SECP256R1())
    accounts, pods = Cache(), Cache()
    accounts.put("ns", "robot", "sa-uid")
    static = UserInfo("alice", ("system:authenticated",), "1")
    authn = Authenticator({"static-token": static}, sa.TokenVerifier([key.public_key()], audiences=("api",)),
                          LiveTokenValidator(accounts, pods))  # type: ignore[arg-type]
    token = sa.sign_token(key, "ns", "robot", uid="sa-uid", audiences=("api", "vault"))
    user, audiences, error = review(authn, token, ())
    assert user is not None and user.name == "system:serviceaccount:ns:robot" and audiences == ["api"]
    assert error == ""
    assert review(authn, token, ("vault", "other"))[1] == ["vault"]
    user, audiences, error = review(authn, token, ("other",))
    assert user is None and audiences == []
    assert error == 'token audiences ["api" "vault"] is invalid for the target audiences ["other"]'
    assert review(authn, "a.b.c", ())[0] is None and review(authn, "a.b.c", ())[2].startswith("invalid bearer token")
    assert review(authn, "garbage", ()) == (None, [], "invalid bearer token")
    assert review(authn, "static-token", ()) == (static, ["api"], "")
    assert review(authn, "static-token", ("other",)) == (None, [], "")
    del accounts.objects[("ns", "robot")]
    user, _, error = review(authn, token, ())
    assert user is None and error == 'invalid bearer token, serviceaccounts "robot" not found'


def test_a_token_the_caches_have_not_seen_is_checked_in_storage() -> None:
    """Right after a start (the watch caches still listing) or for an account created a moment ago, a valid
    token is not refused: upstream's getter falls back from its listers to a live GET. A deleted account
    stays refused, and only a token whose signature holds makes the apiserver read storage."""
    key = ec.generate_private_key(ec.SECP256R1())
    accounts, pods = Cache(), Cache()
    validator = LiveTokenValidator(accounts, pods)  # type: ignore[arg-type]
    authn = Authenticator(verifier=sa.TokenVerifier([key.public_key()]), validator=validator,
                          lookup=validator.lookup)
    token = sa.sign_token(key, "ns", "robot", uid="sa-uid")
    header = f"Bearer {token}".encode()
    accounts.stored[("ns", "robot")] = {"metadata": {"name": "robot", "namespace": "ns", "uid": "sa-uid"}}
    assert authn.authenticate(None, header) is None  # the watch cache has not seen it
    user = asyncio.run(authn.authenticate_live(header))
    assert user is not None and user.name == "system:serviceaccount:ns:robot" and user.uid == "sa-uid"
    assert review(authn, token, ())[0] == user  # TokenReview too
    accounts.stored[("ns", "robot")]["metadata"]["uid"] = "recreated"
    assert asyncio.run(authn.authenticate_live(header)) is None
    del accounts.stored[("ns", "robot")]
    assert asyncio.run(authn.authenticate_live(header)) is None
    assert review(authn, token, ())[2] == 'invalid bearer token, serviceaccounts "robot" not found'
    gets = accounts.gets
    forged = sa.sign_token(ec.generate_private_key(ec.SECP256R1()), "ns", "robot", uid="sa-uid")
    assert asyncio.run(authn.authenticate_live(f"Bearer {forged}".encode())) is None
    assert asyncio.run(authn.authenticate_live(b"Basic abc")) is None
    assert asyncio.run(authn.authenticate_live(None)) is None
    assert accounts.gets == gets  # neither reached storage


def test_a_bound_pod_the_caches_have_not_seen_is_checked_in_storage() -> None:
    accounts, pods = Cache(), Cache()
    accounts.put("ns", "robot", "sa-uid")
    validator = LiveTokenValidator(accounts, pods)  # type: ignore[arg-type]
    claim = claims(pod=sa.BoundObject("Pod", "job", "pod-uid"))
    assert validator(claim, time.time()) == "service account token has been invalidated"
    assert asyncio.run(validator.lookup(claim, time.time())) == "service account token has been invalidated"
    pods.stored[("ns", "job")] = {"metadata": {"name": "job", "namespace": "ns", "uid": "pod-uid"}}
    assert asyncio.run(validator.lookup(claim, time.time())) is None
