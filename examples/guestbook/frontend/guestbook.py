#!/usr/bin/env python3
"""The guestbook's web frontend (image minik8s/guestbook:1, built by hack/guestbook-images.sh): entries are a
Redis list, written to the primary and read from the read Service, as upstream's guestbook example
(kubernetes/examples, guestbook/php-redis) does with a frontend in PHP.

  GET  /            the page: the title and every entry, with a form to add one
  GET  /entries     the entries as JSON: {"entries": [...], "pod": <hostname>}
  POST /entries     adds the request body as an entry: 201 (the page's form, field `entry`: 303 to /)
  GET  /info        {"pod": <hostname>, "title": <title>}
  GET  /healthz     200 while the process serves (liveness)
  GET  /readyz      200 when the read Service has answered PING within READ_GRACE_SECONDS (10) and the server is
                    not shutting down (readiness)

Settings come from the environment (the ConfigMap `guestbook`): GUESTBOOK_TITLE, REDIS_PRIMARY (host of the
writes, `redis-0.redis`), REDIS_READ (host of the reads, the ClusterIP Service `redis-read`), REDIS_PORT,
GUESTBOOK_KEY (the list), SHUTDOWN_DELAY_SECONDS; the password from REDIS_PASSWORD (the Secret `redis`).

Readiness answers at once from what a background PING (every second) last saw: a probe never waits on Redis (the
kubelet's probe gives up after 1 s), and a blip of the read Service (a replica evicted, its endpoint not yet
removed) does not take every frontend out of its Service at once; Redis gone for longer does.

SIGTERM: /readyz answers 503 at once, the server keeps answering for SHUTDOWN_DELAY_SECONDS (the time the
endpoint controllers and kube-proxy take to drop the terminating pod, so no request goes to a closed port),
then finishes the requests it holds and exits 0. Every response closes its connection (HTTP/1.0), so no client
stays on a pod that is going away."""

from __future__ import annotations

import html
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

TITLE = os.environ.get("GUESTBOOK_TITLE", "Guestbook")
PRIMARY = os.environ.get("REDIS_PRIMARY", "redis-0.redis")
READ = os.environ.get("REDIS_READ", "redis-read")
PORT = int(os.environ.get("REDIS_PORT", "6379"))
KEY = os.environ.get("GUESTBOOK_KEY", "guestbook:entries")
PASSWORD = os.environ.get("REDIS_PASSWORD") or None
LISTEN = int(os.environ.get("PORT", "8080"))
SHUTDOWN_DELAY = float(os.environ.get("SHUTDOWN_DELAY_SECONDS", "0"))
HOSTNAME = socket.gethostname()
MAX_ENTRY = 4096

stopping = threading.Event()
READ_GRACE = float(os.environ.get("READ_GRACE_SECONDS", "10"))
reads_answered_at = [float("-inf")]  # when the read Service last answered PING (monotonic): not ready before


def client(host: str) -> redis.Redis:
    # a command on a connection the server closed (redis-0 restarted, maybe at another address) is sent again
    # on a new one, which resolves the name again
    return redis.Redis(host=host, port=PORT, password=PASSWORD, socket_timeout=3, socket_connect_timeout=3,
                       decode_responses=True, retry=Retry(ExponentialBackoff(cap=1, base=0.05), 5),
                       retry_on_error=[redis.ConnectionError, redis.TimeoutError])


primary, reader = client(PRIMARY), client(READ)


class Handler(BaseHTTPRequestHandler):
    server_version = "guestbook/1"

    def log_message(self, format: str, *args: Any) -> None:  # one line a request on stderr: `kubectl logs`
        sys.stderr.write(f"{self.address_string()} {format % args}\n")

    def send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, code: int, obj: Any) -> None:
        self.send(code, json.dumps(obj).encode() + b"\n")

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if path == "/healthz":
            self.send(200, b"ok\n", "text/plain")
        elif path == "/readyz":
            if stopping.is_set():
                self.send(503, b"shutting down\n", "text/plain")
                return
            silent = time.monotonic() - reads_answered_at[0]
            if silent > READ_GRACE:
                self.send(503, f"redis {READ}: no answer to PING for {silent:.0f}s\n".encode(), "text/plain")
                return
            self.send(200, b"ok\n", "text/plain")
        elif path == "/info":
            self.send_json(200, {"pod": HOSTNAME, "title": TITLE})
        elif path in ("/entries", "/"):
            try:
                entries = reader.lrange(KEY, 0, -1)
            except redis.RedisError as e:
                self.send_json(503, {"error": f"redis {READ}: {e}"})
                return
            if path == "/entries":
                self.send_json(200, {"entries": entries, "pod": HOSTNAME})
                return
            items = "".join(f"<li>{html.escape(e)}</li>" for e in entries)
            page = (f"<!doctype html><title>{html.escape(TITLE)}</title><h1>{html.escape(TITLE)}</h1>"
                    f"<form method=post action=/entries><input name=entry><button>Sign</button></form>"
                    f"<ul>{items}</ul><p>served by {html.escape(HOSTNAME)}</p>\n")
            self.send(200, page.encode(), "text/html; charset=utf-8")
        else:
            self.send_json(404, {"error": f"no such path: {path}"})

    def do_POST(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if path != "/entries":
            self.send_json(404, {"error": f"no such path: {path}"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_ENTRY:
            self.send_json(413, {"error": f"an entry has at most {MAX_ENTRY} bytes"})
            return
        body = self.rfile.read(length).decode("utf-8", "replace")
        # the page's form sends entry=...; `curl --data 'text'` sends the same content type with the bare text
        form = None
        if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            form = urllib.parse.parse_qs(body, keep_blank_values=True).get("entry")
        entry = (form[0] if form else body).strip()
        if not entry:
            self.send_json(400, {"error": "an empty entry"})
            return
        try:
            count = primary.rpush(KEY, entry)
        except redis.RedisError as e:
            self.send_json(503, {"error": f"redis {PRIMARY}: {e}"})
            return
        if form:  # back to the page
            self.send_response(303)
            self.send_header("Location", "/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_json(201, {"entry": entry, "count": count, "pod": HOSTNAME})


class Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the threads: requests in flight are answered
    block_on_close = True
    request_queue_size = 128


def watch_reads() -> None:
    """PING the read Service every second; readiness reads the time of the last answer."""
    while not stopping.is_set():
        try:
            reader.ping()
            reads_answered_at[0] = time.monotonic()
        except redis.RedisError as e:
            sys.stderr.write(f"redis {READ}: {e}\n")
        stopping.wait(1)


def main() -> None:
    server = Server(("", LISTEN), Handler)
    threading.Thread(target=watch_reads, daemon=True).start()

    def terminate(signum: int, frame: object) -> None:
        if stopping.is_set():
            return
        stopping.set()
        sys.stderr.write(f"signal {signum}: not ready; serving {SHUTDOWN_DELAY}s more, then stopping\n")

        def stop() -> None:
            time.sleep(SHUTDOWN_DELAY)
            server.shutdown()

        threading.Thread(target=stop, daemon=True).start()

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    sys.stderr.write(f"{TITLE}: listening on :{LISTEN}; writes to {PRIMARY}:{PORT}, reads from {READ}:{PORT}\n")
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    sys.stderr.write("stopped\n")


if __name__ == "__main__":
    main()
