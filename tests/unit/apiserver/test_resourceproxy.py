"""The parts of pods/services/nodes proxy that are pure rules: the name's scheme and port (upstream's
SplitSchemeNamePort), the addresses the apiserver may dial (IsProxyableIP), the request's target, the links
rewritten in HTML answers and redirects (upstream's proxy Transport), and which websockets are spliced."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import zlib
from collections.abc import AsyncIterator

import pytest
from starlette.requests import Request

from apiserver import errors
from apiserver.endpoints import resourceproxy
from apiserver.endpoints.resourceproxy import (
    UPGRADE_PATH,
    LinkRewriter,
    proxyable,
    rewrite_html,
    rewrite_html_body,
    split_scheme_name_port,
)
from apiserver.requestinfo import resolve
from machinery.splice import SpliceUpgrade
from machinery.tls import Upgrade


def test_a_name_carries_a_scheme_and_a_port() -> None:
    assert split_scheme_name_port("web") == ("", "web", "")
    assert split_scheme_name_port("web:8080") == ("", "web", "8080")
    assert split_scheme_name_port("https:web:metrics") == ("https", "web", "metrics")
    for bad in ("ftp:web:80", "a:b:c:d", ":80", "http::80"):
        with pytest.raises(errors.ApiError) as e:
            split_scheme_name_port(bad)
        assert (e.value.code, e.value.message) == (400, f'invalid request "{bad}"')


@pytest.mark.parametrize("ip", ["127.0.0.1", "::1", "169.254.169.254", "fe80::1", "0.0.0.0", "224.0.0.1", "",
                                "not-an-ip"])
def test_the_apiserver_dials_only_global_unicast_addresses(ip: str) -> None:
    with pytest.raises(errors.ApiError) as e:
        proxyable(ip)
    assert (e.value.code, e.value.message) == (400, "address not allowed")


def test_pod_and_endpoint_addresses_are_dialled() -> None:
    assert proxyable("10.244.1.7") == "10.244.1.7"
    assert proxyable("fd00::7") == "[fd00::7]"


def test_a_proxy_path_is_the_subresource_and_the_rest_is_the_targets() -> None:
    target = resolve("GET", "namespaces/ns/services/https:web:443/proxy/a/b/", frozenset({"services"}))
    assert target is not None
    assert (target.verb, target.resource, target.namespace, target.name, target.subresource) == \
        ("get", "services", "ns", "https:web:443", "proxy")
    post = resolve("POST", "nodes/n1/proxy/stats/summary", frozenset())
    assert post is not None and (post.verb, post.name, post.subresource) == ("create", "n1", "proxy")
    assert resolve("GET", "namespaces/ns/pods/p/log/extra", frozenset({"pods"})) is None  # only proxy has a rest


# -- links (upstream's proxy Transport: transport_test.go's cases) ----------------------------------------------

PREFIX = "/api/v1/namespaces/ns/services/web/proxy"
LINKS = LinkRewriter(PREFIX, "10.244.1.7:80", "127.0.0.1:8001")


@pytest.mark.parametrize(("url", "want"), [
    ("/", f"{PREFIX}/"),  # an absolute path: the proxy's path in front, its trailing slash kept
    ("/x/y?q=1#top", f"{PREFIX}/x/y?q=1#top"),
    ("/a/../b//c", f"{PREFIX}/b/c"),  # cleaned, as Go's path.Join
    ("http://10.244.1.7:80/x", f"{PREFIX}/x"),  # the backend's own host: scheme and host go
    ("http://127.0.0.1:8001/x", f"http://127.0.0.1:8001{PREFIX}/x"),  # the client's Host: kept
    (f"{PREFIX}/x", f"{PREFIX}/x"),  # already under the proxy
    ("x/y", "x/y"), ("../y", "../y"), ("#top", "#top"), ("?q=1", "?q=1"),  # relative: resolves under the proxy
    ("http://example.com/x", "http://example.com/x"), ("//example.com/x", "//example.com/x"),  # another host
    ("mailto:a@example.com", "mailto:a@example.com"),
])
def test_urls_that_name_the_backend_go_through_the_proxy(url: str, want: str) -> None:
    assert LINKS.url(url) == want


def test_a_url_that_does_not_parse_is_an_error() -> None:
    for bad in ("http://[::1/x", "http://10.244.1.7:port/x"):
        with pytest.raises(ValueError):
            LINKS.url(bad)


PAGE = """<!DOCTYPE html>
<html><head><title>t</title>
<link rel="stylesheet" href="/style.css"><script src='/app.js'></script>
<style>a { background: url(/not-rewritten.png) }</style></head>
<body background=/bg.png>
<p>Text with /paths and &amp; entities &copy; stays, as does <b>markup</b> and <!-- <a href="/c"> -->.</p>
<a href="relative/x">r</a> <A HREF="/upper">u</A> <a href="http://example.com/">e</a>
<img src="/i.png" alt="/not-a-url" /><form action="/post" method="post"><input formaction="/f" type=submit></form>
<a href="/q?a=1&amp;b=2">amp</a> <a href="http://[::1">bad</a> <a name=x>no url</a>
</body></html>
"""


def test_the_links_of_a_page_are_rewritten_and_the_rest_is_left_as_it_was() -> None:
    out = rewrite_html(PAGE, LINKS.url)
    for want in (f'<link rel="stylesheet" href="{PREFIX}/style.css">', f'<script src="{PREFIX}/app.js">',
                 f'<body background="{PREFIX}/bg.png">', f'<a href="{PREFIX}/upper">u</A>',
                 f'<img src="{PREFIX}/i.png" alt="/not-a-url" />', f'<form action="{PREFIX}/post" method="post">',
                 f'<input formaction="{PREFIX}/f" type="submit">', f'<a href="{PREFIX}/q?a=1&amp;b=2">amp</a>'):
        assert want in out, want
    for kept in ('<a href="relative/x">r</a>', '<a href="http://example.com/">e</a>', "<a name=x>no url</a>",
                 '<a href="http://[::1">bad</a>', "url(/not-rewritten.png)", '<!-- <a href="/c"> -->',
                 "Text with /paths and &amp; entities &copy; stays", "<!DOCTYPE html>"):
        assert kept in out, kept
    assert rewrite_html("<p>nothing to do</p>\n", LINKS.url) == "<p>nothing to do</p>\n"


@pytest.mark.parametrize("encoding", ["", "gzip", "deflate", "raw-deflate"])
def test_an_encoded_page_is_decoded_rewritten_and_encoded_again(encoding: str) -> None:
    page = '<a href="/x">caf\u00e9</a>\xff'.encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff")
    raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = {"": page, "gzip": gzip.compress(page), "deflate": zlib.compress(page),
            "raw-deflate": raw.compress(page) + raw.flush()}[encoding]
    header = "deflate" if encoding == "raw-deflate" else encoding
    out = rewrite_html_body(body, header, LINKS.url)
    decoded = {"": lambda b: b, "gzip": gzip.decompress, "deflate": zlib.decompress,
               "raw-deflate": lambda b: zlib.decompress(b, -zlib.MAX_WBITS)}[encoding](out)
    assert decoded == f'<a href="{PREFIX}/x">caf\u00e9</a>'.encode() + b"\xff"  # a byte that is no UTF-8 survives


@pytest.mark.parametrize(("encoding", "body", "message"), [
    ("gzip", b"<html>not gzip</html>", "errorf making gzip reader: Not a gzipped file"),
    ("gzip", gzip.compress(b"<html></html>")[:-6], "Compressed file ended before the end-of-stream marker"),
    ("deflate", b"<html>not deflate</html>", "Error -3 while decompressing data"),
])
def test_a_page_that_does_not_decode_is_a_500(encoding: str, body: bytes, message: str) -> None:
    with pytest.raises(errors.ApiError) as e:
        rewrite_html_body(body, encoding, LINKS.url)
    assert e.value.code == 500 and e.value.reason == "" and message in e.value.message, e.value.message
    assert "reason" not in e.value.status()  # upstream's StatusReasonUnknown is omitted


def test_the_proxy_paths_whose_websockets_the_apiserver_splices() -> None:
    for path in (b"/api/v1/namespaces/ns/pods/web/proxy/ws", b"/api/v1/namespaces/ns/services/http:web:80/proxy",
                 b"/api/v1/nodes/n1/proxy/x?y=1", b"/api/v1/namespaces/ns/pods/web/proxy?x=1"):
        assert UPGRADE_PATH.match(path), path
    for path in (b"/api/v1/namespaces/ns/pods/web/exec?command=sh", b"/api/v1/namespaces/ns/pods/web/portforward",
                 b"/api/v1/namespaces/ns/pods/web/proxyx", b"/apis/apps/v1/namespaces/ns/deployments/web/proxy/"):
        assert not UPGRADE_PATH.match(path), path


# -- upgrades: what the backend answers (a real loopback server; the gate and the address checks come before) -----


def upgrade_request() -> Request:
    return Request({"type": "http", "method": "GET", "path": "/api/v1/namespaces/ns/pods/p/proxy/ws",
                    "query_string": b"", "client": ("192.0.2.9", 40000),
                    "headers": [(b"host", b"apiserver"), (b"authorization", b"Bearer secret"),
                                (b"upgrade", b"websocket"), (b"connection", b"Upgrade"),
                                (b"sec-websocket-key", b"a2V5a2V5a2V5a2V5a2V5aw==")]})


@contextlib.asynccontextmanager
async def backend(answer: bytes | None) -> AsyncIterator[tuple[int, list[bytes]]]:
    """A loopback server that reads one request head and writes `answer` (None: nothing, the connection open)."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        if answer is None:
            await reader.read()  # until the apiserver gives up
        else:
            writer.write(answer)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], heads
    finally:
        server.close()


