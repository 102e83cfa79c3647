"""The TLS port's write coalescing (machinery/tls.py CoalescingTransport): a response's head and body
leave in one write, a lone write leaves at the end of the loop turn, and closing or handing the
connection on sends what is held first; the bytes keep their order."""

from __future__ import annotations

import asyncio
from typing import Any

from machinery.tls import CoalescingTransport


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.calls.append(("write", bytes(data)))

    def close(self) -> None:
        self.calls.append(("close", None))

    def set_protocol(self, protocol: Any) -> None:
        self.calls.append(("set_protocol", protocol))

    def is_closing(self) -> bool:
        return False


def wrap() -> tuple[CoalescingTransport, Recorder]:
    inner = Recorder()
    return CoalescingTransport(inner, asyncio.get_running_loop()), inner  # type: ignore[arg-type]


async def test_head_and_body_leave_in_one_write() -> None:
    t, inner = wrap()
    t.write(b"HTTP/1.1 201 Created\r\n\r\n")
    t.write(b"{}")
    assert inner.calls == [("write", b"HTTP/1.1 201 Created\r\n\r\n{}")]
    await asyncio.sleep(0)
    assert len(inner.calls) == 1  # nothing left to send at the end of the turn


async def test_a_lone_write_leaves_at_the_end_of_the_turn_in_order() -> None:
    t, inner = wrap()
    t.write(b"head")
    assert inner.calls == []
    await asyncio.sleep(0)
    assert inner.calls == [("write", b"head")]
    t.write(b"chunk1")
    t.write(b"chunk2")
    t.write(b"chunk3")
    await asyncio.sleep(0)
    assert [data for _, data in inner.calls] == [b"head", b"chunk1chunk2", b"chunk3"]


async def test_close_and_hand_over_send_what_is_held_first() -> None:
    t, inner = wrap()
    t.write(b"last")
    t.close()
    assert inner.calls == [("write", b"last"), ("close", None)]
    t2, inner2 = wrap()
    t2.write(b"101 Switching Protocols")
    t2.set_protocol("ws")  # type: ignore[arg-type]
    assert inner2.calls == [("write", b"101 Switching Protocols"), ("set_protocol", "ws")]
    assert t2.is_closing() is False  # everything else is the transport's
