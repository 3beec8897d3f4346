"""sla: a job past its waiting time goes first and is let in."""

from caldera.hack.scenario import cluster, node, pod, podgroup, run_session
from caldera.plugins.sla import waiting_time

CONF = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: sla\n    arguments:\n      sla-waiting-time: {w}\n  - name: gang\n- plugins:\n  - name: overcommit\n    arguments:\n      overcommit-factor: 1.0\n  - name: predicates\n'


def test_waiting_times():
    assert waiting_time("1h30m") == 5400
    assert waiting_time("500ms") == 0.5
    assert waiting_time("soon") is None
    assert waiting_time("") is None
    assert waiting_time("0s") is None
    assert waiting_time("-1m") is None


def test_job_past_its_sla_is_let_in_even_without_room():
    pg = podgroup("late", phase="Pending", min_resources={"cpu": "100"})
    snap = cluster(nodes=[node("n1", cpu="4")], pods=[pod("late-0", group="late")], podgroups=[pg])
    ssn, _ = run_session(snap, CONF.format(w="1s"))  # created in 2026-01-01 by the builders: long past
    assert ssn.jobs["default/late"].phase == "Inqueue"
    ssn, _ = run_session(
        cluster(
            nodes=[node("n1", cpu="4")],
            pods=[pod("late-0", group="late")],
            podgroups=[podgroup("late", phase="Pending", min_resources={"cpu": "100"})],
        ),
        CONF.format(w="1000000h"),
    )
    assert ssn.jobs["default/late"].phase == "Pending"
