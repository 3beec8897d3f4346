"""What sessions derive from node specs (label columns, taint groups, name ranks, static scores) is
kept across cycles (``framework.carry``, for the snapshot's generation of the node specs) while no
node spec changed, and rebuilt as soon as one does."""

import numpy as np
import pytest

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.carry import CarryBook
from caldera.framework.session import close_session, open_session
from caldera.hack.scenario import gang, node
from caldera.plugins.helpers import NodeSpecColumns, node_index
from caldera.scheduler.registry import builtin_registry

BOOK = CarryBook()


def _session(cache):
    """A session over a fresh snapshot, offered what the last one kept; closed and applied (as the
    loop does) before the next is opened."""
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    ssn = open_session(cache.snapshot(), conf.tiers, registry.plugins, carry=BOOK.offer())
    result = close_session(ssn)
    cache.apply(result)
    BOOK.commit(result.kept)
    return ssn


def _cache():
    cache = ClusterCache()
    cache.upsert_node(node("a", labels={"zone": "z1"}))
    cache.upsert_node(node("b", labels={"zone": "z2"}))
    pg, pods = gang("j", 1, node_selector={"zone": "z2"})
    cache.upsert_podgroup(pg)
    for p in pods:
        cache.upsert_pod(p)
    return cache


def _zone_of_each_row(ssn):
    return list(node_index(ssn).label("zone"))


def _columns(ssn) -> NodeSpecColumns:
    return ssn.node_memo(NodeSpecColumns, lambda: pytest.fail("the columns were not built"))


def test_node_spec_columns_are_shared_while_nodes_only_change_usage():
    cache = _cache()
    sessions = [_session(cache) for _ in range(3)]
    for ssn in sessions:
        assert _zone_of_each_row(ssn) == ["z1", "z2"]
    # Each session is offered the columns the last one kept.
    assert _columns(sessions[0]) is _columns(sessions[1]) is _columns(sessions[2])
    # A node's status heartbeat (same labels, taints, readiness, allocatable) keeps them too.
    cache.upsert_node(node("a", labels={"zone": "z1"}))
    later = [_session(cache) for _ in range(2)]
    assert {id(_columns(s)) for s in later} == {id(_columns(s)) for s in sessions}


@pytest.mark.parametrize(
    "change",
    [
        dict(labels={"zone": "z3"}),
        dict(labels={"zone": "z1"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        dict(labels={"zone": "z1"}, ready=False),
        dict(labels={"zone": "z1"}, unschedulable=True),
        dict(labels={"zone": "z1"}, cpu="4"),
    ],
    ids=["labels", "taints", "readiness", "unschedulable", "allocatable"],
)
def test_a_node_spec_change_rebuilds_what_sessions_derive_from_specs(change):
    cache = _cache()
    before = [_session(cache) for _ in range(2)]
    cache.upsert_node(node("a", **change))
    after = [_session(cache) for _ in range(2)]
    assert not {id(_columns(s)) for s in before} & {id(_columns(s)) for s in after}
    assert _zone_of_each_row(after[0])[0] == change["labels"]["zone"]


def test_nodes_coming_and_going_rebuild_them():
    cache = _cache()
    _session(cache)
    cache.upsert_node(node("c", labels={"zone": "z2"}))
    ssn = _session(cache)
    assert sorted(_zone_of_each_row(ssn)) == ["z1", "z2", "z2"]
    assert [ssn.node_list[int(r)].name for r in np.argsort(ssn.placement.name_rank)] == ["a", "b", "c"]
    cache.delete_node(node("c"))
    assert sorted(_zone_of_each_row(_session(cache))) == ["z1", "z2"]


def test_shared_columns_cannot_be_changed_in_place():
    ssn = _session(_cache())
    with pytest.raises(ValueError):
        node_index(ssn).label("zone")[0] = "elsewhere"
    with pytest.raises(ValueError):
        ssn.placement.name_rank[0] = 5


def test_placements_agree_across_cycles_that_reuse_the_columns():
    """The pod asks for zone z2: every session, first or reusing the columns, puts it on b."""
    cache = _cache()
    for _ in range(4):
        ssn = _session(cache)
        task = next(iter(ssn.jobs["default/j"].tasks.values()))
        row, _ = ssn.best_placement(task)
        assert ssn.node_list[row].name == "b"
