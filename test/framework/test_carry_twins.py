"""Every user of the cross-cycle carry (framework/carry.py) is checked by the shared twin harness
(hack/twins.py): the same cluster through a loop that reuses what cycles keep and one that never
does, with the same decisions, failures, explanations, shares and status writes every cycle.

The stream below reaches every registered user of the product; a user registered without being
reached here fails ``test_every_registered_user_is_checked_by_the_twin_harness``: add its
situation to the stream (or a conf that enables it)."""

from __future__ import annotations

from caldera.config.conf import DEFAULT_CONF
from caldera.framework.carry import USERS
from caldera.hack.scenario import gang, node, pod, queue
from caldera.hack.twins import Twins

GATE = {"schedulingGates": [{"name": "example.com/quota"}]}
#: the default conf with capacity in proportion's place (capacity keeps its own queue sums)
CAPACITY_CONF = DEFAULT_CONF.replace("name: proportion", "name: capacity")


def stream(twins: Twins, cycles: int = 8) -> set[object]:
    """Gangs in two namespaces and queues arrive every cycle and finish three cycles later; one gang
    too big for any node waits in vain (allocate's vain tries, explain's documents); one gang waits
    for a scheduling gate; a node joins halfway. Returns the keys the reusing twin kept."""
    twins.load(
        nodes=[node(f"n{i}", cpu="8", memory="32Gi") for i in range(2)],
        queues=[queue("default"), queue("research", weight=3)],
    )
    big_pg, big_pods = gang("too-big", 3, cpu="12", namespace="team-a")
    gated_pg, gated_pods = gang("gated", 2, cpu="1", namespace="team-b", spec_extra=GATE)
    twins.load(podgroups=[big_pg, gated_pg], pods=big_pods + gated_pods)
    running = []
    kept: set[object] = set()
    for c in range(cycles):
        arrivals = [
            gang(f"a{c}", 2, cpu="1", namespace="team-a"),
            gang(f"b{c}", 1, cpu="2", namespace="team-b", queue="research"),
        ]
        twins.load(podgroups=[pg for pg, _ in arrivals], pods=[p for _, ps in arrivals for p in ps])
        if c == cycles // 2:
            twins.load(nodes=[node("n9", cpu="16", memory="64Gi")])
        if len(running) > 2:
            for pg, pods in running.pop(0):
                for p in pods:
                    twins.each("delete_pod", p)
                twins.each("delete_podgroup", pg)
        result = twins.cycle()
        twins.write_back()
        kept |= set(result.kept)
        running.append(arrivals)
    # a pod of the big gang's size never fits: it stayed pending and explained every cycle
    assert "default/too-big" not in {p.task.job for r in twins.results for p in r.placements}
    assert any(r.report.explanations for r in twins.results)
    return kept


def test_a_stream_decides_explains_shares_and_writes_the_same_with_and_without_reuse():
    stream(Twins())


def test_capacity_decides_and_shares_the_same_with_and_without_reuse():
    stream(Twins(CAPACITY_CONF))


def test_every_registered_user_is_checked_by_the_twin_harness():
    product_users = {key for key in USERS if getattr(key, "__module__", "").startswith("caldera.")}
    assert product_users, "no product user registered: the registry is not being read"
    kept = stream(Twins()) | stream(Twins(CAPACITY_CONF))
    missing = {getattr(key, "__qualname__", repr(key)) for key in product_users - kept}
    assert not missing, f"carry users never exercised by the twin harness: {sorted(missing)}"


def test_the_twins_disagree_when_a_carried_value_is_wrong(monkeypatch):
    """The harness can fail: a gang validity carried for another generation than it was computed
    for (every job taken as valid) makes the reusing twin decide otherwise."""
    from caldera.framework import carry

    monkeypatch.setattr(carry, "job_generation", lambda job: (1, "any"))
    from caldera.plugins import gang as gang_plugin

    monkeypatch.setattr(gang_plugin, "job_generation", lambda job: (1, "any"))
    twins = Twins()
    twins.load(nodes=[node("n1", cpu="8", memory="32Gi")])
    short_pg, short_pods = gang("short", 2, cpu="1")
    twins.load(podgroups=[short_pg], pods=short_pods[:1])  # one pod of two: not valid
    first_pg, first_pods = gang("first", 1, cpu="1")
    twins.load(podgroups=[first_pg], pods=first_pods)
    twins.cycle()
    twins.load(pods=[pod("short-1", cpu="1", group="short")])  # now valid; the carried answer says not
    try:
        twins.cycle()
    except AssertionError:
        return
    raise AssertionError("the twins agreed although the reusing one used a stale validity")
