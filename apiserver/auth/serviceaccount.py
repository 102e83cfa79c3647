"""Service-account tokens: JWTs signed with the cluster's service-account key (upstream:
pkg/serviceaccount). The controller-manager signs one per controller with
--service-account-private-key-file; the apiserver verifies them with --service-account-key-file.

Claims follow upstream's bound tokens: `iss`, `sub` = system:serviceaccount:NS:NAME, `aud`,
`iat`/`nbf`/`exp` and a `kubernetes.io` claim naming the namespace and service account.
ES256 (ECDSA P-256, the key pki.py makes) and RS256 (an RSA key) are understood.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"

PublicKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey
SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


class TokenError(ValueError):
    """The token is not a valid service-account token (malformed, bad signature, expired, ...)."""


def username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as e:
        raise TokenError("malformed token: bad base64") from e


def load_signing_key(path: str | Path) -> SigningKey:
    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"{path}: service-account keys must be EC or RSA")
    return key


def load_public_keys(path: str | Path) -> list[PublicKey]:
    """Every public key in a PEM file (a private key's public half counts, as upstream allows)."""
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


def _key_id(public: PublicKey) -> str:
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


def sign_token(key: SigningKey, namespace: str, name: str, *, uid: str = "", issuer: str = DEFAULT_ISSUER,
               audiences: tuple[str, ...] = (DEFAULT_ISSUER,), expiration_seconds: int | None = None,
               now: float | None = None) -> str:
    """A signed service-account token for NAMESPACE/NAME; no `exp` when expiration_seconds is None
    (a legacy-style long-lived token, as upstream's controller-manager credentials are)."""
    issued = int(now if now is not None else time.time())
    alg = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
    header = {"alg": alg, "kid": _key_id(key.public_key()), "typ": "JWT"}
    claims: dict[str, Any] = {
        "iss": issuer, "aud": list(audiences), "sub": username(namespace, name), "iat": issued, "nbf": issued,
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
    }
    if expiration_seconds is not None:
        claims["exp"] = issued + expiration_seconds
    signing_input = f"{_b64(orjson.dumps(header))}.{_b64(orjson.dumps(claims))}".encode("ascii")
    if isinstance(key, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        size = (key.curve.key_size + 7) // 8
        signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    else:
        signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input.decode('ascii')}.{_b64(signature)}"


@dataclass(frozen=True)
class ServiceAccountClaims:
    namespace: str
    name: str
    uid: str
    expires: float | None


class TokenVerifier:
    """Checks signature (against any of the keys), issuer, audience, times, and the claims' shape."""

    def __init__(self, keys: list[PublicKey], issuers: tuple[str, ...] = (DEFAULT_ISSUER,),
                 audiences: tuple[str, ...] = (DEFAULT_ISSUER,)):
        self.keys = keys
        self.issuers = issuers
        self.audiences = audiences

    def verify(self, token: str, now: float | None = None) -> ServiceAccountClaims:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenError("malformed token: not a JWT")
        try:
            header = orjson.loads(_unb64(parts[0]))
            claims = orjson.loads(_unb64(parts[1]))
        except orjson.JSONDecodeError as e:
            raise TokenError("malformed token: bad JSON") from e
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise TokenError("malformed token: header and claims must be objects")
        signature = _unb64(parts[2])
        signing_input = f"{parts[0]}.{parts[1]}".encode("ascii")
        alg = header.get("alg")
        if not any(self._check(key, alg, signing_input, signature) for key in self.keys):
            raise TokenError("invalid signature")
        if claims.get("iss") not in self.issuers:
            raise TokenError("token issuer is not accepted")
        aud = claims.get("aud")
        auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not any(a in self.audiences for a in auds):
            raise TokenError("token audience is not accepted")
        t = now if now is not None else time.time()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if isinstance(exp, int | float) and t >= exp:
            raise TokenError("token has expired")
        if isinstance(nbf, int | float) and t + 60 < nbf:  # a minute of clock skew, as upstream allows
            raise TokenError("token is not valid yet")
        k8s = claims.get("kubernetes.io")
        sa = k8s.get("serviceaccount") if isinstance(k8s, dict) else None
        namespace = k8s.get("namespace") if isinstance(k8s, dict) else None
        name = sa.get("name") if isinstance(sa, dict) else None
        if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
            raise TokenError("token names no service account")
        if claims.get("sub") != username(namespace, name):
            raise TokenError("token subject does not match its service account")
        uid = sa.get("uid") if isinstance(sa, dict) else ""
        return ServiceAccountClaims(namespace, name, uid if isinstance(uid, str) else "",
                                    float(exp) if isinstance(exp, int | float) else None)

    @staticmethod
    def _check(key: PublicKey, alg: Any, signing_input: bytes, signature: bytes) -> bool:
        try:
            if alg == "ES256" and isinstance(key, ec.EllipticCurvePublicKey):
                if len(signature) != 64:
                    return False
                der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
                key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
                return True
            if alg == "RS256" and isinstance(key, rsa.RSAPublicKey):
                key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
                return True
        except InvalidSignature:
            return False
        return False
