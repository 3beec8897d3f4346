"""Dynamic Resource Allocation in the session: nodes, ResourceSlices, DeviceClasses, claims and pods,
and where the pods land with which devices (plugins/dra.py)."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.framework.dra.view import ClaimAllocation
from caldera.framework.model import GROUP_NAME_ANNOTATION
from caldera.hack.scenario import (
    claim_pod_spec,
    cluster,
    device_class,
    gang,
    node,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
    run_session,
)

GPU = "gpu.example.com"

DRA_OFF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: false
  - name: proportion
  - name: nodeorder
"""


def claim_pod(name: str, *claims: str, **kw: object) -> object:
    """A pod of its own one-member PodGroup (named after it) using these claims."""
    return pod(name, group=name, spec_extra=claim_pod_spec(*claims), **kw)


def groups(*pods: object) -> list[object]:
    return [podgroup(p.metadata.annotations[GROUP_NAME_ANNOTATION]) for p in pods]  # type: ignore[attr-defined]


def world(nodes: list[object], pods: list[object], dra: list[object], **kw: object) -> object:
    """A snapshot; each pod not in a gang gets its PodGroup."""
    singles = [p for p in pods if p.metadata.annotations.get(GROUP_NAME_ANNOTATION) == p.metadata.name]  # type: ignore[attr-defined]
    podgroups = list(kw.pop("podgroups", [])) + groups(*singles)  # type: ignore[call-overload]
    return cluster(nodes=nodes, pods=pods, podgroups=podgroups, dra=dra, **kw)  # type: ignore[arg-type]


def devices_of(placement_claims: list[ClaimAllocation] | None) -> list[str]:
    assert placement_claims is not None
    return [r.device for ca in placement_claims for r in ca.allocation.devices.results]


def placed(result: object) -> dict[str, str]:
    return {p.task.name: p.node for p in result.placements}  # type: ignore[attr-defined]


def test_the_pod_lands_where_the_device_is_and_its_allocation_names_it() -> None:
    snap = world(
        nodes=[node("n1"), node("n2")],
        pods=[claim_pod("p", "c0")],
        dra=[device_class(GPU), resource_slice("n2", GPU, ["gpu-0"]), resource_claim("c0", GPU)],
    )
    _, result = run_session(snap)
    [placement] = result.placements
    assert placement.node == "n2"
    [ca] = placement.claims
    assert (ca.key, ca.new) == ("default/c0", True)
    [r] = ca.allocation.devices.results
    assert (r.request, r.driver, r.pool, r.device) == ("req", GPU, "n2", "gpu-0")
    assert ca.allocation.node_selector is not None
    assert ca.allocation.node_selector.node_selector_terms[0].match_fields[0].values == ["n2"]


def test_three_pods_two_devices_two_placed_on_distinct_devices_the_third_waits_with_the_reason() -> None:
    snap = world(
        nodes=[node("n1"), node("n2")],
        pods=[claim_pod(f"p{i}", f"c{i}") for i in range(3)],
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            resource_slice("n2", GPU, ["gpu-0"]),
            *[resource_claim(f"c{i}", GPU) for i in range(3)],
        ],
    )
    ssn, result = run_session(snap)
    assert len(result.placements) == 2
    held = {(p.node, devices_of(p.claims)[0]) for p in result.placements}
    assert held == {("n1", "gpu-0"), ("n2", "gpu-0")}
    [left] = [t for j in ssn.jobs.values() for t in j.tasks.values() if t.name not in placed(result)]
    reasons = ssn.explain_predicates(left)
    assert any("no free device of class gpu.example.com" in r and "1 allocated" in r for r in reasons), (
        reasons
    )


