"""machinery/uvicorn_server.py: uvicorn's main loop ticks once a second (the Date header refreshed at each tick)
and a stop wakes it at once; it still serves."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import uvicorn

from machinery import uvicorn_server
from machinery.uvicorn_server import QuietServer


async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]


async def test_it_serves_ticks_once_a_second_and_stops_at_once() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = QuietServer(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    ticks: list[int] = []
    on_tick = server.on_tick

    async def counting(counter: int) -> bool:
        ticks.append(counter)
        return await on_tick(counter)

    server.on_tick = counting  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(10):
        while not server.started:
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient() as client:
            response = await client.get(f"http://127.0.0.1:{port}/")
        assert response.status_code == 200 and response.text == "ok" and response.headers["date"]
        await asyncio.sleep(0.5)
        assert len(ticks) == 1  # uvicorn's own loop would have ticked 5 times by now
        assert all(t % 10 == 0 for t in ticks)  # each tick refreshes the Date header
        stopping = time.monotonic()
        server.should_exit = True
        await task
    assert time.monotonic() - stopping < uvicorn_server.TICK_SECONDS  # woken, not at the next tick
