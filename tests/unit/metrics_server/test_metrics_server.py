"""metrics_server: the rate from two cumulative points (metrics-server pkg/storage), the Summary decoding, and the
quantities as metrics-server prints them."""

from __future__ import annotations

from metrics_server.api import cpu_quantity, memory_quantity
from metrics_server.scraper import decode_summary
from metrics_server.storage import Point, Storage, rate

NODE = "n1"


def test_rate_needs_two_points_of_one_start() -> None:
    assert rate(None, Point(10, 5_000_000_000, 100)) is None
    usage = rate(Point(10, 5_000_000_000, 100), Point(20, 7_500_000_000, 300))
    assert usage is not None and (usage.window, usage.nano_cores, usage.memory) == (10, 250_000_000, 300)
    assert rate(Point(10, 5, 1), Point(20, 4, 1)) is None  # the counter went back: a restart
    assert rate(Point(10, 5, 1, start=1), Point(20, 9, 1, start=2)) is None  # another start


def test_storage_serves_a_pod_only_when_every_container_has_a_rate() -> None:
    storage = Storage()
    storage.store_node(NODE, Point(10, 0, 1), {("ns", "p"): {"a": Point(10, 0, 1)}})
    assert storage.node_usage(NODE) is None and storage.pod_usage("ns", "p") is None
    storage.store_node(NODE, Point(20, 10_000_000_000, 2),
                       {("ns", "p"): {"a": Point(20, 1_000_000_000, 5), "b": Point(20, 0, 7)}})
    assert storage.node_usage(NODE) is not None and storage.node_usage(NODE).nano_cores == 1_000_000_000  # type: ignore[union-attr]
    assert storage.pod_usage("ns", "p") is None  # b measured once
    storage.store_node(NODE, Point(30, 20_000_000_000, 2),
                       {("ns", "p"): {"a": Point(30, 2_000_000_000, 5), "b": Point(30, 500_000_000, 8)}})
    found = storage.pod_usage("ns", "p")
    assert found is not None
    timestamp, window, containers = found
    assert (timestamp, window) == (30, 10)
    assert {c: u.nano_cores for c, u in containers.items()} == {"a": 100_000_000, "b": 50_000_000}
    storage.store_node(NODE, Point(40, 30_000_000_000, 2), {})  # the pod ended
    assert storage.pod_usage("ns", "p") is None
    storage.forget_node(NODE)
    assert storage.node_usage(NODE) is None


def test_same_reading_twice_keeps_the_pair() -> None:
    storage = Storage()
    for t, c in ((10, 0), (20, 10), (20, 10)):
        storage.store_node(NODE, Point(t, c, 1), {})
    usage = storage.node_usage(NODE)
    assert usage is not None and usage.window == 10


def test_decode_summary() -> None:
    summary = {"node": {"nodeName": NODE, "startTime": "2026-11-24T00:00:00Z",
                        "cpu": {"time": "2026-11-24T01:00:00.5Z", "usageCoreNanoSeconds": 7},
                        "memory": {"time": "2026-11-24T01:00:00.5Z", "workingSetBytes": 9}},
               "pods": [{"podRef": {"name": "p", "namespace": "ns", "uid": "u"}, "containers": [
                   {"name": "c", "cpu": {"time": "2026-11-24T01:00:00Z", "usageCoreNanoSeconds": 3},
                    "memory": {"time": "2026-11-24T01:00:00Z", "workingSetBytes": 4}},
                   {"name": "no-cpu-yet", "memory": {"time": "2026-11-24T01:00:00Z", "workingSetBytes": 4}}]}]}
    node, pods = decode_summary(summary)
    assert node is not None and (node.cumulative_cpu, node.memory) == (7, 9)
    assert node.timestamp % 1 == 0.5
    assert list(pods) == [("ns", "p")] and list(pods[("ns", "p")]) == ["c"]


def test_quantities_as_metrics_server_prints_them() -> None:
    assert cpu_quantity(156_340_871) == "156340871n"
    assert cpu_quantity(2_000_000_000) == "2"
    assert memory_quantity(10 * 1024 * 1024) == "10Mi"
    assert memory_quantity(1234567) == "1234567"


def test_fresh_container_gets_a_rate_from_its_start() -> None:
    """metrics-server's fresh-container rule: a container 10 s or more but less than one resolution old at
    its first point is rated from its start (cumulative 0 then), not a resolution later."""
    storage = Storage(resolution=15)
    storage.store_node(NODE, None, {("ns", "p"): {"c": Point(112, 6_000_000_000, 5, start=100)}})
    found = storage.pod_usage("ns", "p")
    assert found is not None
    timestamp, window, containers = found
    assert (timestamp, window, containers["c"].nano_cores) == (112, 12, 500_000_000)
    # the next scrape: the rate from two points again
    storage.store_node(NODE, None, {("ns", "p"): {"c": Point(127, 7_500_000_000, 5, start=100)}})
    found = storage.pod_usage("ns", "p")
    assert found is not None and (found[1], found[2]["c"].nano_cores) == (15, 100_000_000)


def test_fresh_container_rule_bounds() -> None:
    for age, resolution in ((9.9, 15), (15, 15), (12, 10)):  # too young for a rate, or seen by a scrape before
        storage = Storage(resolution=resolution)
        storage.store_node(NODE, None, {("ns", "p"): {"c": Point(100 + age, 1_000_000_000, 5, start=100)}})
        assert storage.pod_usage("ns", "p") is None, (age, resolution)
    storage = Storage(resolution=15)  # no start known: never fresh
    storage.store_node(NODE, None, {("ns", "p"): {"c": Point(12, 1_000_000_000, 5)}})
    assert storage.pod_usage("ns", "p") is None


def test_container_started_after_the_stored_point_is_a_restart() -> None:
    storage = Storage(resolution=10)
    storage.store_node(NODE, None, {("ns", "p"): {"c": Point(100, 1_000_000_000, 5, start=50)}})
    # another container of the same name, started after the stored point (its counter need not go back)
    storage.store_node(NODE, None, {("ns", "p"): {"c": Point(130, 9_000_000_000, 5, start=100)}})
    assert storage.pod_usage("ns", "p") is None
    storage.store_node(NODE, None, {("ns", "p"): {"c": Point(140, 10_000_000_000, 5, start=100)}})
    found = storage.pod_usage("ns", "p")
    assert found is not None and (found[1], found[2]["c"].nano_cores) == (10, 100_000_000)


def test_pod_time_is_its_earliest_container() -> None:
    storage = Storage()
    storage.store_node(NODE, None, {("ns", "p"): {"a": Point(10, 0, 1), "b": Point(12, 0, 1)}})
    storage.store_node(NODE, None, {("ns", "p"): {"a": Point(20, 0, 1), "b": Point(21, 0, 1)}})
    found = storage.pod_usage("ns", "p")
    assert found is not None and found[:2] == (20, 10)


def test_decode_summary_container_start() -> None:
    summary = {"pods": [{"podRef": {"name": "p", "namespace": "ns"}, "containers": [
        {"name": "c", "startTime": "2026-11-24T01:00:00.25Z",
         "cpu": {"time": "2026-11-24T01:00:12Z", "usageCoreNanoSeconds": 3},
         "memory": {"time": "2026-11-24T01:00:12Z", "workingSetBytes": 4}}]}]}
    _, pods = decode_summary(summary)
    point = pods[("ns", "p")]["c"]
    assert point.timestamp - point.start == 11.75
