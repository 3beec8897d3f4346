"""The cycle budget (``--cycle-budget``): once a cycle's decision has run that long, allocate takes no
further job. The jobs it did not reach wait, with nothing recorded against them, for the next
cycle, which takes them in the same order; preempt and reclaim never evict for them, since
allocate has not yet tried them on the free room. A pass of allocate over every job may so take
several cycles: the next ones go on with the jobs the pass has not taken before any is taken again,
so a job that never fits at the head of the order cannot starve the jobs behind it."""

import time

from caldera.framework.model import TaskStatus
from caldera.hack.scenario import InProcessCluster, node, pod, podgroup, priority_class
from caldera.scheduler.cli import build_parser, options_from
from caldera.scheduler.debug import NOT_REACHED, DebugApi, Observatory

CONF = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

PRIORITIES = [priority_class("high", 1000), priority_class("mid", 500), priority_class("low-pc", 1)]


def gangs_in_priority_order():
    """Three gangs of two one-CPU pods, room for all of them, created lowest priority first."""
    groups = [("low", "low-pc"), ("mid", "mid"), ("high", "high")]
    return dict(
        nodes=[node("n1", cpu="4"), node("n2", cpu="4")],
        priority_classes=PRIORITIES,
        podgroups=[podgroup(name, min_member=2, priority_class=pc) for name, pc in groups],
        pods=[
            pod(f"{name}-{i}", cpu="1", group=name, priority_class=pc)
            for name, pc in groups
            for i in range(2)
        ],
    )


def placed(result):
    return sorted(p.task.name for p in result.placements)


def test_a_spent_budget_places_one_whole_gang_per_cycle_in_job_order():
    sim = InProcessCluster(CONF, **gangs_in_priority_order())
    sim.loop.cycle_budget = 0.0  # spent as soon as the first job has been taken

    first = sim.cycle()
    assert placed(first) == ["high-0", "high-1"]
    assert first.report.unreached == {"default/mid", "default/low"}
    for uid in ("default/mid", "default/low"):
        job = first.jobs[uid]
        # waiting for its turn, not unschedulable: no failure recorded, no explanation built
        assert job.job_fit_error == "" and not job.fit_errors
        assert uid not in first.report.explanations

    assert placed(sim.cycle()) == ["mid-0", "mid-1"]
    last = sim.cycle()
    assert placed(last) == ["low-0", "low-1"]
    assert last.report.unreached == set()


def behind_a_gang_that_never_fits(*, second_huge: bool = False):
    """A high-priority gang of three 3-CPU pods on two 4-CPU nodes (it never fits), and behind it in
    job order a mid-priority gang and a low-priority pod that fit at once."""
    huge = [("huge", "high")] + ([("huge2", "high")] if second_huge else [])
    return dict(
        nodes=[node("n1", cpu="4"), node("n2", cpu="4")],
        priority_classes=PRIORITIES,
        podgroups=[
            *(podgroup(name, min_member=3, priority_class=pc) for name, pc in huge),
            podgroup("mid", min_member=2, priority_class="mid"),
            podgroup("low", min_member=1, priority_class="low-pc"),
        ],
        pods=[
            *(
                pod(f"{name}-{i}", cpu="3", group=name, priority_class=pc)
                for name, pc in huge
                for i in range(3)
            ),
            *(pod(f"mid-{i}", cpu="1", group="mid", priority_class="mid") for i in range(2)),
            pod("low-0", cpu="1", group="low", priority_class="low-pc"),
        ],
    )