def test_a_gang_with_a_match_attribute_constraint_lands_together_or_not_at_all() -> None:
    # Each pod's claim wants one GPU on the "fast" interconnect; only n2 has four of them.
    def gpus(node_name: str, n: int, link: str) -> object:
        return resource_slice(node_name, GPU, {f"gpu-{i}": {"link": {"string": link}} for i in range(n)})

    pg, pods = gang("g", 4, spec_extra=None)
    pods = [pod(p.metadata.name, group="g", spec_extra=claim_pod_spec(f"c{i}")) for i, p in enumerate(pods)]
    claims = [
        resource_claim(f"c{i}", GPU, selector='device.attributes["gpu.example.com"].link == "fast"')
        for i in range(4)
    ]
    snap = world(
        nodes=[node("n1"), node("n2"), node("n3")],
        pods=pods,
        podgroups=[pg],
        dra=[device_class(GPU), gpus("n1", 3, "fast"), gpus("n2", 4, "fast"), gpus("n3", 4, "slow"), *claims],
    )
    _, result = run_session(snap)
    assert len(result.placements) == 4
    devices = [(p.node, d) for p in result.placements for d in devices_of(p.claims)]
    assert len(set(devices)) == 4
    assert all(n != "n3" for n, _ in devices)

    # One fast device too few in the whole cluster: nothing is placed, nothing is held.
    snap = world(
        nodes=[node("n1"), node("n3")],
        pods=pods,
        podgroups=[pg],
        dra=[device_class(GPU), gpus("n1", 3, "fast"), gpus("n3", 4, "slow"), *claims],
    )
    _, result = run_session(snap)
    assert result.placements == []


def test_a_claim_shared_by_two_pods_is_allocated_once_and_reserved_for_both() -> None:
    snap = world(
        nodes=[node("n1"), node("n2")],
        pods=[claim_pod("a", "shared"), claim_pod("b", "shared")],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0", "gpu-1"]), resource_claim("shared", GPU)],
    )
    _, result = run_session(snap)
    assert sorted(placed(result).items()) == [("a", "n1"), ("b", "n1")]
    [first, second] = [p.claims[0] for p in result.placements]
    assert first.allocation == second.allocation
    assert len(first.allocation.devices.results) == 1


def test_a_template_claim_is_found_through_the_pods_status_and_waits_until_named() -> None:
    spec = claim_pod_spec(template="gpu-template")
    waiting = pod("w", group="w", spec_extra=spec)
    snap = world(
        nodes=[node("n1")],
        pods=[waiting],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0"])],
    )
    ssn, result = run_session(snap)
    assert result.placements == []
    [task] = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    assert any("tmpl" in r and "to be created" in r for r in ssn.explain_predicates(task))

    import msgspec

    from caldera.framework.dra.objects import ResourceClaim
    from caldera.framework.objects import Pod, convert
    from caldera.hack.scenario import pod_dict

    named = pod_dict("t", group="t", spec_extra=spec)
    named["status"]["resourceClaimStatuses"] = [{"name": "tmpl", "resourceClaimName": "t-tmpl-x7"}]
    # the resourceclaim controller makes the pod the claim's controller owner
    owned = msgspec.to_builtins(resource_claim("t-tmpl-x7", GPU))
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "t", "uid": named["metadata"]["uid"], "controller": True}
    ]
    snap = world(
        nodes=[node("n1")],
        pods=[convert(Pod, named)],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0"]), convert(ResourceClaim, owned)],
    )
    _, result = run_session(snap)
    [placement] = result.placements
    assert placement.claims[0].key == "default/t-tmpl-x7"

    # a claim of that name the pod does not own is not its template's claim: the pod waits
    snap = world(
        nodes=[node("n1")],
        pods=[convert(Pod, named)],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0"]), resource_claim("t-tmpl-x7", GPU)],
    )
    ssn, result = run_session(snap)
    assert result.placements == []
    [task] = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    assert any("was not created for pod" in r for r in ssn.explain_predicates(task))


def test_a_pod_whose_claim_does_not_exist_waits_with_the_claim_named() -> None:
    snap = world(nodes=[node("n1")], pods=[claim_pod("p", "nope")], dra=[device_class(GPU)])
    ssn, result = run_session(snap)
    assert result.placements == []
    [task] = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    assert "waiting for ResourceClaim default/nope to be created" in ssn.explain_predicates(task)


