"""apiserver.endpoints.handlers.WatchResponse, fed by a watch cache by hand: an event line the cache encoded for
all its watchers goes out as a body of its own, the very bytes the cache made (a stream waiting for its client
holds no copy of its backlog); lines made for this watch alone (a replay, bookmarks) are joined; the order is
the queue's, and the stream ends with the empty last body."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import orjson

from apiserver.endpoints.handlers import ResourceHandlers, WatchResponse
from apiserver.storage.cacher import Cacher
from apiserver.storage.etcd import EtcdEvent
from apiserver.storage.predicate import Predicate
from machinery.api.resources import RESOURCES
from tests.unit.apiserver.test_watch_cache import cacher, pod_kv

PODS = next(info for info in RESOURCES if info.group == "" and info.plural == "pods")


def stream(c: Cacher, rv: int | None, feed: Any) -> tuple[list[Any], list[dict[str, Any]]]:
    """What the watch from rv sends once `feed(cacher)` has run and the watcher has stopped: the cache's shared
    lines as queued, and the messages sent."""
    async def run() -> tuple[list[Any], list[dict[str, Any]]]:
        w = await c.watch(Predicate("ns"), rv, True)
        feed(c)
        shared = [item for item in w.queue if type(item) is bytes]
        w.stop()
        handlers = ResourceHandlers(SimpleNamespace(info=PODS))  # type: ignore[arg-type]  # bookmarks need info only
        sent: list[dict[str, Any]] = []
        never = asyncio.Event()

        async def receive() -> dict[str, Any]:
            await never.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await WatchResponse(handlers, w, 60, False, "Object", False)({"type": "http"}, receive, send)
        return shared, sent

    return asyncio.run(run())


def lines(body: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in body.splitlines()]


def test_the_caches_lines_go_out_as_they_are_and_bookmarks_between_them() -> None:
    def feed(c: Cacher) -> None:
        c._apply(EtcdEvent("PUT", pod_kv("p", 2, "web"), None))
        c.send_bookmarks()
        c.send_bookmarks()
        c._apply(EtcdEvent("PUT", pod_kv("q", 3, "web"), None))

    shared, sent = stream(cacher(), 1, feed)
    assert len(shared) == 2 and sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    bodies = [m["body"] for m in sent[1:]]
    assert bodies[0] is shared[0] and bodies[2] is shared[1]  # the cache's bytes, not copies
    assert [line["type"] for line in lines(bodies[1])] == ["BOOKMARK", "BOOKMARK"]  # this watch's own: joined
    assert bodies[3] == b"" and sent[-1]["more_body"] is False and len(bodies) == 4
    assert all(m["more_body"] for m in sent[1:-1])


def test_a_replay_is_joined_in_the_order_of_the_queue() -> None:
    c = cacher()
    c._apply(EtcdEvent("PUT", pod_kv("a", 2, "web"), None))
    c._apply(EtcdEvent("PUT", pod_kv("b", 3, "web"), None))

    def feed(c: Cacher) -> None:
        c._apply(EtcdEvent("PUT", pod_kv("a", 4, "db"), None))

    shared, sent = stream(c, None, feed)  # from "": the current state first, as ADDED
    bodies = [m["body"] for m in sent[1:]]
    replay = lines(bodies[0])
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in replay] == [("ADDED", "a"), ("ADDED", "b")]
    assert bodies[1] is shared[0] and lines(bodies[1])[0]["object"]["metadata"]["resourceVersion"] == "4"
    assert bodies[2:] == [b""]


def test_watchers_bookmarked_at_one_revision_share_its_line() -> None:
    handlers = ResourceHandlers(SimpleNamespace(info=PODS))  # type: ignore[arg-type]
    line = handlers._bookmark_line(5)
    assert handlers._bookmark_line(5) is line  # one line for the thousands of watchers the cache bookmarks
    assert lines(line) == [{"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
                                                           "metadata": {"resourceVersion": "5"}}}]
    end = lines(handlers._bookmark_line(5, True))[0]["object"]["metadata"]
    assert end == {"resourceVersion": "5", "annotations": {"k8s.io/initial-events-end": "true"}}
    assert lines(handlers._bookmark_line(6))[0]["object"]["metadata"] == {"resourceVersion": "6"}
    assert handlers._bookmark_line(5) is not line and lines(handlers._bookmark_line(5)) == lines(line)
