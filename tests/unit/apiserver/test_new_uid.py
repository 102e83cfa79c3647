"""A create's metadata.uid: a random RFC 4122 version-4 UUID in its canonical text, as str(uuid.uuid4())."""

from __future__ import annotations

import re
import uuid

from apiserver.registry.generic import new_uid


def test_new_uid_is_a_canonical_version_4_uuid() -> None:
    uids = [new_uid() for _ in range(2000)]
    assert len(set(uids)) == len(uids)
    variants = set()
    for text in uids:
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", text), text
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == text
        variants.add(text[19])
    assert variants == set("89ab")  # all four variant nibbles occur: the random bits beneath are kept


def test_a_forked_child_draws_its_own_uids() -> None:
    import os

    new_uid()  # the parent has random bytes in hand
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover — the child
        os.write(write, "".join(new_uid() for _ in range(4)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 4096).decode()
    os.close(read)
    parent = "".join(new_uid() for _ in range(4))
    assert len(child) == len(parent) == 4 * 36 and child != parent