def test_a_bad_cel_expression_leaves_the_pod_unschedulable_with_an_event_and_others_go_on() -> None:
    snap = world(
        nodes=[node("n1")],
        pods=[claim_pod("bad", "c-bad"), claim_pod("good", "c-good"), pod("plain", group="plain")],
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            resource_claim("c-bad", GPU, selector='device.attributes["gpu.example.com"].missing == 1'),
            resource_claim("c-good", GPU),
        ],
    )
    ssn, result = run_session(snap)
    assert sorted(placed(result)) == ["good", "plain"]
    events = [e for e in result.report.events if e[0] == "ResourceClaim"]
    assert [e[1] for e in events] == ["default/c-bad"]
    assert 'device.attributes["gpu.example.com"].missing == 1' in events[0][3]
    assert "no such key" in events[0][3]
    [bad] = [t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == "bad"]
    [reason] = ssn.explain_predicates(bad)
    assert "claim default/c-bad request req" in reason and "CEL runtime error" in reason


def test_with_the_option_false_pods_with_claims_are_never_placed() -> None:
    snap = world(
        nodes=[node("n1")],
        pods=[claim_pod("p", "c0"), pod("plain", group="plain")],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0"]), resource_claim("c0", GPU)],
    )
    ssn, result = run_session(snap, DRA_OFF)
    assert placed(result) == {"plain": "n1"}
    [task] = [t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == "p"]
    assert any("predicate.DynamicResourceAllocationEnable: false" in r for r in ssn.explain_predicates(task))


def test_with_the_option_false_a_pod_with_claims_placed_after_a_plain_one_alike_is_not_placed() -> None:
    """(the node-local results cached for the plain pod are not the claim pod's)"""
    snap = world(
        nodes=[node("n1"), node("n2")],
        pods=[claim_pod("p", "c0", priority=1), pod("plain", group="plain", priority=100)],
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0"]), resource_claim("c0", GPU)],
    )
    _, result = run_session(snap, DRA_OFF)
    assert set(placed(result)) == {"plain"}


def test_devices_of_allocated_claims_are_not_handed_out_again() -> None:
    taken = {
        "allocation": {
            "devices": {"results": [{"request": "req", "driver": GPU, "pool": "n1", "device": "gpu-0"}]}
        },
        "reservedFor": [{"resource": "pods", "name": "other", "uid": "u-other"}],
    }
    snap = world(
        nodes=[node("n1")],
        pods=[claim_pod("p", "c1")],
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            resource_claim("c0", GPU, status=taken),
            resource_claim("c1", GPU),
        ],
    )
    _, result = run_session(snap)
    assert result.placements == []


def test_the_next_cycle_does_not_hand_out_devices_the_last_one_gave_before_the_watch_shows_them() -> None:
    from caldera.hack.scenario import InProcessCluster

    pods = [claim_pod(f"p{i}", f"c{i}") for i in range(3)]
    sim = InProcessCluster(
        nodes=[node("n1"), node("n2")],
        pods=pods[:2],
        podgroups=groups(*pods),
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            resource_slice("n2", GPU, ["gpu-0"]),
            *[resource_claim(f"c{i}", GPU) for i in range(3)],
        ],
    )
    sim.cycle()
    assert sorted(sim.running_on()) == ["p0", "p1"]
    # The claims' status writes have not come back through the watch; a third pod arrives.
    sim.add(pods=pods[2:])
    sim.cycle()
    assert "p2" not in sim.running_on()


def test_a_pod_that_waited_for_its_claim_is_placed_once_the_claim_exists() -> None:
    from caldera.hack.scenario import InProcessCluster

    p = claim_pod("p", "c0")
    sim = InProcessCluster(
        nodes=[node("n1")],
        pods=[p],
        podgroups=groups(p),
        dra=[device_class(GPU), resource_slice("n1", GPU, ["gpu-0"])],
    )
    sim.cycle()
    sim.cycle()
    assert sim.running_on() == {}
    sim.add(dra=[resource_claim("c0", GPU)])
    sim.cycle()
    assert sim.running_on() == {"p": "n1"}


