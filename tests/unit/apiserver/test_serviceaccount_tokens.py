"""apiserver.registry.token.LiveTokenValidator and the authenticator around it: a verified
token holds only while its service account (and bound pod) exist with the uids it names, as
upstream's pkg/serviceaccount/claims.go validator decides (things deleted less than a minute ago
still count, as its leeway allows)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric import ec

from apiserver.auth import serviceaccount as sa
from apiserver.auth.authn import Authenticator
from apiserver.registry.token import LiveTokenValidator
from apiserver.storage.cacher import CachedObject
from apiserver.storage.predicate import Attrs


class Cache:
    """What the validator reads of a Store: `cached(namespace, name)`."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], CachedObject] = {}
        self.rv = 0

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
