"""Files of a configMap or secret volume, replaced all at once (upstream: pkg/volume/util/atomic_writer.go).

The volume directory holds the payload in a timestamped directory `..2026_11_24_04_30_00.123456789`,
a symlink `..data` to it, and for each top-level path of the payload a symlink `key -> ..data/key`.
An update writes a new timestamped directory, points `..data_tmp` at it and renames that over `..data`
(one atomic rename), fixes the user-visible symlinks and removes the old directory: a reader in the
container sees either the old set of files or the new one, never a mix.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

DATA_DIR = "..data"
DATA_DIR_TMP = "..data_tmp"


def _current(volume: Path) -> Path | None:
    link = volume / DATA_DIR
    if not link.is_symlink():
        return None
    return volume / os.readlink(link)


def _same(directory: Path, payload: dict[str, tuple[bytes, int]]) -> bool:
    for rel, (content, mode) in payload.items():
        path = directory / rel
        try:
            if path.read_bytes() != content or (path.stat().st_mode & 0o7777) != mode:
                return False
        except OSError:
            return False
    written = {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}
    return written == set(payload)


def write(volume: Path, payload: dict[str, tuple[bytes, int]]) -> bool:
    """Make the volume show exactly `payload` (relative path -> (content, mode)). True if anything changed."""
    volume.mkdir(parents=True, exist_ok=True)
    old = _current(volume)
    if old is not None and _same(old, payload):
        return False
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
    new = Path(tempfile.mkdtemp(prefix=stamp, dir=volume))
    os.chmod(new, 0o755)
    for rel, (content, mode) in payload.items():
        path = new / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        os.chmod(path, mode)
    tmp_link = volume / DATA_DIR_TMP
    if tmp_link.is_symlink() or tmp_link.exists():
        tmp_link.unlink()
    os.symlink(new.name, tmp_link)
    os.rename(tmp_link, volume / DATA_DIR)
    tops = {rel.split("/", 1)[0] for rel in payload}
    for top in tops:
        link = volume / top
        if not link.is_symlink():
            os.symlink(f"{DATA_DIR}/{top}", link)
    for entry in volume.iterdir():  # symlinks of paths gone from the payload
        if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in tops:
            entry.unlink()
    if old is not None and old.is_dir() and old != new:
        shutil.rmtree(old, ignore_errors=True)
    return True