async def test_the_backends_101_is_spliced_and_its_refusal_passed_on() -> None:
    async with backend(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       b"Sec-WebSocket-Accept: x=\r\n\r\n") as (port, heads):
        answer = await resourceproxy._upgrade(upgrade_request(), f"http://127.0.0.1:{port}/ws?a=1", False,
                                              Upgrade("websocket"))
        assert isinstance(answer, SpliceUpgrade) and (b"sec-websocket-accept", b"x=") in answer.answer
        assert answer.runtime.transport is not None
        answer.runtime.transport.close()
    head = heads[0].decode()
    assert head.startswith("GET /ws?a=1 HTTP/1.1\r\nHost: 127.0.0.1:") and "upgrade: websocket" in head
    assert "authorization" not in head.lower() and "X-Forwarded-For: 192.0.2.9" in head
    async with backend(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nnope\n") \
            as (port, _):
        refused = await resourceproxy._upgrade(upgrade_request(), f"http://127.0.0.1:{port}/", False,
                                               Upgrade("websocket"))
        assert (refused.status_code, refused.body, refused.headers["content-type"]) == (403, b"nope\n", "text/plain")


@pytest.mark.parametrize(("answer", "message"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "invalid upgrade response: status code 200"),
    (b"", "error reading the upgrade response: the runtime closed the connection"),
    (b"SPDY?\r\n\r\n", "error reading the upgrade response: malformed status line"),
    (None, "i/o timeout"),
])
async def test_a_backend_that_does_not_upgrade_is_a_500(answer: bytes | None, message: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resourceproxy, "UPGRADE_TIMEOUT", 0.5)  # the silent backend: given up on this soon
    async with backend(answer) as (port, _):
        with pytest.raises(errors.ApiError) as e:
            await resourceproxy._upgrade(upgrade_request(), f"http://127.0.0.1:{port}/", False, Upgrade("websocket"))
    assert e.value.code == 500 and e.value.reason == "" and message in e.value.message, e.value.message


async def test_a_backend_that_is_not_there_is_the_dial_error() -> None:
    async with backend(b"") as (port, _):
        pass  # closed: nothing listens on the port any more
    with pytest.raises(errors.ApiError) as e:
        await resourceproxy._upgrade(upgrade_request(), f"http://127.0.0.1:{port}/", False, Upgrade("websocket"))
    assert e.value.code == 500 and e.value.message.startswith(f"dial tcp 127.0.0.1:{port}: "), e.value.message