def test_why_pending_names_the_claim_the_request_and_what_is_missing() -> None:
    from caldera.scheduler.explain import explain_session

    snap = world(
        nodes=[node("n1"), node("n2")],
        pods=[claim_pod("p", "c0")],
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            resource_claim("c0", GPU, count=2),
        ],
    )
    ssn, _ = run_session(snap)
    doc = explain_session(ssn)["default/p"]
    assert "0/2 nodes are available" in doc["reason"]
    assert (
        "no free device of class gpu.example.com for claim default/c0 request req: 1 devices, 0 allocated"
        in doc["reason"]
    )


def test_debug_shows_the_pods_waiting_for_their_claims() -> None:
    from caldera.cache.store import ClusterCache
    from caldera.config.conf import DEFAULT_CONF, parse_conf
    from caldera.hack.scenario import load
    from caldera.scheduler.debug import DebugApi, Observatory
    from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
    from caldera.scheduler.registry import builtin_registry

    p = claim_pod("p", "c0")
    cache = load(ClusterCache(), nodes=[node("n1")], pods=[p], podgroups=groups(p), dra=[device_class(GPU)])
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    obs = Observatory()
    obs.problems = cache.problems()  # as the binary sets it before each cycle (scheduler/app.py)
    SchedulerLoop(cache, lambda: conf, registry, RecordingBinder(), on_cycle=obs.on_cycle).run_once()
    doc = DebugApi(obs).job("default", "p")
    assert doc["claim_waits"] == [
        {"name": "p", "reason": "waiting for ResourceClaim default/c0 to be created"}
    ]
    assert "waiting for ResourceClaim default/c0 to be created" in doc["reason"]


def test_a_claim_without_requests_fits_on_a_node_without_devices() -> None:
    from caldera.framework.dra.objects import ResourceClaim
    from caldera.framework.objects import convert

    empty = convert(
        ResourceClaim,
        {"metadata": {"name": "none", "namespace": "default", "uid": "rc-none"}, "spec": {"devices": {}}},
    )
    snap = world(
        nodes=[node("n1")],
        pods=[claim_pod("p", "none")],
        dra=[device_class(GPU), resource_slice("elsewhere", GPU, ["gpu-0"]), empty],
    )
    _, result = run_session(snap)
    [placement] = result.placements
    assert placement.node == "n1" and placement.claims[0].allocation.devices.results == []


def claim_gang(name: str, size: int) -> tuple[object, list[object], list[object]]:
    """A gang of ``size`` pods, each with its own one-GPU claim."""
    from caldera.hack.scenario import podgroup as pg_

    pods = [pod(f"{name}-{i}", group=name, spec_extra=claim_pod_spec(f"{name}-c{i}")) for i in range(size)]
    return pg_(name, min_member=size), pods, [resource_claim(f"{name}-c{i}", GPU) for i in range(size)]


def test_a_discarded_gang_gives_its_devices_back_to_the_next_gang_of_the_cycle() -> None:
    # "big" (3 pods) is tried first (older) but only two devices exist: it is discarded whole, and
    # "small" (2 pods) gets both devices in the same cycle.
    big_pg, big_pods, big_claims = claim_gang("big", 3)
    small_pg, small_pods, small_claims = claim_gang("small", 2)
    snap = cluster(
        nodes=[node("n1"), node("n2")],
        pods=[*big_pods, *small_pods],
        podgroups=[big_pg, small_pg],
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            resource_slice("n2", GPU, ["gpu-0"]),
            *big_claims,
            *small_claims,
        ],
    )
    _, result = run_session(snap)
    assert sorted(placed(result)) == ["small-0", "small-1"]
    assert sorted(p.node for p in result.placements) == ["n1", "n2"]


