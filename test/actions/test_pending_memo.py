"""A backlog that cannot fit is not worked through in full every cycle: allocate takes over last
cycle's vain try of a job (actions/helpers.FailureMemo), explain takes over last cycle's document
(scheduler/explain._ExactReuse), proportion and drf start from last cycle's sums and per-job figures. Each shortcut gives
what the full path gives, and is dropped the moment something it depended on changes.

Every scenario runs the same cluster through two loops side by side: one as the scheduler runs
(shortcuts on), one that forgets everything between cycles (the full path), and compares every
cycle's placements, the failures recorded on every job and the explanation documents."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.objects import Pod, PodGroup
from caldera.hack.scenario import gang, node, pod, podgroup, priority_class, queue
from caldera.hack.twins import Twins, placements, replayed
from caldera.scheduler.registry import builtin_registry


def filler(name: str, node_name: str, cpu: str) -> Pod:
    """A pod of another scheduler holding room on a node."""
    return pod(
        name, cpu=cpu, memory="1Gi", scheduler="default-scheduler", node_name=node_name, phase="Running"
    )


@pytest.fixture
def backlog() -> Twins:
    """Four nodes of 4 cpu, each with 3 cpu held by another scheduler's pod (1 cpu free on each).
    Pending: a job of one 1-cpu pod (fits), and jobs that cannot fit: a gang of three 2-cpu pods,
    a 8-cpu pod, a pod whose node selector matches no node, and a gang of min 1 out of three 2-cpu
    pods (allocate goes on after the first pod fails, as Volcano's NeedContinueAllocating)."""
    twins = Twins()
    nodes = [node(f"n{i}", cpu="4", memory="16Gi") for i in range(4)]
    fillers = [filler(f"filler-{i}", f"n{i}", "3") for i in range(4)]
    objects: dict[str, list[Any]] = {"podgroups": [], "pods": []}
    for name, size, kw in (
        ("small", 1, {"cpu": "1"}),
        ("wide", 3, {"cpu": "2"}),
        ("huge", 1, {"cpu": "8"}),
        ("nowhere", 1, {"cpu": "100m", "node_selector": {"zone": "mars"}}),
    ):
        pg, pods = gang(name, size, **kw)
        objects["podgroups"].append(pg)
        objects["pods"].extend(pods)
    pg, pods = gang("elastic", 3, min_member=1, cpu="2")
    objects["podgroups"].append(pg)
    objects["pods"].extend(pods)
    twins.load(nodes=nodes, pods=fillers + objects["pods"], podgroups=objects["podgroups"])
    twins.fillers = fillers
    return twins


HOPELESS = 4  # wide, huge, nowhere, elastic


def settle(twins: Twins) -> Any:
    """Cycles until nothing changes any more: the first places "small", the next sees it bound."""
    twins.cycle()
    twins.cycle()
    return twins.cycle()


def test_an_unchanged_backlog_is_taken_over_with_the_same_decisions_and_explanations(backlog):
    first = backlog.cycle()
    assert placements(first) == [("small-0", "n0")] or len(placements(first)) == 1
    assert replayed(first) == 0
    quiet = settle(backlog)
    assert replayed(quiet) == HOPELESS
    assert "Insufficient cpu" in quiet.jobs["default/wide"].job_fit_error
    assert "node(s) didn't match Pod's node affinity/selector" in quiet.jobs["default/nowhere"].job_fit_error
    # the documents themselves are carried over, not rebuilt
    again = backlog.cycle()
    for uid in ("default/wide", "default/huge", "default/nowhere", "default/elastic"):
        assert again.report.explanations[uid] is quiet.report.explanations[uid]
    # ... and what the pass sets on the jobs (the PodGroup condition's reason) is there too
    assert again.jobs["default/elastic"].fit_errors == quiet.jobs["default/elastic"].fit_errors


def test_a_freed_node_sends_every_job_through_the_full_path(backlog):
    settle(backlog)
    # the other scheduler's pods on n0 and n1 finish: 4 cpu free on each
    for i in (0, 1):
        backlog.each("delete_pod", backlog.fillers[i])
    after = backlog.cycle()
    assert replayed(after) == 0
    placed = {name for name, _ in placements(after)}
    assert placed & {"wide-0", "elastic-0"}  # something of the backlog fits now
    quiet = settle(backlog)
    assert replayed(quiet) > 0


def test_a_changed_queue_sends_every_job_through_the_full_path(backlog):
    settle(backlog)
    backlog.each("upsert_queue", queue("default", weight=3))
    assert replayed(backlog.cycle()) == 0
    assert replayed(backlog.cycle()) == HOPELESS


def test_a_queue_capped_below_the_request_is_explained_the_same(backlog):
    # a capability that holds the queue at its share: allocate's reason becomes the queue's
    backlog.each("upsert_queue", queue("default", capability={"cpu": "1", "memory": "4Gi"}))
    settle(backlog)
    quiet = backlog.cycle()
    assert any("queue default" in job.job_fit_error for job in quiet.jobs.values())


def test_a_changed_job_is_tried_again_and_the_others_are_not(backlog):
    settle(backlog)
    # the elastic gang's PodGroup changes (minMember 1 -> 2): a new job copy; the others stay
    backlog.each("upsert_podgroup", podgroup("elastic", min_member=2))
    after = backlog.cycle()
    assert replayed(after) == HOPELESS - 1
    assert "Insufficient cpu" in after.jobs["default/elastic"].job_fit_error
    assert replayed(backlog.cycle()) == HOPELESS


def test_a_job_that_grows_its_queues_request_is_compared_the_same(backlog):
    settle(backlog)
    # one more pod in the elastic gang: the queue asks for more and its deserved share (capped by
    # what it asks for) moves; the queue still lets every task be placed, so the other jobs of the
    # queue are taken over (their queue answers asked again), the elastic gang is tried in full
    backlog.each("upsert_pod", pod("elastic-3", cpu="2", group="elastic"))
    assert replayed(backlog.cycle()) == HOPELESS - 1
    assert replayed(backlog.cycle()) == HOPELESS


def test_a_queue_that_no_longer_lets_a_task_in_is_tried_in_full():
    """Two nodes of 8 cpu; queue "default" (weight 5) runs 4 cpu and waits with a 2-cpu pod whose
    node selector matches no node; queue "other" (weight 3) has nothing. Default deserves 6 cpu,
    so its queue lets the pod in (and the selector holds it). Then a 3-cpu pod that cannot fit
    either arrives in "other": default now deserves 5 cpu, 4 + 2 is over that, and the pod is held
    by its queue's share: the old failure must not be taken over."""
    twins = Twins()
    twins.load(
        queues=[queue("default", weight=5), queue("other", weight=3)],
        nodes=[node("n0", cpu="4", memory="32Gi"), node("n1", cpu="4", memory="32Gi")],
    )
    runner = podgroup("runner", min_member=2)
    running = [pod(f"runner-{i}", cpu="2", group="runner", node_name="n0", phase="Running") for i in range(2)]
    picky = podgroup("picky", min_member=1)
    twins.load(
        podgroups=[runner, picky],
        pods=[*running, pod("picky-0", cpu="2", group="picky", node_selector={"zone": "mars"})],
    )
    quiet = settle(twins)
    assert replayed(quiet) == 1
    assert "node affinity/selector" in quiet.jobs["default/picky"].job_fit_error
    stray = podgroup("stray", min_member=1, queue="other")
    twins.load(
        podgroups=[stray], pods=[pod("stray-0", cpu="3", group="stray", node_selector={"zone": "venus"})]
    )
    after = twins.cycle()
    assert replayed(after) == 0
    assert "queue default is at its share" in after.jobs["default/picky"].job_fit_error


def test_a_placement_earlier_in_the_cycle_stops_the_takeover_for_the_jobs_after_it(backlog):
    settle(backlog)
    # a high-priority job that fits arrives: allocate places it before the backlog, so every job
    # after it is tried against the nodes as they are after that placement
    backlog.load(priority_classes=[priority_class("urgent", 1000)])
    pg = podgroup("urgent", min_member=1, priority_class="urgent")
    backlog.load(podgroups=[pg], pods=[pod("urgent-0", cpu="1", group="urgent", priority_class="urgent")])
    after = backlog.cycle()
    assert [name for name, _ in placements(after)] == ["urgent-0"]
    assert replayed(after) == 0


def test_a_node_change_that_leaves_resources_alone_still_counts(backlog):
    """A label added to a node can let the selector job fit: no takeover."""
    settle(backlog)
    backlog.each("upsert_node", node("n3", cpu="4", memory="16Gi", labels={"zone": "mars"}))
    after = backlog.cycle()
    assert replayed(after) == 0
    assert ("nowhere-0", "n3") in placements(after)


def test_a_conf_reload_drops_what_was_carried(backlog):
    settle(backlog)
    registry = builtin_registry()
    reloaded = parse_conf(DEFAULT_CONF, registry)  # equal text, new objects: as a reload makes them
    backlog.fast.conf = lambda: reloaded
    backlog.full.conf = lambda: reloaded
    assert replayed(backlog.cycle()) == 0


def test_gated_jobs_keep_their_reasons_when_taken_over():
    twins = Twins()
    twins.load(nodes=[node("n0", cpu="2", memory="8Gi")], pods=[filler("f", "n0", "2")])
    pg, pods = gang("gated", 2, cpu="1")
    gated = pod("gated-1", cpu="1", group="gated", spec_extra={"schedulingGates": [{"name": "wait"}]})
    twins.load(podgroups=[pg], pods=[pods[0], gated])
    pg2, pods2 = gang("blocked", 2, cpu="1")
    twins.load(podgroups=[pg2], pods=pods2)
    settle(twins)
    quiet = twins.cycle()
    assert replayed(quiet) == 1  # the gated gang is not tried at all (it waits for its gates)
    assert "scheduling gates" in quiet.jobs["default/gated"].job_fit_error
    assert "Insufficient cpu" in quiet.jobs["default/blocked"].job_fit_error
    # its gate removed: the gang is tried (and finds no room)
    ungated = msgspec.structs.replace(gated, spec=msgspec.structs.replace(gated.spec, scheduling_gates=[]))
    twins.each("upsert_pod", ungated)
    after = twins.cycle()
    assert "Insufficient cpu" in after.jobs["default/gated"].job_fit_error


def test_a_placement_that_leaves_the_backlogs_queue_alone_is_seen_by_its_explanations(backlog):
    """A job of another queue becomes valid (its PodGroup's minMember lowered: it asks for nothing
    more) and takes the last free cpu of a node. Nothing the backlog's queue figures depend on
    moved, yet the backlog's documents count the nodes as they are after that placement (here a
    gang short of pods, whose one-line reason does not change, but whose document counts the room
    left for its pods)."""
    short = podgroup("short", min_member=3)  # minMember 3 and only two pods: never tried
    pods = [pod(f"short-{i}", cpu="1", group="short") for i in range(2)]
    waiting = podgroup("other-job", min_member=2, queue="other")  # one pod only: not valid yet
    backlog.load(
        queues=[queue("other")],
        podgroups=[short, waiting],
        pods=[*pods, pod("other-job-0", cpu="1", group="other-job")],
    )
    before = settle(backlog)
    assert replayed(before) == HOPELESS
    backlog.each("upsert_podgroup", podgroup("other-job", min_member=1, queue="other"))
    after = backlog.cycle()
    assert [name for name, _ in placements(after)] == ["other-job-0"]
    short_before = before.report.explanations["default/short"]
    short_after = after.report.explanations["default/short"]
    assert short_after["reason"] == short_before["reason"]
    (role_before,) = short_before["roles"]
    (role_after,) = short_after["roles"]
    assert (role_before["slots"], role_after["slots"]) == (3, 2)  # "small" took the first free cpu


def test_a_gang_short_of_pods_is_valid_again_once_its_pod_arrives(backlog):
    """gang's validity is kept from one cycle to the next for an unchanged job only."""
    short = podgroup("short", min_member=3)
    backlog.load(podgroups=[short], pods=[pod(f"short-{i}", cpu="1", group="short") for i in range(2)])
    quiet = settle(backlog)
    assert "Not enough valid tasks" in quiet.jobs["default/short"].job_fit_error
    backlog.load(pods=[pod("short-2", cpu="1", group="short")])
    after = backlog.cycle()
    assert sorted(name for name, _ in placements(after)) == ["short-0", "short-1", "short-2"]


@pytest.mark.parametrize("reader", [False, True], ids=["snapshots-in-a-row", "a-reader-in-between"])
def test_a_stream_of_gangs_arriving_running_and_finishing_keeps_the_shares_of_a_fresh_sum(reader: bool):
    """Gangs arrive every cycle in two queues and two namespaces (some asking for GPUs, one for zero
    GPUs), run, and finish a few cycles later (a PodGroup deleted with its pods); two nodes join (the cluster total moves). Each
    cycle drf's shares and proportion's queue figures, kept from the last cycle and changed only by
    the jobs that changed, are those summed afresh over every job: when each snapshot follows the
    last (only the jobs the cache names as changed are redone) and when another snapshot was taken
    in between (every job's copy is compared with the one the figures were made from)."""
    twins = Twins()
    twins.load(
        nodes=[node(f"n{i}", cpu="16", memory="64Gi", extra={"nvidia.com/gpu": "4"}) for i in range(3)],
        queues=[queue("default"), queue("research", weight=2)],
    )
    running: list[tuple[list[PodGroup], list[Pod]]] = []
    for c in range(12):
        arrivals = []
        for k, (queue_name, namespace) in enumerate((("default", "team-a"), ("research", "team-b"))):
            extra = (
                {"nvidia.com/gpu": "1"} if (c + k) % 3 == 0 else {"nvidia.com/gpu": "0"} if c == 4 else None
            )
            arrivals.append(
                gang(f"g{c}-{k}", 2 + k, cpu="1", queue=queue_name, namespace=namespace, extra=extra)
            )
        twins.load(podgroups=[pg for pg, _ in arrivals], pods=[p for _, pods in arrivals for p in pods])
        if c in (6, 9):
            twins.load(nodes=[node(f"n{c}", cpu="32", memory="128Gi")])
        if len(running) > 3:
            # the pods finish; one of the two PodGroups goes with them (its job leaves the session)
            groups, pods = running.pop(0)
            for p in pods:
                twins.each("delete_pod", p)
            twins.each("delete_podgroup", groups[0])
        if reader and c % 2:
            twins.caches[0].snapshot()  # e.g. a /debug reader: the next cycle's snapshot is not the next one
        result = twins.cycle()
        running.append(([pg for pg, _ in arrivals], [p for _, pods in arrivals for p in pods]))
        assert result.report.job_shares  # the comparison above was of figures, not of two empty dicts
        assert set(result.report.queue_shares) == {"default", "research"}
    assert any(share > 0 for share in twins.results[-1].report.job_shares.values())
