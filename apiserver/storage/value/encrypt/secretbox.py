"""NaCl secretbox, XSalsa20-Poly1305 (upstream: value/encrypt/secretbox/secretbox.go, on
golang.org/x/crypto/nacl/secretbox), on PyNaCl (libsodium).

Stored layout, as upstream's: a 24-byte random nonce, then the box (16-byte Poly1305 tag, ciphertext):
exactly what PyNaCl's SecretBox.encrypt returns.
"""

from __future__ import annotations

import nacl.exceptions
import nacl.secret
import nacl.utils

from apiserver.storage.value import TransformError

NONCE_SIZE = nacl.secret.SecretBox.NONCE_SIZE  # 24


class SecretboxTransformer:
    def __init__(self, key: bytes):
        self._box = nacl.secret.SecretBox(key)  # a 32-byte key

    def transform_to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        return bytes(self._box.encrypt(data, nacl.utils.random(NONCE_SIZE)))

    def transform_from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        if len(data) < NONCE_SIZE:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return self._box.decrypt(data), False
        except nacl.exceptions.CryptoError:
            raise TransformError("output array was not large enough for encryption") from None