def test_two_gangs_never_get_the_same_device() -> None:
    a_pg, a_pods, a_claims = claim_gang("a", 2)
    b_pg, b_pods, b_claims = claim_gang("b", 2)
    snap = cluster(
        nodes=[node("n1"), node("n2")],
        pods=[*a_pods, *b_pods],
        podgroups=[a_pg, b_pg],
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0", "gpu-1"]),
            resource_slice("n2", GPU, ["gpu-0"]),
            *a_claims,
            *b_claims,
        ],
    )
    _, result = run_session(snap)
    devices = [(p.node, d) for p in result.placements for d in devices_of(p.claims)]
    assert len(devices) == 2 and len(set(devices)) == 2, "three devices: one gang of two fits, not both"


def test_a_gang_whose_claims_need_a_matching_pair_lands_together_or_not_at_all() -> None:
    """Each of 4 pods claims two GPUs with ``matchAttribute: gpu.example.com/numa`` (the same NUMA node)."""

    def numa_gpus(node_name: str, numas: list[int]) -> object:
        return resource_slice(node_name, GPU, {f"gpu-{i}": {"numa": {"int": n}} for i, n in enumerate(numas)})

    def run(n2_numas: list[int]) -> object:
        pg, pods, _ = claim_gang("g", 4)
        claims = [resource_claim(f"g-c{i}", GPU, count=2, match_attribute=f"{GPU}/numa") for i in range(4)]
        snap = cluster(
            nodes=[node("n1"), node("n2")],
            pods=pods,
            podgroups=[pg],
            dra=[device_class(GPU), numa_gpus("n1", [0, 0, 1, 1]), numa_gpus("n2", n2_numas), *claims],
        )
        return run_session(snap)[1]

    result = run([0, 1, 0, 1])  # two same-NUMA pairs on each node: all four pods
    assert len(result.placements) == 4
    for p in result.placements:
        [ca] = p.claims
        picked = [r.device for r in ca.allocation.devices.results]
        numas = {0: [0, 0, 1, 1], 1: [0, 1, 0, 1]}[0 if p.node == "n1" else 1]
        assert len(picked) == 2 and len({numas[int(d.split("-")[1])] for d in picked}) == 1

    result = run([0, 1, 2, 3])  # no pair on n2: two pods would fit, the gang of four does not
    assert result.placements == []


def test_a_claim_naming_a_missing_device_class_leaves_the_pod_pending_with_the_reason() -> None:
    snap = world(
        nodes=[node("n1")],
        pods=[claim_pod("p", "c0")],
        dra=[resource_slice("n1", GPU, ["gpu-0"]), resource_claim("c0", "no-such-class")],
    )
    ssn, result = run_session(snap)
    assert result.placements == []
    [task] = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    [reason] = ssn.explain_predicates(task)
    assert "claim default/c0, request req: could not retrieve device class no-such-class: not found" in reason


def test_a_best_effort_pod_placed_by_backfill_gets_its_device_too() -> None:
    p = pod("be", group="be", cpu=None, memory=None, spec_extra=claim_pod_spec("c0"))
    snap = world(
        nodes=[node("n1"), node("n2")],
        pods=[p],
        dra=[device_class(GPU), resource_slice("n2", GPU, ["gpu-0"]), resource_claim("c0", GPU)],
    )
    _, result = run_session(snap)
    [placement] = result.placements
    assert placement.node == "n2" and devices_of(placement.claims) == ["gpu-0"]


def test_claims_of_one_spec_share_the_counts_and_a_claim_of_another_spec_is_counted_for_its_own() -> None:
    """The counts are kept per claim spec (the claims of one template share them): a claim asking for
    two devices is not answered from the counts of the one-device claims placed before it."""
    snap = world(
        nodes=[node("n1")],
        pods=[claim_pod("a-small", "c-small"), claim_pod("b-small", "c-small2"), claim_pod("c-big", "c-big")],
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0", "gpu-1", "gpu-2"]),
            resource_claim("c-small", GPU),
            resource_claim("c-small2", GPU),
            resource_claim("c-big", GPU, count=2),
        ],
    )
    _, result = run_session(snap)
    # two of the three devices go to the one-device claims; one device is left, too few for two
    assert placed(result) == {"a-small": "n1", "b-small": "n1"}
    assert sorted(d for p in result.placements for d in devices_of(p.claims)) == ["gpu-0", "gpu-1"]