def test_a_gang_that_never_fits_at_the_head_of_the_order_does_not_starve_the_jobs_behind_it():
    sim = InProcessCluster(CONF, **behind_a_gang_that_never_fits())
    sim.loop.cycle_budget = 0.0  # every cycle's budget is spent on its first job

    first = sim.cycle()
    assert placed(first) == []
    assert first.jobs["default/huge"].job_fit_error  # tried, and why it did not fit recorded
    assert first.report.unreached == {"default/mid", "default/low"}

    # The next cycles go on with the pass: huge had its turn in it, mid and low not yet.
    second = sim.cycle()
    assert placed(second) == ["mid-0", "mid-1"]
    huge = second.jobs["default/huge"]
    assert "default/huge" in second.report.unreached  # not taken again: nothing recorded against it
    assert huge.job_fit_error == "" and not huge.fit_errors
    assert placed(sim.cycle()) == ["low-0"]

    # That pass is over: a new one takes huge again, first in order.
    again = sim.cycle()
    assert again.report.unreached == set()
    assert again.jobs["default/huge"].job_fit_error


def test_a_pass_that_left_jobs_out_is_never_the_last_cycle_before_a_quiet_spell():
    sim = InProcessCluster(CONF, **behind_a_gang_that_never_fits(second_huge=True))
    sim.cycle()  # room for mid and low: placed by a cycle without a budget
    sim.loop.cycle_budget = 0.0
    first = sim.cycle()
    assert first.report.unreached == {"default/huge2"} and first.jobs["default/huge"].job_fit_error
    second = sim.cycle()
    assert second.jobs["default/huge2"].job_fit_error and second.report.unreached == {"default/huge"}
    # Nothing placed and every job reached, but huge was left out: the cluster may have changed
    # since its try, so the loop does not go quiet, and the next cycle tries it again.
    assert not sim.loop.unchanged(time.monotonic())
    third = sim.cycle()
    assert third.jobs["default/huge"].job_fit_error and third.report.unreached == {"default/huge2"}


def test_without_a_budget_the_same_backlog_is_placed_in_one_cycle():
    sim = InProcessCluster(CONF, **gangs_in_priority_order())
    result = sim.cycle()
    assert len(result.placements) == 6
    assert result.report.unreached == set()


def starving_behind_a_full_node():
    """n1 full of preemptable low-priority pods; two higher-priority jobs that fit only by preempting."""
    low = [
        pod(
            f"low-{i}",
            cpu="1",
            group="low",
            node_name="n1",
            phase="Running",
            annotations={"volcano.sh/preemptable": "true"},
        )
        for i in range(4)
    ]
    return dict(
        nodes=[node("n1", cpu="4")],
        priority_classes=PRIORITIES,
        podgroups=[
            podgroup("low", min_member=1, phase="Running"),
            podgroup("first", min_member=1, priority_class="high"),
            podgroup("second", min_member=2, priority_class="mid"),
        ],
        pods=[
            *low,
            pod("first-0", cpu="1", group="first", priority_class="high"),
            *(pod(f"second-{i}", cpu="1", group="second", priority_class="mid") for i in range(2)),
        ],
    )


def test_preempt_evicts_only_for_the_jobs_allocate_reached():
    unbounded = InProcessCluster(CONF, **starving_behind_a_full_node())
    assert len(unbounded.cycle().evictions) == 3  # room for first and second

    bounded = InProcessCluster(CONF, **starving_behind_a_full_node())
    bounded.loop.cycle_budget = 0.0
    result = bounded.cycle()
    assert result.report.unreached == {"default/second"}
    assert len(result.evictions) == 1  # for first only
    assert result.jobs["default/second"].count(TaskStatus.PENDING) == 2


def test_explain_says_a_job_was_not_reached():
    sim = InProcessCluster(CONF, **gangs_in_priority_order())
    sim.loop.cycle_budget = 0.0
    obs = Observatory()
    result = sim.cycle()
    obs.on_cycle(result, 0.01, None)
    doc = DebugApi(obs).job("default", "low")
    assert doc["reason"] == NOT_REACHED
    assert DebugApi(obs).job("default", "high")["reason"] == ""


def test_the_budget_is_a_flag_of_the_binary():
    assert options_from(build_parser().parse_args([])).cycle_budget == 1.0
    assert options_from(build_parser().parse_args(["--cycle-budget", "250ms"])).cycle_budget == 0.25
