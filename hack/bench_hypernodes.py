"""Topology-aware gangs over a HyperNode tree, in process: ``caldera-sim bench core --topology``.

A three-tier HyperNode tree over the cluster (leaves of ``leaf`` nodes, ``spine`` leaves a spine, every
spine under one root), gangs of the given sizes, each PodGroup with ``networkTopology`` (hard mode at
the tier its size needs, or soft mode), placed by the default conf with ``network-topology-aware``.
The same gangs without topology, under the default conf, are the yardstick: the figure is scheduler
CPU per placed pod of each, and their ratio. Every pod a hard gang places must be inside one group
of its tier (checked, so the figure is never that of a wrong placement).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any

import msgspec

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.objects import HyperNode, Pod, PodGroup
from caldera.hack.scenario import gang, node, podgroup
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry

LEAF_LABEL = "bench.caldera.dev/leaf"

TOPOLOGY_CONF = DEFAULT_CONF.replace(
    "  - name: nodeorder", "  - name: nodeorder\n  - name: network-topology-aware"
)


@dataclass
class TreeFigures:
    title: str
    placed: int
    wanted: int
    cpu: float
    wall: float
    cycles: int

    @property
    def cpu_per_pod(self) -> float:
        return self.cpu / max(self.placed, 1)


def leaf_name(j: int) -> str:
    return f"leaf-{j:04d}"


def hypernode_manifests(leaves: int, spine: int = 16) -> list[dict[str, Any]]:
    """The HyperNodes of the three-tier tree as API objects (topology.volcano.sh/v1alpha1): ``leaves``
    leaves of tier 1, each selecting the nodes labelled ``LEAF_LABEL=<its name>``, ``spine`` leaves a
    spine (tier 2), every spine under one root (tier 3)."""

    def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": tier, "members": members},
        }

    out = [
        hypernode(
            leaf_name(j),
            1,
            [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {LEAF_LABEL: leaf_name(j)}}}}],
        )
        for j in range(leaves)
    ]
    spines = (leaves + spine - 1) // spine
    for k in range(spines):
        members = [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": leaf_name(j)}}}
            for j in range(k * spine, min((k + 1) * spine, leaves))
        ]
        out.append(hypernode(f"spine-{k:03d}", 2, members))
    root = [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"spine-{k:03d}"}}} for k in range(spines)
    ]
    out.append(hypernode("root", 3, root))
    return out


def tree(nodes: int, leaf: int = 8, spine: int = 16) -> tuple[list[Any], list[HyperNode], dict[str, str]]:
    """The nodes (32 cpu / 128Gi each, labelled with their leaf), the HyperNodes, and node -> leaf."""
    node_objs = []
    leaf_of: dict[str, str] = {}
    leaves = (nodes + leaf - 1) // leaf
    for i in range(nodes):
        name = f"node-{i:05d}"
        leaf_of[name] = leaf_name(i // leaf)
        node_objs.append(node(name, cpu="32", memory="128Gi", pods="110", labels={LEAF_LABEL: leaf_of[name]}))
    hypernodes = [msgspec.convert(hn, HyperNode) for hn in hypernode_manifests(leaves, spine)]
    return node_objs, hypernodes, leaf_of


def gangs(count: int, size: int, topology: dict[str, Any] | None) -> list[tuple[PodGroup, list[Pod]]]:
    """``count`` gangs of ``size`` pods of 4 cpu / 8Gi (8 fit a node)."""
    out = []
    for j in range(count):
        name = f"g{size}-{j:05d}"
        _, pods = gang(name, size, cpu="4", memory="8Gi")
        out.append((podgroup(name, min_member=size, network_topology=topology), pods))
    return out


def run_tree(
    title: str,
    nodes: int,
    size: int,
    count: int,
    topology: dict[str, Any] | None,
    leaf: int = 8,
    spine: int = 16,
) -> TreeFigures:
    registry = builtin_registry()
    conf = parse_conf(TOPOLOGY_CONF if topology else DEFAULT_CONF, registry)
    node_objs, hypernodes, leaf_of = tree(nodes, leaf, spine)
    cache = ClusterCache()
    for n in node_objs:
        cache.upsert_node(n)
    for hn in hypernodes:
        cache.upsert_hypernode(hn)
    wanted = 0
    members: dict[str, str] = {}
    for pg, pods in gangs(count, size, topology):
        cache.upsert_podgroup(pg)
        for p in pods:
            cache.upsert_pod(p)
            members[p.metadata.uid] = f"{pg.metadata.namespace}/{pg.metadata.name}"
        wanted += len(pods)
    binder = RecordingBinder()
    loop = SchedulerLoop(cache, lambda: conf, registry, binder)
    # what building the cluster left for the collector is collected before the clock starts (as
    # bench.drain does): a collection inside the measured cycles is the cycles' own
    gc.collect()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    cycles = 0
    while cycles < 200:
        cycles += 1
        before = len(binder.placements)
        loop.run_once()
        for placement in binder.placements[before:]:
            cache.confirm_bound(placement.task.uid)
        if len(binder.placements) >= wanted or len(binder.placements) == before:
            break
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if topology and topology.get("mode") == "hard":
        _check_inside(binder, members, leaf_of, int(topology.get("highestTierAllowed", 1)), spine)
    return TreeFigures(title, len(binder.placements), wanted, cpu, wall, cycles)


def _check_inside(
    binder: RecordingBinder, members: dict[str, str], leaf_of: dict[str, str], tier: int, spine: int
) -> None:
    """Every hard gang inside one group of its highest allowed tier."""
    groups: dict[str, set[str]] = {}
    for placement in binder.placements:
        leaf_name = leaf_of[placement.node]
        group = (
            leaf_name
            if tier == 1
            else f"spine-{int(leaf_name.split('-')[1]) // spine:03d}"
            if tier == 2
            else "root"
        )
        groups.setdefault(members[placement.task.uid], set()).add(group)
    spread = {job: g for job, g in groups.items() if len(g) > 1}
    if spread:
        raise AssertionError(
            f"hard gangs placed across groups of tier {tier}: {dict(list(spread.items())[:3])}"
        )


#: (size, gangs, networkTopology) of each measured shape, at 5,000 nodes (scaled with --nodes)
SHAPES: list[tuple[int, int, dict[str, Any]]] = [
    (8, 400, {"mode": "hard", "highestTierAllowed": 1}),
    (32, 100, {"mode": "hard", "highestTierAllowed": 1}),
    (128, 25, {"mode": "hard", "highestTierAllowed": 2}),
    (32, 100, {"mode": "soft", "highestTierAllowed": 1}),
]


def run_topology(nodes: int, repeat: int = 3) -> list[tuple[list[TreeFigures], list[TreeFigures]]]:
    """Each shape with its topology and without, ``repeat`` times each (alternating: run i of each
    is a pair), printed with the median CPU per placed pod of each, their ratio, and the ratio of
    every pair (issue 28's target holds when every one of them is at most 2x). Returns, per shape,
    (the runs without topology, the runs with it), in run order."""
    print(
        f"topology-aware gangs over a HyperNode tree: {nodes} nodes (32 cpu / 128Gi), leaves of 8 nodes,"
        f" 16 leaves a spine, one root; pods of 4 cpu / 8Gi; in process, recording binder;"
        f" median of {repeat} runs each"
    )
    out = []
    scale = nodes / 5000
    for size, count, topology in SHAPES:
        count = max(1, int(count * scale))
        mode = f"{topology['mode']} tier {topology['highestTierAllowed']}"
        plains, awares = [], []
        for _ in range(repeat):
            plains.append(run_tree(f"{count} gangs of {size}, no topology", nodes, size, count, None))
            awares.append(run_tree(f"{count} gangs of {size}, {mode}", nodes, size, count, topology))
        pair = []
        ratios = [a.cpu_per_pod / max(p.cpu_per_pod, 1e-9) for p, a in zip(plains, awares, strict=True)]
        out.append((list(plains), list(awares)))
        for runs in (plains, awares):
            runs = sorted(runs, key=lambda f: f.cpu_per_pod)
            fig = runs[len(runs) // 2]
            spread = ", ".join(f"{f.cpu_per_pod * 1e3:.3f}" for f in runs)
            print(
                f"  {fig.title:<40} {fig.placed:>6}/{fig.wanted} placed over {fig.cycles} cycles:"
                f" {fig.cpu_per_pod * 1e3:.3f} ms CPU per placed pod (runs: {spread})"
            )
            pair.append(fig)
        plain, aware = pair
        print(
            f"  -> topology costs {aware.cpu_per_pod / max(plain.cpu_per_pod, 1e-9):.2f}x the same gangs without"
            f" (medians); run by run: {', '.join(f'{r:.2f}x' for r in ratios)}"
        )
    return out