def test_across_cycles_a_device_taken_by_another_claim_is_not_handed_out_until_that_claim_is_gone() -> None:
    from caldera.hack.scenario import InProcessCluster

    p = claim_pod("p", "c0")
    taken = {
        "allocation": {
            "devices": {"results": [{"request": "req", "driver": GPU, "pool": "n1", "device": "gpu-0"}]}
        },
        "reservedFor": [{"resource": "pods", "name": "other", "uid": "u-other"}],
    }
    other = resource_claim("other", GPU, status=taken)
    sim = InProcessCluster(
        nodes=[node("n1")],
        pods=[p],
        podgroups=groups(p),
        dra=[device_class(GPU), resource_claim("c0", GPU)],
    )
    sim.cycle()  # no device anywhere yet
    assert sim.running_on() == {}
    # the node's slice appears, its one device already held by another claim
    sim.add(dra=[resource_slice("n1", GPU, ["gpu-0"]), other])
    sim.cycle()
    assert sim.running_on() == {}
    sim.cache.delete_resource_claim(other)
    sim.cycle()
    assert sim.running_on() == {"p": "n1"}


def test_across_cycles_a_slice_changed_and_a_claim_deleted_are_seen_by_the_next_cycle() -> None:
    from caldera.hack.scenario import InProcessCluster

    p, q = claim_pod("p", "c0"), claim_pod("q", "c1")
    sim = InProcessCluster(
        nodes=[node("n1"), node("n2")],
        pods=[p, q],
        podgroups=groups(p, q),
        dra=[
            device_class(GPU),
            resource_slice("n1", GPU, ["gpu-0"]),
            resource_claim("c0", GPU, count=2),
            resource_claim("c1", GPU, count=2),
        ],
    )
    sim.cycle()  # one device, two asked for by each
    assert sim.running_on() == {}
    # n1's slice now has two devices; q's claim is deleted: p lands, q waits for its claim
    sim.cache.delete_resource_claim(resource_claim("c1", GPU, count=2))
    sim.add(dra=[resource_slice("n1", GPU, ["gpu-0", "gpu-1"])])
    result = sim.cycle()
    assert sim.running_on() == {"p": "n1"}
    assert "waiting for ResourceClaim default/c1 to be created" in str(result)


