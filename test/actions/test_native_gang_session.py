"""Sessions over Kubernetes' own PodGroups (``scheduling.k8s.io/v1alpha2``): a gang binds whole
or not at all, ``minCount`` lets part of a group go, ``basic`` pods are independent, and a topology
key keeps the whole group inside one domain of that node label even when another is emptier."""

from __future__ import annotations

from caldera.cache.store import ClusterCache
from caldera.framework.model import native_job_key
from caldera.hack.scenario import load, native_member, native_podgroup, node, run_session


def _placed(result) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {p.task.name: p.node for p in result.placements}


def _cluster(nodes, groups, pods):  # type: ignore[no-untyped-def]
    cache = load(ClusterCache(), nodes=nodes)
    for g in groups:
        cache.upsert_native_podgroup(g)
    for p in pods:
        cache.upsert_pod(p)
    return cache.snapshot()


def test_a_gang_of_four_that_only_three_fit_binds_nothing() -> None:
    snap = _cluster(
        [node("n1", cpu="2"), node("n2", cpu="1")],
        [native_podgroup("train", min_count=4)],
        [native_member(f"train-{i}", "train", cpu="1") for i in range(4)],
    )
    ssn, result = run_session(snap)
    assert _placed(result) == {}
    assert (
        ssn.jobs[native_job_key("default", "train")].job_fit_error
        or ssn.jobs[native_job_key("default", "train")].fit_errors
    )


def test_min_count_two_of_four_binds_what_fits() -> None:
    snap = _cluster(
        [node("n1", cpu="2"), node("n2", cpu="1")],
        [native_podgroup("train", min_count=2)],
        [native_member(f"train-{i}", "train", cpu="1") for i in range(4)],
    )
    _, result = run_session(snap)
    assert len(_placed(result)) == 3


def test_basic_pods_are_independent() -> None:
    snap = _cluster(
        [node("n1", cpu="1")],
        [native_podgroup("loose")],
        [native_member(f"loose-{i}", "loose", cpu="1") for i in range(3)],
    )
    _, result = run_session(snap)
    assert len(_placed(result)) == 1


def test_a_topology_key_keeps_the_gang_in_one_zone_though_another_is_emptier() -> None:
    zone = "topology.kubernetes.io/zone"
    nodes = [
        node("a1", cpu="4", labels={zone: "a"}),
        node("a2", cpu="4", labels={zone: "a"}),
        node("b1", cpu="8", labels={zone: "b"}),
        node("b2", cpu="8", labels={zone: "b"}),
        node("unlabelled", cpu="64"),
    ]
    snap = _cluster(
        nodes,
        [native_podgroup("train", min_count=4, topology_keys=[zone])],
        [native_member(f"train-{i}", "train", cpu="2") for i in range(4)],
    )
    _, result = run_session(snap)
    placed = _placed(result)
    assert len(placed) == 4
    zones = {snap.nodes[name].labels.get(zone) for name in placed.values()}
    assert len(zones) == 1 and None not in zones  # not the empty unlabelled node, nor both zones


def test_a_gang_no_single_zone_holds_stays_pending_with_the_reason() -> None:
    zone = "topology.kubernetes.io/zone"
    snap = _cluster(
        [node("a1", cpu="2", labels={zone: "a"}), node("b1", cpu="2", labels={zone: "b"})],
        [native_podgroup("train", min_count=4, topology_keys=[zone])],
        [native_member(f"train-{i}", "train", cpu="1") for i in range(4)],
    )
    ssn, result = run_session(snap)
    assert _placed(result) == {}
    assert "network topology" in ssn.jobs[native_job_key("default", "train")].job_fit_error
