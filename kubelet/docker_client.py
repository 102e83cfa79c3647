"""A small asyncio client of the Docker Engine API over its unix socket.

The kubelet's event loop must never block on Docker, so this speaks the Engine's HTTP API with
httpx's async transport instead of the (blocking) docker SDK. Two things plain HTTP cannot do are
done on a raw socket: `exec` with stdin (Docker hijacks the connection after `101 UPGRADED`), and
nothing else. Log and exec output of a container without a TTY is multiplexed: frames of an 8-byte
header (stream 0/1/2, three zero bytes, big-endian length) and the payload (`FrameDecoder`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

DEFAULT_SOCKET = "/var/run/docker.sock"
STDIN, STDOUT, STDERR = 0, 1, 2


class DockerError(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"docker: {status}: {message}")


class NotFound(DockerError):
    pass


class Conflict(DockerError):
    pass


def _error(status: int, body: bytes) -> DockerError:
    try:
        message = json.loads(body).get("message") or body.decode(errors="replace")
    except (ValueError, AttributeError):
        message = body.decode(errors="replace").strip()
    cls = NotFound if status == 404 else Conflict if status == 409 else DockerError
    return cls(status, message)


def split_image(image: str) -> tuple[str, str]:
    """("repo", "tag-or-digest") as /images/create wants them; an untagged name means :latest."""
    if "@" in image:
        name, digest = image.split("@", 1)
        return name, digest
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = image.rsplit(":", 1)
        return name, tag
    return image, "latest"


class FrameDecoder:
    """Incremental decoder of Docker's multiplexed stream: feed bytes, get (stream, payload) frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        frames = []
        while len(self._buf) >= 8:
            stream = self._buf[0]
            (size,) = struct.unpack(">I", self._buf[4:8])
            if len(self._buf) < 8 + size:
                break
            frames.append((stream, bytes(self._buf[8:8 + size])))
            del self._buf[:8 + size]
        return frames


