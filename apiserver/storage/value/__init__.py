"""Value transformers: what happens to an object's bytes between the codec and etcd (upstream:
staging/src/k8s.io/apiserver/pkg/storage/value/transformer.go).

A transformer turns the plaintext a store writes into what etcd holds, and back. Encryption at rest
is a list of prefix transformers: the first one writes; on a read, the one whose prefix the stored
value carries reads it, so old keys keep reading what they wrote while new writes use the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class TransformError(Exception):
    """A stored value no configured transformer can read (wrong key, corrupt data, unknown prefix)."""


class Transformer(Protocol):
    """Upstream value.Transformer. `authenticated_data` is the etcd key: AEAD ciphers bind the value to
    it, so a ciphertext copied under another key does not decrypt."""

    def transform_to_storage(self, data: bytes, authenticated_data: bytes) -> bytes: ...

    def transform_from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        """The plaintext, and whether it is stale (written by other than the first transformer)."""
        ...


class IdentityTransformer:
    """Values as they are (upstream: value/encrypt/identity): plaintext, no prefix."""

    def transform_to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        return data

    def transform_from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        return data, False


IDENTITY = IdentityTransformer()


@dataclass(frozen=True)
class PrefixTransformer:
    """A transformer whose output starts with `prefix` (upstream value.PrefixTransformer)."""

    prefix: bytes
    transformer: Transformer


class PrefixTransformers:
    """upstream value.NewPrefixTransformers: the first writes (prefix + its output); a read goes to the
    first whose prefix the value starts with. An identity provider has the empty prefix and so reads
    anything, except a value that looks encrypted (`k8s:enc:`): that is refused rather than handed
    back as if it were plaintext, as upstream's identity transformer does."""

    ENCRYPTED = b"k8s:enc:"

    def __init__(self, *transformers: PrefixTransformer):
        if not transformers:
            raise ValueError("at least one transformer is required")
        self.transformers = transformers

    def transform_to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        first = self.transformers[0]
        return first.prefix + first.transformer.transform_to_storage(data, authenticated_data)

    def transform_from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        refused: TransformError | None = None
        for i, t in enumerate(self.transformers):
            if not data.startswith(t.prefix):
                continue
            if not t.prefix and data.startswith(self.ENCRYPTED):
                # identity ahead of a cipher (migrating away from encryption): the cipher further down
                # reads what is still encrypted
                refused = TransformError("identity transformer tried to read encrypted data")
                continue
            plaintext, stale = t.transformer.transform_from_storage(data[len(t.prefix):], authenticated_data)
            return plaintext, stale or i != 0
        raise refused or TransformError("no matching prefix found")
