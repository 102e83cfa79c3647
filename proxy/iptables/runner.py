"""The host's packet filter through the real binaries: upstream's pkg/util/iptables/iptables.go.

iptables-restore --noflush for every batch (atomic per table), iptables-save to read the kernel,
and iptables -C / -I for the jump rules from the built-in chains (upstream's EnsureRule with
Prepend). `--wait` waits for the xtables lock another writer (Docker, the CNI plugins, another
proxy) may hold instead of failing.
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)

WAIT = ["--wait", "5"]


class IptablesError(Exception):
    pass


async def _run(argv: list[str], stdin: str | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    if proc.returncode != 0:
        raise IptablesError(f"{' '.join(argv[:3])} failed (exit {proc.returncode}): {err.decode().strip()}")
    return out.decode()


class Runner:
    def __init__(self, iptables: str = "iptables") -> None:
        self.iptables = iptables

    async def restore(self, text: str) -> None:
        """One atomic batch; tables and chains it does not name stay as they are."""
        await _run([f"{self.iptables}-restore", "--noflush", *WAIT], stdin=text)

    async def save(self, *tables: str) -> str:
        parts = [await _run([f"{self.iptables}-save", "-t", table]) for table in tables]
        return "".join(parts)

    async def chains(self, table: str) -> list[str]:
        """The chains of one table (iptables-save's `:NAME` lines), read as a stream: with 1,000
        Services the whole save is megabytes that need not be held at once."""
        proc = await asyncio.create_subprocess_exec(
            f"{self.iptables}-save", "-t", table, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, limit=1 << 20)
        assert proc.stdout is not None and proc.stderr is not None
        names = []
        async for line in proc.stdout:
            if line.startswith(b":"):
                names.append(line[1:].split(b" ", 1)[0].decode())
        err = await proc.stderr.read()
        if await proc.wait() != 0:
            raise IptablesError(f"{self.iptables}-save -t {table} failed (exit {proc.returncode}): {err.decode()}")
        return names

    async def ensure_rule(self, table: str, chain: str, rule: list[str]) -> bool:
        """Prepend `rule` to `chain` unless it is there; True if it was added."""
        try:
            await _run([self.iptables, *WAIT, "-t", table, "-C", chain, *rule])
            return False
        except IptablesError:
            pass
        await _run([self.iptables, *WAIT, "-t", table, "-I", chain, "1", *rule])
        return True
