"""Service-account tokens: JWTs signed with the cluster's service-account key (upstream:
pkg/serviceaccount/jwt.go and claims.go), with PyJWT. The apiserver signs them for TokenRequest
(serviceaccounts/{name}/token) with --service-account-signing-key-file and verifies them with
--service-account-key-file.

Claims follow upstream's bound tokens: `iss`, `sub` = system:serviceaccount:NS:NAME, `aud`,
`iat`/`nbf`/`exp`, `jti`, and a `kubernetes.io` claim naming the namespace, the service account
(name and uid) and, for a pod-bound token, the pod (name and uid). ES256 (ECDSA P-256, the key
pki.py makes) and RS256 (an RSA key) are understood.

Verification here is the token alone (signature, issuer, audience, times, shape); that the
service account and the bound pod still exist with the uids the token names is checked against
the live objects by the authenticator (apiserver.auth.authn), as upstream's validator does.
"""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

# PyJWT and cryptography (~15 MB of RSS between them) are imported on the first key loaded or token signed or
# verified, not with the apiserver: one that is given no service-account key never needs them.
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    PublicKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey
    SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
# a minute of clock skew for `nbf` and for "deleted before now", as go-jose's DefaultLeeway
LEEWAY = 60.0


class TokenError(ValueError):
    """The token is not a valid service-account token (malformed, bad signature, expired, ...)."""


def username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}")


def load_signing_key(path: str | Path) -> SigningKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"{path}: service-account keys must be EC or RSA")
    return key