def test_a_claim_whose_search_explodes_costs_the_session_a_bounded_search_and_others_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nine requests of one GPU each on a NUMA node of its own, asked of thirty nodes of sixteen GPUs
    two per NUMA node: each node's search would try orderings for a long time. Once it ran out of steps on
    ``CLAIM_TIMEOUTS`` nodes, the others answer "timed out" without a search, as kube-scheduler's
    Filter answers a node past its filterTimeout; a pod with a claim that fits is placed."""
    from caldera.framework.dra import allocator as dra_allocator
    from caldera.framework.dra.allocator import CLAIM_TIMEOUTS, TIMED_OUT
    from caldera.scheduler.explain import explain_session

    searches: list[tuple[str, bool]] = []
    search = dra_allocator.Allocator.allocate

    def counted(self: Any, claims: Any, *args: Any, **kwargs: Any) -> Any:
        outcome = search(self, claims, *args, **kwargs)
        searches.append((claims[0].metadata.name, outcome.timed_out))
        return outcome

    monkeypatch.setattr(dra_allocator.Allocator, "allocate", counted)
    nine = resource_claim("nine", GPU, requests=9, distinct_attribute=f"{GPU}/numa")
    numa = {f"gpu-{i}": {"numa": {"int": i // 2}} for i in range(16)}
    nodes = [f"n{i:02}" for i in range(30)]
    snap = world(
        nodes=[node(n) for n in nodes],
        pods=[claim_pod("greedy", "nine"), claim_pod("modest", "two")],
        dra=[
            device_class(GPU),
            *[resource_slice(n, GPU, numa) for n in nodes],
            nine,
            resource_claim("two", GPU, count=2, match_attribute=f"{GPU}/numa"),
        ],
    )
    ssn, result = run_session(snap)
    assert list(placed(result)) == ["modest"]
    assert searches.count(("nine", True)) == CLAIM_TIMEOUTS
    assert ("nine", False) not in searches
    before = len(searches)
    doc = explain_session(ssn)["default/greedy"]
    assert f"30 {TIMED_OUT}" in doc["reason"], doc["reason"]
    assert ("nine", True) not in searches[before:]  # explaining asks the nodes again: no search


FILTER_TIMEOUT_CONF = DRA_OFF.replace(
    "predicate.DynamicResourceAllocationEnable: false", "dynamicresources.filterTimeoutSeconds: {seconds}"
)


def test_volcanos_filter_timeout_argument_bounds_a_nodes_search_by_time_or_lets_it_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seven requests of one GPU, each on a NUMA node of its own, on a node of twelve GPUs two per NUMA
    node: the search ends, without an allocation, after 151,945 steps. By default it stops at
    ``SEARCH_STEPS`` ("timed out"); with Volcano's ``dynamicresources.filterTimeoutSeconds`` the bound
    is that many seconds per node, as kube-scheduler's filterTimeout, and 0 lets the search end."""
    from caldera.framework.dra import allocator as dra_allocator
    from caldera.framework.dra.allocator import TIMED_OUT
    from caldera.scheduler.explain import explain_session

    asked: list[dict[str, Any]] = []
    search = dra_allocator.Allocator.allocate

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs)
        return search(self, *args, **kwargs)

    monkeypatch.setattr(dra_allocator.Allocator, "allocate", spy)
    seven = resource_claim("seven", GPU, requests=7, distinct_attribute=f"{GPU}/numa")
    numa = {f"gpu-{i}": {"numa": {"int": i // 2}} for i in range(12)}
    snap = world(
        nodes=[node("n1")],
        pods=[claim_pod("p", "seven")],
        dra=[device_class(GPU), resource_slice("n1", GPU, numa), seven],
    )
    reasons = {}
    for seconds in (None, 0, 30):
        asked.clear()
        conf = None if seconds is None else FILTER_TIMEOUT_CONF.format(seconds=seconds)
        ssn, result = run_session(snap, conf)
        assert result.placements == []
        reasons[seconds] = explain_session(ssn)["default/p"]["reason"]
        assert asked and all(
            kw == ({} if seconds is None else {"steps": None, "seconds": seconds or None}) for kw in asked
        )
    assert TIMED_OUT in reasons[None]
    for seconds in (0, 30):
        assert "devices exist but not in a combination" in reasons[seconds], reasons[seconds]


@pytest.mark.parametrize(
    ("argument", "refusal"),
    [
        ("dynamicresources.filterTimeoutSeconds: -1", "must be 0 (no bound) or more seconds, not -1"),
        ("volumebinding.bindTimeoutSeconds: 600", "the binary's --volume-bind-timeout"),
        ("volumebinding.weight: 2", "nodes are not scored by their volumes"),
    ],
)
def test_volcanos_other_predicates_arguments_are_refused_with_the_reason(argument: str, refusal: str) -> None:
    from caldera.config.conf import ConfError, parse_conf
    from caldera.scheduler.registry import builtin_registry

    conf = FILTER_TIMEOUT_CONF.replace("dynamicresources.filterTimeoutSeconds: {seconds}", argument)
    with pytest.raises(ConfError) as err:
        parse_conf(conf, builtin_registry())
    assert refusal in str(err.value)
