"""Benchmark of topology-aware group selection: how long choosing (and dry-run placing) the node
group of one gang takes, at cluster scale. Prints figures; asserts nothing.

    python -m caldera.hack.bench_topology --nodes 5000 --groups 100 --gang 64

Nodes are split evenly into ``--groups`` leaf groups (label ``example.com/leaf``), ten leaves per
spine (``example.com/spine``). Scenarios:

- empty: every leaf is free and equal (all tie on score; ties go by name);
- loaded: random usage per node, so leaves differ in room and many are feasible;
- escalate: each pod takes a whole node and the gang needs more nodes than any leaf has, so every
  leaf is pruned and a spine is chosen;
- mpi: workers that repel each other per hostname (one per node), more than a leaf has nodes:
  every leaf is pruned by node count, a spine is chosen;
- infeasible: the gang fits no spine either (hard mode: pending, with its reason).

Each figure is the median of ``--repeat`` runs of allocate_in_topology on a fresh session, with
the allocate action's own per-job placement for the dry runs; the chosen statement is discarded
after each run so every run sees the same state.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from caldera.actions.allocate import allocate_job
from caldera.actions.topology import allocate_in_topology
from caldera.cache.store import ClusterCache
from caldera.config.conf import parse_conf
from caldera.framework.session import open_session
from caldera.hack.scenario import load, node, pod, podgroup
from caldera.scheduler.registry import builtin_registry

LEAF, SPINE = "example.com/leaf", "example.com/spine"

CONF = f"""actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
  - name: network-topology-aware
    arguments:
      topologyKeys: [{LEAF}, {SPINE}]
"""


def build(nodes: int, groups: int, gang: int, cpu: str, scenario: str, seed: int = 1) -> ClusterCache:
    rng = random.Random(seed)
    per_group = max(1, nodes // groups)
    node_objs, pods = [], []
    for i in range(nodes):
        g = min(i // per_group, groups - 1)
        name = f"node-{i:05d}"
        node_objs.append(
            node(
                name, cpu="32", memory="128Gi", labels={LEAF: f"leaf-{g:03d}", SPINE: f"spine-{g // 10:02d}"}
            )
        )
        if scenario == "loaded":
            used = rng.choice([0, 0, 8, 16, 24, 28])
            if used:
                pods.append(
                    pod(
                        f"fill-{i}",
                        cpu=str(used),
                        memory="1Gi",
                        node_name=name,
                        phase="Running",
                        scheduler="other",
                    )
                )
    highest = 1 if scenario in ("empty", "loaded") else 2
    pg = podgroup("train", min_member=gang, network_topology={"mode": "hard", "highestTierAllowed": highest})
    extra: dict[str, Any] = {}
    if scenario == "mpi":
        term = {"labelSelector": {"matchLabels": {"job": "train"}}, "topologyKey": "kubernetes.io/hostname"}
        extra = {
            "labels": {"job": "train"},
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
        }
    pods += [pod(f"train-{i}", cpu=cpu, memory="4Gi", group="train", **extra) for i in range(gang)]
    return load(ClusterCache(("caldera",)), nodes=node_objs, pods=pods, podgroups=[pg])


def run(cache: ClusterCache, repeat: int) -> dict[str, Any]:
    registry = builtin_registry()
    conf = parse_conf(CONF, registry)
    opens, selects, places, last = [], [], [], None
    spent = [0.0, 0]

    def timed_place(ssn: Any, job: Any, rows: Any) -> Any:
        t = time.perf_counter()
        try:
            return allocate_job(ssn, job, rows)
        finally:
            spent[0] += time.perf_counter() - t
            spent[1] += 1

    for _ in range(repeat):
        spent[0], spent[1] = 0.0, 0
        snap = cache.snapshot()
        t0 = time.perf_counter()
        ssn = open_session(snap, conf.tiers, registry.plugins, conf.configurations)
        t1 = time.perf_counter()
        decision = allocate_in_topology(ssn, ssn.jobs["default/train"], timed_place)
        t2 = time.perf_counter()
        opens.append(t1 - t0)
        selects.append(t2 - t1)
        places.append(spent[0])
        assert decision is not None
        if decision.statement is not None:
            decision.statement.discard()
        last = decision
    assert last is not None
    outcomes: dict[str, int] = {}
    for t in last.trials:
        outcomes[t.outcome] = outcomes.get(t.outcome, 0) + 1
    return {
        "open_ms": statistics.median(opens) * 1000,
        "select_ms": statistics.median(selects) * 1000,
        "best_ms": min(selects) * 1000,
        "place_ms": statistics.median(places) * 1000,
        "dry_runs": spent[1],
        "group": f"tier {last.group.tier} {last.group.name}" if last.group else "none (pending)",
        "outcomes": outcomes,
        "reason": last.reason,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_topology", description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--gang", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    per_group = args.nodes // args.groups
    scenarios = [
        ("empty", "4"),
        ("loaded", "4"),
        ("escalate", "32"),
        ("mpi", "4"),
        ("infeasible", "32"),
    ]
    print(
        f"topology group selection: {args.nodes} nodes, {args.groups} leaf groups of {per_group} nodes "
        f"in {max(1, args.groups // 10)} spines, one gang of {args.gang} pods (median of {args.repeat})"
    )
    for scenario, cpu in scenarios:
        gang = args.gang
        if scenario == "infeasible":
            gang = per_group * 10 + 1
        t0 = time.perf_counter()
        cache = build(args.nodes, args.groups, gang, cpu, scenario)
        built = time.perf_counter() - t0
        r = run(cache, args.repeat)
        trials = ", ".join(f"{n} {k}" for k, n in sorted(r["outcomes"].items()))
        print(
            f"  {scenario:<10} gang {gang:>3} x {cpu:>2} cpu: select {r['select_ms']:7.2f} ms "
            f"(best {r['best_ms']:.2f}; {r['dry_runs']} dry runs {r['place_ms']:.2f} ms), session open incl. tree {r['open_ms']:6.2f} ms -> {r['group']}; "
            f"groups: {trials}  [cluster built in {built:.1f}s]"
        )
        if r["reason"]:
            print(f"             reason: {r['reason'][:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