def load_public_keys(path: str | Path) -> list[PublicKey]:
    """Every public key in a PEM file (a private key's public half counts, as upstream allows)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    data = Path(path).read_bytes()
    keys: list[PublicKey] = []
    for block in data.split(b"-----END ")[:-1]:
        begin = block.rfind(b"-----BEGIN ")
        kind = block[begin + len(b"-----BEGIN "):].split(b"-----", 1)[0]
        pem = block[begin:] + b"-----END " + kind + b"-----\n"
        if b"PRIVATE KEY" in kind:
            private = serialization.load_pem_private_key(pem, password=None)
            public: Any = private.public_key()
        elif b"PUBLIC KEY" in kind:
            public = serialization.load_pem_public_key(pem)
        else:
            continue
        if isinstance(public, ec.EllipticCurvePublicKey | rsa.RSAPublicKey):
            keys.append(public)
    if not keys:
        raise ValueError(f"{path}: no EC or RSA key found")
    return keys


def key_id(public: PublicKey) -> str:
    """upstream keyIDFromPublicKey: base64url(SHA-256 of the DER public key)."""
    from cryptography.hazmat.primitives import serialization

    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode("ascii")


def _alg(key: SigningKey | PublicKey) -> str:
    from cryptography.hazmat.primitives.asymmetric import ec

    return "ES256" if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) else "RS256"


@dataclass(frozen=True)
class BoundObject:
    kind: str  # "Pod" (or "Secret")
    name: str
    uid: str


def sign_token(key: SigningKey, namespace: str, name: str, *, uid: str = "", issuer: str = DEFAULT_ISSUER,
               audiences: tuple[str, ...] = (DEFAULT_ISSUER,), expiration_seconds: int | None = None,
               now: float | None = None, bound: BoundObject | None = None, warn_after: int | None = None) -> str:
    """A signed service-account token for NAMESPACE/NAME (upstream serviceaccount.Claims); no `exp`
    when expiration_seconds is None."""
    issued = int(now if now is not None else time.time())
    k8s: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}}
    if bound is not None:
        k8s[bound.kind.lower()] = {"name": bound.name, "uid": bound.uid}
    if warn_after is not None:  # upstream's extended pod tokens: past this, a use is warned of, not refused
        k8s["warnafter"] = issued + warn_after
    claims: dict[str, Any] = {
        "iss": issuer, "aud": list(audiences), "sub": username(namespace, name), "iat": issued, "nbf": issued,
        "jti": str(uuid.uuid4()), "kubernetes.io": k8s,
    }
    if expiration_seconds is not None:
        claims["exp"] = issued + expiration_seconds
    import jwt

    return jwt.encode(claims, key, algorithm=_alg(key), headers={"kid": key_id(key.public_key())})


@dataclass(frozen=True)
class ServiceAccountClaims:
    namespace: str
    name: str
    uid: str
    expires: float | None
    pod: BoundObject | None = None
    secret: BoundObject | None = None
    jti: str = ""


def _bound(k8s: dict[str, Any], kind: str) -> BoundObject | None:
    ref = k8s.get(kind.lower())
    if ref is None:
        return None
    if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or not isinstance(ref.get("uid"), str):
        raise TokenError(f"token names a malformed {kind.lower()}")
    return BoundObject(kind, ref["name"], ref["uid"])


class TokenVerifier:
    """Checks signature (against any of the keys), issuer, audience, times, and the claims' shape."""

    def __init__(self, keys: list[PublicKey], issuers: tuple[str, ...] = (DEFAULT_ISSUER,),
                 audiences: tuple[str, ...] = (DEFAULT_ISSUER,)):
        self.keys = keys
        self.issuers = issuers
        self.audiences = audiences

    def verify(self, token: str, now: float | None = None,
               audiences: tuple[str, ...] | None = None) -> ServiceAccountClaims:
        """The token's claims if it is good for one of `audiences` (default: the apiserver's own)."""
        import jwt

        try:
            alg = jwt.get_unverified_header(token).get("alg")
        except jwt.PyJWTError as e:
            raise TokenError(f"malformed token: {e}") from e
        claims: dict[str, Any] | None = None
        for key in self.keys:
            if _alg(key) != alg:
                continue
            try:
                # exp checked below against `now`; nbf with a minute of skew; aud and iss by PyJWT
                claims = jwt.decode(token, key, algorithms=[alg], audience=list(audiences or self.audiences),
                                    issuer=list(self.issuers),
                                    options={"verify_exp": False, "verify_nbf": False, "verify_iat": False,
                                             "require": ["iss", "sub", "aud"]})
                break
            except jwt.InvalidSignatureError:
                continue
            except jwt.InvalidAudienceError as e:
                raise TokenError("token audience is not accepted") from e
            except jwt.InvalidIssuerError as e:
                raise TokenError("token issuer is not accepted") from e
            except jwt.PyJWTError as e:
                raise TokenError(str(e)) from e
        if claims is None:
            raise TokenError("invalid signature")
        t = now if now is not None else time.time()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if isinstance(exp, int | float) and t >= exp:
            raise TokenError("token has expired")
        if isinstance(nbf, int | float) and t + LEEWAY < nbf:
            raise TokenError("token is not valid yet")
        k8s = claims.get("kubernetes.io")
        if not isinstance(k8s, dict):
            raise TokenError("token names no service account")
        sa = k8s.get("serviceaccount")
        namespace = k8s.get("namespace")
        name = sa.get("name") if isinstance(sa, dict) else None
        if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
            raise TokenError("token names no service account")
        if claims.get("sub") != username(namespace, name):
            raise TokenError("token subject does not match its service account")
        uid = sa.get("uid") if isinstance(sa, dict) else ""
        jti = claims.get("jti")
        return ServiceAccountClaims(namespace, name, uid if isinstance(uid, str) else "",
                                    float(exp) if isinstance(exp, int | float) else None,
                                    _bound(k8s, "Pod"), _bound(k8s, "Secret"), jti if isinstance(jti, str) else "")


def token_audiences(token: str) -> list[str]:
    """The `aud` of a token already verified (or refused for its audience alone), as a list."""
    import jwt

    try:
        aud = jwt.decode(token, options={"verify_signature": False}).get("aud")
    except jwt.PyJWTError:
        return []
    if isinstance(aud, str):
        return [aud]
    return [a for a in aud if isinstance(a, str)] if isinstance(aud, list) else []