class HijackedStream:
    """The raw two-way connection of a started exec (stdin in, multiplexed or raw output out)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tty: bool) -> None:
        self.reader = reader
        self.writer = writer
        self.tty = tty

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        """(stream, data) until the process closes its output; a TTY's output all counts as stdout."""
        decoder = FrameDecoder()
        while True:
            data = await self.reader.read(65536)
            if not data:
                return
            if self.tty:
                yield STDOUT, data
            else:
                for frame in decoder.feed(data):
                    yield frame

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    def close_stdin(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            if self.writer.can_write_eof():
                self.writer.write_eof()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


class DockerClient:
    def __init__(self, socket_path: str = DEFAULT_SOCKET, timeout: float = 120.0) -> None:
        self.socket_path = socket_path
        self._http = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=socket_path),
            base_url="http://docker",
            timeout=httpx.Timeout(timeout, connect=10.0),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                       body: Any = None, timeout: float | None = None) -> Any:
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        content = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        response = await self._http.request(method, path, params=_params(params), content=content, headers=headers,
                                            **extra)
        if response.status_code >= 400:
            raise _error(response.status_code, response.content)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            return response.content

    # -- system ---------------------------------------------------------------------------------

    async def version(self) -> dict[str, Any]:
        return await self._request("GET", "/version")

    async def info(self) -> dict[str, Any]:
        return await self._request("GET", "/info")

    async def events(self, filters: Mapping[str, list[str]]) -> AsyncIterator[dict[str, Any]]:
        """Docker's event stream (never ends by itself)."""
        params = {"filters": json.dumps(filters)}
        timeout = httpx.Timeout(None, connect=10.0)
        async with self._http.stream("GET", "/events", params=params, timeout=timeout) as response:
            if response.status_code >= 400:
                raise _error(response.status_code, await response.aread())
            async for line in response.aiter_lines():
                if line.strip():
                    yield json.loads(line)

    # -- containers -----------------------------------------------------------------------------

    async def list_containers(self, filters: Mapping[str, list[str]], all: bool = True) -> list[dict[str, Any]]:
        return await self._request("GET", "/containers/json",
                                   params={"all": "1" if all else "0", "filters": json.dumps(filters)})

    async def inspect_container(self, container_id: str) -> dict[str, Any]:
        return await self._request("GET", f"/containers/{quote(container_id)}/json")

    async def create_container(self, name: str, config: Mapping[str, Any]) -> str:
        data = await self._request("POST", "/containers/create", params={"name": name}, body=config)
        return data["Id"]

    async def start_container(self, container_id: str) -> None:
        await self._request("POST", f"/containers/{quote(container_id)}/start")

    async def stop_container(self, container_id: str, timeout: int) -> None:
        """SIGTERM (or the image's stop signal), SIGKILL after `timeout` seconds."""
        await self._request("POST", f"/containers/{quote(container_id)}/stop", params={"t": str(max(timeout, 0))},
                            timeout=max(timeout, 0) + 60.0)

    async def kill_container(self, container_id: str, signal: str = "KILL") -> None:
        await self._request("POST", f"/containers/{quote(container_id)}/kill", params={"signal": signal})

    async def remove_container(self, container_id: str, force: bool = True) -> None:
        await self._request("DELETE", f"/containers/{quote(container_id)}",
                            params={"force": "1" if force else "0", "v": "1"})

    async def logs(self, container_id: str, *, follow: bool = False, tail: int | None = None,
                   timestamps: bool = False, since: float | None = None,
                   tty: bool = False) -> AsyncIterator[tuple[int, bytes]]:
        """(stream, data) chunks of a container's log (stdout and stderr)."""
        params: dict[str, str] = {"stdout": "1", "stderr": "1", "follow": "1" if follow else "0",
                                  "timestamps": "1" if timestamps else "0",
                                  "tail": "all" if tail is None else str(tail)}
        if since is not None:
            params["since"] = f"{since:.9f}"
        timeout = httpx.Timeout(None if follow else 120.0, connect=10.0)
        async with self._http.stream("GET", f"/containers/{quote(container_id)}/logs", params=params,
                                     timeout=timeout) as response:
            if response.status_code >= 400:
                raise _error(response.status_code, await response.aread())
            decoder = FrameDecoder()
            async for chunk in response.aiter_raw():
                if tty:
                    yield STDOUT, chunk
                else:
                    for frame in decoder.feed(chunk):
                        yield frame

    # -- images ---------------------------------------------------------------------------------

    async def inspect_image(self, image: str) -> dict[str, Any] | None:
        try:
            return await self._request("GET", f"/images/{quote(image, safe='/:@')}/json")
        except NotFound:
            return None

    async def pull_image(self, image: str) -> None:
        """Pull; errors in the progress stream (Docker answers 200 first) raise DockerError too."""
        name, tag = split_image(image)
        async with self._http.stream("POST", "/images/create", params={"fromImage": name, "tag": tag},
                                     timeout=httpx.Timeout(600.0, connect=10.0)) as response:
            if response.status_code >= 400:
                raise _error(response.status_code, await response.aread())
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                with contextlib.suppress(ValueError):
                    message = json.loads(line)
                    if isinstance(message, dict) and message.get("error"):
                        raise DockerError(500, str(message["error"]))

    # -- exec -----------------------------------------------------------------------------------

    async def exec_create(self, container_id: str, cmd: list[str], *, stdin: bool = False, stdout: bool = True,
                          stderr: bool = True, tty: bool = False, env: list[str] | None = None) -> str:
        body = {"Cmd": cmd, "AttachStdin": stdin, "AttachStdout": stdout, "AttachStderr": stderr, "Tty": tty}
        if env:
            body["Env"] = env
        data = await self._request("POST", f"/containers/{quote(container_id)}/exec", body=body)
        return data["Id"]

    async def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        return await self._request("GET", f"/exec/{quote(exec_id)}/json")

    async def exec_resize(self, exec_id: str, height: int, width: int) -> None:
        with contextlib.suppress(DockerError):
            await self._request("POST", f"/exec/{quote(exec_id)}/resize", params={"h": str(height), "w": str(width)})

    async def exec_start(self, exec_id: str, tty: bool = False) -> HijackedStream:
        """Start an exec on a hijacked connection (stdin can then be written)."""
        reader, writer = await asyncio.open_unix_connection(self.socket_path, limit=1 << 20)
        body = json.dumps({"Detach": False, "Tty": tty}).encode()
        request = (f"POST /exec/{quote(exec_id)}/start HTTP/1.1\r\nHost: docker\r\n"
                   f"Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status_line = head.split(b"\r\n", 1)[0].decode(errors="replace")
        parts = status_line.split(" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if status not in (101, 200):
            rest = await asyncio.wait_for(reader.read(65536), 5)
            writer.close()
            raise _error(status or 500, rest.split(b"\r\n\r\n", 1)[-1])
        return HijackedStream(reader, writer, tty)

    async def exec_run(self, container_id: str, cmd: list[str], timeout: float,
                       limit: int = 10240) -> tuple[int | None, bytes]:
        """Run a command to completion (probes): (exit code or None on timeout, first bytes of its output)."""
        exec_id = await self.exec_create(container_id, cmd)
        output = bytearray()
        stream = await self.exec_start(exec_id)
        try:
            async with asyncio.timeout(timeout):
                async for _, data in stream.output():
                    if len(output) < limit:
                        output += data[:limit - len(output)]
        except TimeoutError:
            return None, bytes(output)
        finally:
            await stream.close()
        info = await self.exec_inspect(exec_id)
        for _ in range(50):  # the exit code lands a moment after the output closes
            if not info.get("Running"):
                break
            await asyncio.sleep(0.01)
            info = await self.exec_inspect(exec_id)
        return info.get("ExitCode"), bytes(output)


def _params(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not params:
        return None
    return {k: v for k, v in params.items() if v is not None}
