"""The node lifecycle controller's view of a node: its own read or write outranks the informer's
copy until the informer shows that version, comparing resourceVersions for equality only (they are
opaque to clients: "9" is not older than "10" because nine is less than ten)."""

from __future__ import annotations

from typing import Any, cast

from controllers.node_lifecycle import CACHE_CATCH_UP_SECONDS, NodeLifecycleController, _Health
from machinery.api.coordination_v1 import Lease
from machinery.api.core_v1 import Node
from machinery.api.meta import ObjectMeta
from machinery.informer import SharedInformerFactory


def node(rv: str) -> Node:
    return Node(metadata=ObjectMeta(name="n1", uid="u1", resource_version=rv))


def health(rv: str) -> _Health:
    return _Health(uid="u1", probe=0.0, heartbeat=(None, None), ready="True", node=node(rv))


def test_our_write_outranks_the_informer_until_it_shows_it() -> None:
    h = health("a")
    written = node("c")
    h.hold(written, node("a"), now=10.0)
    assert h.newest(node("a"), now=11.0) is written  # informer still behind
    assert h.newest(node("b"), now=11.0) is written  # a version between: still behind
    shown = node("c")
    assert h.newest(shown, now=12.0) is shown  # caught up
    later = node("d")
    assert h.newest(later, now=13.0) is later  # and from then on the informer leads


def test_opaque_versions_are_never_ordered() -> None:
    """With an integer comparison "9" < "10" and "zz" would break; equality needs neither."""
    h = health("9")
    written = node("10")
    h.hold(written, node("9"), now=0.0)
    assert h.newest(node("9"), now=1.0) is written
    h2 = health("zz")
    h2.hold(node("aa"), node("zz"), now=0.0)
    assert h2.newest(node("zz"), now=1.0).metadata.resource_version == "aa"


def test_no_wait_when_the_informer_already_shows_the_version() -> None:
    """The watch event can arrive before the write's response: then newer cache versions lead."""
    h = health("a")
    h.hold(node("b"), node("b"), now=0.0)
    newer = node("c")
    assert h.newest(newer, now=1.0) is newer


def test_a_relist_that_skipped_our_version_is_believed_after_a_while() -> None:
    h = health("a")
    written = node("b")
    h.hold(written, node("a"), now=0.0)
    relisted = node("z")
    assert h.newest(relisted, now=CACHE_CATCH_UP_SECONDS - 1) is written
    assert h.newest(relisted, now=CACHE_CATCH_UP_SECONDS + 1) is relisted
    assert h.newest(node("y"), now=CACHE_CATCH_UP_SECONDS + 2).metadata.resource_version == "y"


def test_nothing_awaited_the_informer_leads() -> None:
    h = health("a")
    cached = node("b")
    assert h.newest(cached, now=0.0) is cached


async def test_leases_come_from_the_shared_informer_of_every_namespace_and_only_node_leases_count() -> None:
    """As upstream's: the Lease informer is the factory's cluster-wide one (which the garbage collector watches
    too), not a second cache of kube-node-lease; a Lease elsewhere (a leader election's) names no node."""
    factory = SharedInformerFactory(cast(Any, None))
    ctl = NodeLifecycleController(cast(Any, None), factory)
    assert ctl.leases is factory.informer_for(Lease)
    assert len(factory.informers()) == 3  # nodes, leases, pods: nothing of its own
    for listener in ctl.leases._listeners:
        listener.start()
    for namespace, name in (("kube-system", "kube-controller-manager"), ("kube-node-lease", "node-1")):
        ctl.leases.handle_event("ADDED", Lease(metadata=ObjectMeta(name=name, namespace=namespace, uid=name,
                                                                   resource_version="1")), "1")
    await ctl.leases.wait_for_handlers()
    assert ctl.queue._dirty == {"node-1"}
    assert ctl.leases.store.get("kube-node-lease/node-1") is not None
