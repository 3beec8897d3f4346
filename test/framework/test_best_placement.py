"""The per-template placement cache, patched row by row, always agrees with a full evaluation."""

import random

import numpy as np
import pytest

from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.session import open_session
from caldera.hack.scenario import cluster, gang, node, pod
from caldera.scheduler.registry import builtin_registry

#: no predicates plugin: no predicate checks free resources, so the placement cache checks the
#: future idle itself, on the full evaluation and on every patched row alike (the patched rows once
#: skipped it: a node that had filled up stayed feasible, which is what made TestHDRF's "blocking
#: nodes test" give 16/14 instead of Volcano's 15/15)
WITHOUT_PREDICATES = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: proportion
  - name: nodeorder
"""


@pytest.mark.parametrize("conf_text", [DEFAULT_CONF, WITHOUT_PREDICATES], ids=["default", "no-predicates"])
def test_incremental_choice_equals_full_evaluation_through_many_placements(conf_text):
    rng = random.Random(7)
    nodes = [
        node(
            f"n{i:02d}",
            cpu=str(rng.choice([2, 4, 8])),
            memory=f"{rng.choice([4, 8, 16])}Gi",
            pods=str(rng.choice([3, 10, 110])),
            labels={"zone": rng.choice(["a", "b"])},
            taints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}] if i % 7 == 0 else [],
        )
        for i in range(40)
    ]
    running = [
        pod(
            f"other-{i}",
            cpu="1",
            memory="1Gi",
            scheduler="default-scheduler",
            node_name=f"n{i:02d}",
            phase="Running",
        )
        for i in range(0, 40, 3)
    ]
    jobs = []
    pods = []
    for j in range(30):
        cpu, mem = rng.choice([("500m", "512Mi"), ("1", "2Gi"), ("2", "1Gi")])
        selector = {"zone": "a"} if j % 5 == 0 else None
        pg, ps = gang(f"j{j}", rng.randint(1, 4), cpu=cpu, memory=mem, node_selector=selector)
        jobs.append(pg)
        pods.extend(ps)
    registry = builtin_registry()
    conf = parse_conf(conf_text, registry)
    ssn = open_session(
        cluster(nodes=nodes, pods=running + pods, podgroups=jobs), conf.tiers, registry.plugins
    )
    stmt = ssn.statement()
    checked = 0
    for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        for task in list(job.tasks_in(TaskStatus.PENDING)):
            assert ssn.placement._incremental_ok(task)  # the cached, row-patched path is the one under test
            fast = ssn.best_placement(task)
            full = ssn.placement.full_placement(task)  # every predicate and score afresh
            assert fast == full, (task.name, fast, full)
            # a node group's rows (the topology-aware allocate's dry runs): the cache read on them,
            # in row order and in any order (ties still go to the name that sorts first)
            group = np.asarray(sorted(rng.sample(range(len(nodes)), 8)), dtype=np.intp)
            assert ssn.best_placement(task, rows=group) == ssn.placement.full_placement(task, group)
            shuffled = group[::-1].copy()
            assert ssn.best_placement(task, rows=shuffled) == ssn.placement.full_placement(task, group)
            checked += 1
            if fast is None:
                continue
            row, now = fast
            if now:
                stmt.allocate(task, ssn.node_list[row].name)
            else:
                stmt.pipeline(task, ssn.node_list[row].name)
    assert checked == len(pods)
    assert any(t.status == TaskStatus.ALLOCATED for j in ssn.jobs.values() for t in j.tasks.values())
    # undoing everything brings the cached answers back to the starting ones
    first = next(iter(sorted(ssn.jobs.values(), key=lambda j: j.uid)))
    task = next(iter(first.tasks.values()))
    stmt.discard()
    assert ssn.best_placement(task) == ssn.placement.full_placement(task)


def test_spread_and_affinity_laid_over_the_cache_agree_with_a_full_evaluation():
    """Topology spread and inter-pod affinity are not node-local: evaluated over the cached rows on
    every call, they must still give the answer of a full evaluation as placements accumulate."""
    rng = random.Random(11)
    zone = "topology.kubernetes.io/zone"
    nodes = [
        node(
            f"n{i:02d}",
            cpu=str(rng.choice([4, 8])),
            memory="16Gi",
            labels={zone: "abcd"[i % 4], "kubernetes.io/hostname": f"n{i:02d}"} if i % 9 else {},
        )
        for i in range(36)
    ]
    pods = []
    jobs = []
    for j in range(24):
        app = f"app{j % 3}"
        kind = j % 4
        extra: dict = {}
        affinity = None
        if kind == 0:
            extra = {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": zone,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": app}},
                    }
                ]
            }
        elif kind == 1:
            extra = {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 2,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app": app}},
                    }
                ]
            }
        elif kind == 2:
            affinity = {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 10,
                            "podAffinityTerm": {
                                "topologyKey": zone,
                                "labelSelector": {"matchLabels": {"app": app}},
                            },
                        }
                    ]
                }
            }
        pg, ps = gang(
            f"j{j}",
            rng.randint(1, 3),
            cpu=rng.choice(["500m", "1", "2"]),
            labels={"app": app},
            spec_extra=extra,
            affinity=affinity,
        )
        jobs.append(pg)
        pods.extend(ps)
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    ssn = open_session(cluster(nodes=nodes, pods=pods, podgroups=jobs), conf.tiers, registry.plugins)
    stmt = ssn.statement()
    placed = 0
    for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        for task in sorted(job.tasks_in(TaskStatus.PENDING), key=lambda t: t.name):
            assert ssn.placement._incremental_ok(task)
            fast = ssn.best_placement(task)
            full = ssn.placement.full_placement(task)
            assert fast == full, (task.name, fast, full)
            group = np.asarray(sorted(rng.sample(range(len(nodes)), 6)), dtype=np.intp)
            assert ssn.best_placement(task, rows=group) == ssn.placement.full_placement(task, group)
            if fast is None:
                continue
            row, now = fast
            (stmt.allocate if now else stmt.pipeline)(task, ssn.node_list[row].name)
            placed += 1
    assert placed > len(pods) // 2


def test_without_predicates_a_node_that_filled_up_is_not_offered_again():
    """One node of 2 cpu and three single-pod jobs of 1 cpu: the first two fit, the third finds no
    node (with no predicates plugin the placement cache itself checks free resources, on patched rows
    too: it once offered the full node again, to be pipelined onto)."""
    registry = builtin_registry()
    conf = parse_conf(WITHOUT_PREDICATES, registry)
    jobs = [gang(f"j{i}", 1, cpu="1", memory="1Gi") for i in range(3)]
    ssn = open_session(
        cluster(
            nodes=[node("n1", cpu="2", memory="8Gi", pods="110")],
            pods=[p for _, ps in jobs for p in ps],
            podgroups=[pg for pg, _ in jobs],
        ),
        conf.tiers,
        registry.plugins,
    )
    stmt = ssn.statement()
    tasks = [next(iter(ssn.jobs[f"default/j{i}"].tasks.values())) for i in range(3)]
    for task in tasks[:2]:
        assert ssn.best_placement(task) == (0, True)
        stmt.allocate(task, "n1")
    assert ssn.best_placement(tasks[2]) is None
    assert ssn.placement.full_placement(tasks[2]) is None


def test_predicates_that_do_not_apply_to_a_pod_are_left_out_of_its_placement():
    """A pod without host ports is not checked for ports (it would pass every node); one asking
    for a host port already taken on the best node goes elsewhere, patched rows included."""
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    nodes = [node("n1", cpu="8", memory="16Gi"), node("n2", cpu="4", memory="8Gi")]
    busy = pod("web-old", node_name="n1", phase="Running", scheduler="default-scheduler", host_ports=[80])
    plain = gang("plain", 1)
    ported = gang("ported", 2, host_ports=[80])
    ssn = open_session(
        cluster(nodes=nodes, pods=[busy, *plain[1], *ported[1]], podgroups=[plain[0], ported[0]]),
        conf.tiers,
        registry.plugins,
    )
    plain_task = next(iter(ssn.jobs["default/plain"].tasks.values()))
    ported_tasks = list(ssn.jobs["default/ported"].tasks.values())
    ports_fn = ssn.placement.callbacks.bulk_predicate_fns["predicates"]["ports"].fn
    assert ssn.best_placement(plain_task) == (0, True)  # n1: more room
    assert ports_fn not in ssn.placement._placements[plain_task.template].preds
    row, _ = ssn.best_placement(ported_tasks[0])
    assert ssn.node_list[row].name == "n2"
    assert ports_fn in ssn.placement._placements[ported_tasks[0].template].preds
    ssn.statement().allocate(ported_tasks[0], "n2")
    # n2's port 80 is now taken too (a patched row): the second pod fits nowhere
    assert ssn.best_placement(ported_tasks[1]) is None
    assert ssn.placement.full_placement(ported_tasks[1]) is None


def test_equal_nodes_go_to_the_name_that_sorts_first_whatever_their_rows():
    """Three identical nodes added as c, b, a: the cache gives them rows in that order, and the pod
    goes to a (kube-scheduler picks among equal scores at random; Caldera deterministically by
    name), on the cached path and a full evaluation alike; once a is taken, b."""
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    job = gang("j", 2)
    ssn = open_session(
        cluster(nodes=[node(n) for n in ("c", "b", "a")], pods=job[1], podgroups=[job[0]]),
        conf.tiers,
        registry.plugins,
    )
    assert [n.name for n in ssn.node_list] == ["c", "b", "a"]
    first, second = ssn.jobs["default/j"].tasks.values()
    choices = (
        lambda t: ssn.best_placement(t),  # the template's cache
        lambda t: ssn.best_placement(t, rows=ssn.all_rows),  # the cache, read on a group's rows
        lambda t: ssn.placement.full_placement(t),  # a full evaluation
    )
    for choose in choices:
        row, now = choose(first)
        assert (ssn.node_list[row].name, now) == ("a", True)
    ssn.statement().allocate(first, "a")
    for choose in choices:
        row, _ = choose(second)
        assert ssn.node_list[row].name == "b"
