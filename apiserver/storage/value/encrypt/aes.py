"""AES-CBC with PKCS#7 padding and AES-GCM (upstream: value/encrypt/aes/aes.go), on `cryptography`.

Stored layouts, as upstream's so either apiserver reads the other's etcd:
- aescbc: 16-byte random IV, then the CBC ciphertext of the PKCS#7-padded value;
- aesgcm: 12-byte random nonce, then the GCM ciphertext and its 16-byte tag; the etcd key is the
  additional authenticated data.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from apiserver.storage.value import TransformError

BLOCK_SIZE = 16
GCM_NONCE_SIZE = 12


class CBCTransformer:
    def __init__(self, key: bytes):
        self._algorithm = algorithms.AES(key)  # checks the key size (16, 24 or 32 bytes)

    def transform_to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        iv = os.urandom(BLOCK_SIZE)
        pad = BLOCK_SIZE - len(data) % BLOCK_SIZE  # always at least one byte of padding
        encryptor = Cipher(self._algorithm, modes.CBC(iv)).encryptor()
        return iv + encryptor.update(data + bytes([pad]) * pad) + encryptor.finalize()

    def transform_from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        if len(data) < BLOCK_SIZE:
            raise TransformError("the stored data was shorter than the required size")
        iv, body = data[:BLOCK_SIZE], data[BLOCK_SIZE:]
        if len(body) % BLOCK_SIZE != 0:
            raise TransformError("the stored data is not a multiple of the block size")
        decryptor = Cipher(self._algorithm, modes.CBC(iv)).decryptor()
        result = decryptor.update(body) + decryptor.finalize()
        pad = result[-1] if result else 0
        if pad == 0 or pad > len(result):
            raise TransformError("invalid PKCS7 data (empty or not padded)")
        if result[-pad:] != bytes([pad]) * pad:
            raise TransformError("invalid padding on input")
        return result[:-pad], False


class GCMTransformer:
    def __init__(self, key: bytes):
        self._aead = AESGCM(key)

    def transform_to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        nonce = os.urandom(GCM_NONCE_SIZE)
        return nonce + self._aead.encrypt(nonce, data, authenticated_data)

    def transform_from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        if len(data) < GCM_NONCE_SIZE:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return self._aead.decrypt(data[:GCM_NONCE_SIZE], data[GCM_NONCE_SIZE:], authenticated_data), False
        except InvalidTag:
            raise TransformError("cipher: message authentication failed") from None
