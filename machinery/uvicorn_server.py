"""uvicorn's Server for the HTTP servers a component runs inside its own event loop (the kubelet's port, the
Docker shim's streaming server, a component's secure port), without waking that loop ten times a second.

uvicorn's main loop sleeps 0.1 s between ticks; a tick refreshes the Date header once in ten and otherwise only
looks at `should_exit`. In a process whose loop has nothing else to do between pods that is most of its idle CPU
(py-spy on a Docker shim during 30 pod starts: the tick loop held the GIL in 23% of the samples), and its timer
work is paid on the loop the pods' start-up runs on. Go's net/http (upstream's servers) has no such loop.

Here a tick comes once a second, the Date header's resolution, and refreshes it every time; setting
`should_exit` from the loop (a component's stop) wakes the main loop at once, so a stop is not a second slower.
"""

from __future__ import annotations

import asyncio
import contextlib

import uvicorn

TICK_SECONDS = 1.0


class QuietServer(uvicorn.Server):
    """uvicorn.Server whose main loop ticks once a second and wakes when `should_exit` is set."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit: asyncio.Event | None = None
        self._should_exit = False
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self._exit is not None:
            self._exit.set()

    async def main_loop(self) -> None:
        self._exit = asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 10) % 864000  # uvicorn refreshes the Date header at counter % 10 == 0: every tick
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK_SECONDS):
                    await self._exit.wait()
            should_exit = await self.on_tick(counter)
