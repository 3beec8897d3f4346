"""Network topology as a tree of node groups: leaf switches inside spines inside InfiniBand clusters.

Groups come from two sources, which may be combined:

- node label keys, one per tier from narrowest to widest (``topologyKeys``): tier ``i`` holds one
  group per distinct value of the ``i``-th key, named by that value;
- Volcano's HyperNode objects (``topology.volcano.sh/v1alpha1``): each is a group of its
  ``spec.tier``; its members are nodes (by exact name, by regular expression over node names, or by
  labels) or other HyperNodes (by exact name), whose nodes it then contains.

The whole cluster is the implicit top: a group one tier above the widest one. A group's nodes are
held as sorted rows of the session's node table, so evaluating a group is numpy work over its rows.
This module is a pure model: it knows nothing about predicates, plugins or allocation.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from caldera.framework.model import ALLOCATED_STATUSES, JobInfo, NodeInfo, TaskInfo, TaskStatus
from caldera.framework.nodetable import NodeTable
from caldera.framework.objects import HyperNode, MemberSelector, NetworkTopologySpec
from caldera.framework.resource import MIN_RESOURCE, Resource

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.topology")

__all__ = [
    "CLUSTER_GROUP",
    "HARD",
    "SESSION_KEY",
    "SOFT",
    "GradientRequest",
    "NodeGroup",
    "NormalPodBinpack",
    "Requirement",
    "TierLayout",
    "Topology",
    "TopologySettings",
    "build_topology",
    "gradients",
    "hypernode_members",
    "label_domains",
    "lowest_common_group",
    "network_aware_scores",
    "reverse_and_cap",
    "tier_allowed",
]

#: Where the network-topology-aware plugin publishes the session's Topology and settings.
SESSION_KEY = "topology"
HARD = "hard"
SOFT = "soft"
CLUSTER_GROUP = "<cluster>"

MEMBER_NODE = "Node"
MEMBER_HYPERNODE = "HyperNode"


@dataclass(eq=False)
class NodeGroup:
    """One group of nodes at one tier. ``rows`` are sorted, unique rows of the session's node table."""

    name: str
    tier: int
    rows: np.ndarray
    source: str  # "label:<key>", "hypernode" or "cluster"
    parent: NodeGroup | None = None
    children: list[NodeGroup] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.tier}/{self.name}"

    @property
    def size(self) -> int:
        return len(self.rows)

    def contains_rows(self, rows: np.ndarray) -> bool:
        if len(rows) == 0:
            return True
        if len(rows) > len(self.rows):
            return False
        idx = np.searchsorted(self.rows, rows)
        idx[idx >= len(self.rows)] = 0
        return bool((self.rows[idx] == rows).all())

    def __repr__(self) -> str:
        return f"NodeGroup(tier {self.tier} {self.name!r}, {self.size} nodes)"


class Segments:
    """Groups' rows laid end to end (``rows[starts[i]:starts[i] + sizes[i]]`` are group i's), so that
    per-group sums over any per-row array are one ``np.add.reduceat``. Empty groups are left out."""

    __slots__ = ("groups", "in_order", "rows", "sizes", "starts")

    def __init__(
        self, groups: list[NodeGroup], rows: np.ndarray, starts: np.ndarray, sizes: np.ndarray
    ) -> None:
        self.groups = groups
        self.rows = rows
        self.starts = starts
        self.sizes = sizes
        #: the rows are 0, 1, 2, ... (groups of consecutive rows, in row order, as when nodes are
        #: added group by group): a per-row array's first ``len(rows)`` entries are laid out already
        self.in_order = bool(len(rows)) and int(rows[0]) == 0 and bool((np.diff(rows) == 1).all())

    def laid_out(self, per_row: np.ndarray) -> np.ndarray:
        """``per_row`` (indexed by row) in the segments' order: a view when the rows are in order,
        else a gather."""
        return per_row[: len(self.rows)] if self.in_order else per_row[self.rows]

    @classmethod
    def of(cls, groups: Iterable[NodeGroup]) -> Segments:
        kept = [g for g in groups if g.size]
        sizes = np.fromiter((g.size for g in kept), dtype=np.intp, count=len(kept))
        starts = np.zeros(len(kept), dtype=np.intp)
        if len(kept) > 1:
            np.cumsum(sizes[:-1], out=starts[1:])
        rows = np.concatenate([g.rows for g in kept]) if kept else np.zeros(0, dtype=np.intp)
        return cls(kept, rows, starts, sizes)


@dataclass(frozen=True)
class Requirement:
    """A job's network topology requirement: ``hard`` stays pending rather than spanning groups wider
    than ``highest_tier``; ``soft`` prefers a group and falls back to the whole cluster."""

    mode: str
    highest_tier: int
    from_default: bool = False
    #: node label keys whose domains are the only groups (a Kubernetes PodGroup's
    #: ``schedulingConstraints.topology``): the whole job inside one domain of them, over
    #: ``label_domains`` instead of the session's topology
    label_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class TopologySettings:
    """The conf-level switches (the plugin's arguments)."""

    keys: tuple[str, ...] = ()
    default_mode: str = ""  # "", "hard" or "soft": applied to gangs without their own networkTopology
    default_highest_tier: int = 1
    score_policy: str = "binpack"  # "binpack" (tightest fit) or "spread"


class Topology:
    """Every group of a session, per tier, plus the whole cluster as the top."""

    def __init__(
        self,
        groups: Iterable[NodeGroup],
        row_count: int,
        tier_labels: Mapping[int, str] | None = None,
        errors: Sequence[str] = (),
        tier_names: Mapping[str, int] | None = None,
    ) -> None:
        self.by_tier: dict[int, list[NodeGroup]] = {}
        self.by_key: dict[str, NodeGroup] = {}
        for g in groups:
            if g.key in self.by_key:
                continue
            self.by_key[g.key] = g
            self.by_tier.setdefault(g.tier, []).append(g)
        for level in self.by_tier.values():
            level.sort(key=lambda g: g.name)
        self.tiers: list[int] = sorted(self.by_tier)
        top = (self.tiers[-1] + 1) if self.tiers else 1
        self.cluster = NodeGroup(CLUSTER_GROUP, top, np.arange(row_count, dtype=np.intp), "cluster")
        self.tier_labels: dict[int, str] = dict(tier_labels or {})
        self.tier_labels.setdefault(top, "cluster")
        self.errors: list[str] = list(errors)
        #: tier by name (``tier_allowed``): HyperNodes' ``spec.tierName``, and each label key of a
        #: label tier (the name Volcano's label discovery gives the HyperNodes it makes of a key)
        self.tier_names: dict[str, int] = dict(tier_names or {})
        #: (job, field, name) of unknown tier names already logged against this topology
        self.unknown_names_logged: set[tuple[str, str, str]] = set()
        self._segments: dict[int, Segments] = {}
        self._leaves: tuple[np.ndarray, list[NodeGroup]] | None = None
        self._layouts: dict[tuple[int, ...], TierLayout] = {}
        self._link_parents()

    @property
    def top_tier(self) -> int:
        return self.cluster.tier

    @property
    def empty(self) -> bool:
        return not self.tiers

    def groups(self, tier: int) -> list[NodeGroup]:
        """The groups of one tier, sorted by name (the top tier is the cluster group)."""
        if tier == self.top_tier:
            return [self.cluster]
        return self.by_tier.get(tier, [])

    def segments(self, tier: int) -> Segments:
        """The tier's groups as :class:`Segments`, made on first use (derived data: the topology
        itself never changes, so sessions sharing it share these too)."""
        made = self._segments.get(tier)
        if made is None:
            made = self._segments[tier] = Segments.of(self.groups(tier))
        return made

    def group(self, name: str, tier: int | None = None) -> NodeGroup | None:
        if tier is not None:
            return self.by_key.get(f"{tier}/{name}")
        for t in self.tiers:
            g = self.by_key.get(f"{t}/{name}")
            if g is not None:
                return g
        return self.cluster if name == CLUSTER_GROUP else None

    def tier_label(self, tier: int) -> str:
        return self.tier_labels.get(tier, f"tier {tier}")

    def _link_parents(self) -> None:
        """A group without an explicit parent (label tiers) gets the narrowest wider group that
        contains all its nodes, ties by name; the cluster is everyone's last resort."""
        for tier in self.tiers:
            for g in self.by_tier[tier]:
                if g.parent is None:
                    g.parent = self._narrowest_containing(g.rows, above=tier) or self.cluster
                g.parent.children.append(g)

    def _narrowest_containing(self, rows: np.ndarray, above: int = 0) -> NodeGroup | None:
        for tier in self.tiers:
            if tier <= above:
                continue
            for g in self.by_tier[tier]:
                if g.contains_rows(rows):
                    return g
        return None

    def containing(self, rows: np.ndarray, max_tier: int | None = None) -> list[NodeGroup]:
        """Groups holding every one of ``rows``, narrowest tier first (name order within a tier),
        up to ``max_tier`` (the cluster group when the top tier is allowed)."""
        rows = np.unique(np.asarray(rows, dtype=np.intp))
        out: list[NodeGroup] = []
        for tier in [*self.tiers, self.top_tier]:
            if max_tier is not None and tier > max_tier:
                break
            out.extend(g for g in self.groups(tier) if g.contains_rows(rows))
        return out

    def job_rows(self, job: JobInfo, nodes: Mapping[str, NodeInfo]) -> np.ndarray:
        """Rows of the nodes where the job already holds resources (running, bound, allocated or
        pipelined pods): where a restarted or added pod must go back to."""
        rows = {
            nodes[t.node_name].row
            for t in job.tasks_in(*ALLOCATED_STATUSES, TaskStatus.PIPELINED)
            if t.node_name in nodes
        }
        return np.asarray(sorted(rows), dtype=np.intp)

    def job_group(
        self, job: JobInfo, nodes: Mapping[str, NodeInfo], max_tier: int | None = None
    ) -> NodeGroup | None:
        """The narrowest group that holds all the job's placed pods (None when it has none placed,
        or they span more than ``max_tier`` allows)."""
        rows = self.job_rows(job, nodes)
        if len(rows) == 0:
            return None
        found = self.containing(rows, max_tier)
        return found[0] if found else None

    def leaves(self) -> tuple[np.ndarray, list[NodeGroup]]:
        """Each row's own group, the narrowest holding it (Volcano's ``util.FindHyperNodeForNode``:
        tiers lowest first, the first group holding the node; here the first by name), as an index
        into the list returned with it (-1: in no group). Made on first use."""
        if self._leaves is None:
            of = np.full(len(self.cluster.rows), -1, dtype=np.intp)
            groups: list[NodeGroup] = []
            for tier in reversed(self.tiers):  # widest first: narrower groups overwrite
                for g in reversed(self.by_tier[tier]):
                    of[g.rows] = len(groups)
                    groups.append(g)
            self._leaves = (of, groups)
        return self._leaves

    def tier_layout(self, tiers: Sequence[int]) -> TierLayout:
        """The groups of ``tiers`` as one :class:`TierLayout`, made on first use (shared, as
        :meth:`segments`, by the sessions sharing this topology)."""
        key = tuple(tiers)
        made = self._layouts.get(key)
        if made is None:
            made = self._layouts[key] = TierLayout.of(self, key)
        return made

    def tier_score(self, tier: int) -> float:
        """network-topology-aware's ``scoreHyperNodeWithTier``: 1 for the lowest tier, 0 for the
        cluster's (the top tier, Volcano's ``ClusterTopHyperNode``), linear between."""
        low = self.tiers[0] if self.tiers else self.top_tier
        high = self.top_tier
        if low == high:
            return 1.0
        if low <= tier <= high:
            return (high - tier) / (high - low)
        return 0.0

    def describe(self) -> str:
        parts = [f"tier {t} ({self.tier_label(t)}): {len(self.by_tier[t])} groups" for t in self.tiers]
        return "; ".join(parts) or "no topology tiers"


@dataclass(frozen=True)
class TierLayout:
    """The groups of some tiers laid end to end (group ``i``'s member rows are
    ``rows[starts[i]:starts[i + 1]]``), so that per-group sums over all of them are one
    ``np.add.reduceat``, with three lookups:

    - ``row_groups[row_ptr[r]:row_ptr[r + 1]]``: every group holding row ``r`` (to move per-group
      sums along with a few rows' changes);
    - ``cell_of[r]``: row ``r``'s cell, the rows sharing its own group at every tier (the first by
      name holding it);
    - ``cell_groups[c, t]``: cell ``c``'s own group at the ``t``-th tier, ``count`` when none holds it.
    """

    tiers: tuple[int, ...]
    count: int
    rows: np.ndarray
    starts: np.ndarray
    row_ptr: np.ndarray
    row_groups: np.ndarray
    cell_of: np.ndarray
    cell_groups: np.ndarray

    @classmethod
    def of(cls, topo: Topology, tiers: tuple[int, ...]) -> TierLayout:
        n = len(topo.cluster.rows)
        own = np.full((n, len(tiers)), -1, dtype=np.intp)
        rows: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        starts: list[np.ndarray] = []
        count = placed = 0
        for t, tier in enumerate(tiers):
            segs = topo.segments(tier)
            groups = segs.groups
            for i in range(len(groups) - 1, -1, -1):  # the first by name overwrites
                own[groups[i].rows, t] = count + i
            rows.append(segs.rows)
            ids.append(np.repeat(np.arange(count, count + len(groups), dtype=np.intp), segs.sizes))
            starts.append(segs.starts + placed)
            count += len(groups)
            placed += len(segs.rows)
        own[own < 0] = count
        member_rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.intp)
        member_ids = np.concatenate(ids) if ids else np.zeros(0, dtype=np.intp)
        order = np.argsort(member_rows, kind="stable")
        row_ptr = np.zeros(n + 1, dtype=np.intp)
        np.cumsum(np.bincount(member_rows, minlength=n), out=row_ptr[1:])
        cell_groups, cell_of = np.unique(own, axis=0, return_inverse=True)
        return cls(
            tiers,
            count,
            member_rows,
            np.concatenate(starts) if starts else np.zeros(0, dtype=np.intp),
            row_ptr,
            member_ids[order],
            np.asarray(cell_of, dtype=np.intp).reshape(n),
            np.asarray(cell_groups, dtype=np.intp).reshape(-1, len(tiers)),
        )

    def memberships(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For ``rows``: (the index into ``rows`` of each membership, the group it is in)."""
        begin, end = self.row_ptr[rows], self.row_ptr[rows + 1]
        lengths = end - begin
        total = int(lengths.sum())
        which = np.repeat(np.arange(len(rows), dtype=np.intp), lengths)
        offsets = np.arange(total, dtype=np.intp) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return which, self.row_groups[np.repeat(begin, lengths) + offsets]


def tier_allowed(spec: NetworkTopologySpec, topo: Topology) -> tuple[int | None, str]:
    """The highest tier a ``networkTopology`` allows and, when its ``highestTierName`` names no
    tier, why it was not translated. Volcano's ``translateHighestTierNameToAllowed``
    (pkg/scheduler/framework/session.go, run by ``adjustNetworkTopologySpec`` at session open):
    ``highestTierAllowed`` when set (Volcano's PodGroup webhook refuses both set; its scheduler
    reads the number); else the tier of the HyperNodes whose ``spec.tierName`` is the name
    (``HyperNodesInfo.HyperNodeTierNameMap``); a name no tier has is not translated and the spec
    bounds nothing (None)."""
    if spec.highest_tier_allowed is not None:
        return spec.highest_tier_allowed, ""
    name = spec.highest_tier_name
    if not name:
        return None, ""
    tier = topo.tier_names.get(name)
    if tier is None:
        known = ", ".join(f"{n} (tier {t})" for n, t in sorted(topo.tier_names.items())) or "none"
        return None, f"networkTopology.highestTierName {name!r} names no HyperNode tier (tier names: {known})"
    return tier, ""


# ------------------------------------------------------------------------------------------------
# gradients: the groups a job or sub-job is tried in, narrowest tier first
# ------------------------------------------------------------------------------------------------
def ancestors(group: NodeGroup) -> list[NodeGroup]:
    """The group and every group above it, narrowest first (Volcano's ``GetAncestors``)."""
    out = []
    g: NodeGroup | None = group
    while g is not None:
        out.append(g)
        g = g.parent
    return out


def lowest_common_group(a: NodeGroup | None, b: NodeGroup | None) -> NodeGroup | None:
    """The narrowest group holding both (Volcano's ``HyperNodeInfoMap.GetLCAHyperNode``); either
    alone when the other is None."""
    if a is None or b is None:
        return a if b is None else b
    above = {id(g) for g in ancestors(a)}
    for g in ancestors(b):
        if id(g) in above:
            return g
    return None


@dataclass(frozen=True)
class GradientRequest:
    """What a HyperNode gradient function is asked: the groups within ``root`` a job (or
    sub-job) may be placed in. ``highest``: the highest tier allowed in hard mode (None: not hard,
    the root alone); ``allocated``: the narrowest group holding its pods already placed;
    ``minimum``: what it needs at least, for the pre-filter."""

    topology: Topology
    table: NodeTable
    root: NodeGroup
    highest: int | None
    allocated: NodeGroup | None = None
    minimum: Resource | None = None
    #: for eviction (Volcano's ``PurposeEvict``: gangpreempt, gangreclaim): a group is eligible
    #: when its allocatable (not its idle) holds ``minimum``, and the gradients come widest first,
    #: capped (``reverse_and_cap``)
    evict: bool = False


#: network-topology-aware's ``DefaultEvictMaxHyperNodes`` (``hypernode.gradient.evict.max-hypernodes``)
DEFAULT_EVICT_MAX_GROUPS = 8


def reverse_and_cap(found: list[list[NodeGroup]], cap: int) -> list[list[NodeGroup]]:
    """network-topology-aware's ``reverseAndCapEvictionGradients``: the gradients widest tier
    first, at most ``cap`` groups in all (of a tier cut short, its last ones by name)."""
    if cap <= 0:
        return found
    out: list[list[NodeGroup]] = []
    left = cap
    for gradient in reversed(found):
        if not left:
            break
        if len(gradient) <= left:
            out.append(gradient)
            left -= len(gradient)
        else:
            out.append(gradient[len(gradient) - left :])
            left = 0
    return out


def _search_root(req: GradientRequest, highest: int) -> NodeGroup | None:
    """Volcano's ``getSearchRoot`` (network_topology_aware.go): with pods placed, the widest
    group of at most ``highest`` above them, intersected with the root; None when they do not meet."""
    if req.allocated is None:
        return req.root
    allowed = None
    for g in ancestors(req.allocated):
        if g.tier > highest:
            break
        allowed = g
    if allowed is None:
        return None
    lca = lowest_common_group(req.root, allowed)
    if lca is allowed:
        return req.root
    if lca is req.root:
        return allowed
    return None


def gradients(
    req: GradientRequest, evict_cap: int = DEFAULT_EVICT_MAX_GROUPS
) -> list[list[NodeGroup]] | None:
    """Volcano's ``hyperNodeGradientFn`` (pkg/scheduler/plugins/network-topology-aware/
    network_topology_aware.go): breadth first from the search root, the groups of tier at most
    ``highest`` whose summed idle (or future idle) holds ``minimum`` (no such check once pods are
    placed, ``isEligibleHyperNode``), in gradients by tier, narrowest first; within a tier by name.
    Not hard mode: the root alone. None: no search root (the placed pods exceed the highest tier).
    For eviction (``req.evict``) the groups' allocatable must hold ``minimum`` and the gradients
    are reversed and capped at ``evict_cap`` groups (``reverse_and_cap``)."""
    highest = req.highest
    if highest is None:
        return [[req.root]]
    root = _search_root(req, highest)
    if root is None:
        return None
    table = req.table
    cols = vals = None
    if req.allocated is None and req.minimum is not None:
        cols, vals = table.request_vector(req.minimum)
        keep = cols != table.dims.get("pods", -1)  # Volcano's Resource has no pod count to compare
        cols, vals = cols[keep], vals[keep] - MIN_RESOURCE
    eligible: dict[int, list[NodeGroup]] = {}
    queue = deque([root])
    while queue:
        g = queue.popleft()
        if g.tier <= highest and (
            cols is None
            or not len(cols)
            or (req.evict and bool((table.allocatable[g.rows][:, cols].sum(axis=0) >= vals).all()))
            or (not req.evict and bool((table.idle[g.rows][:, cols].sum(axis=0) >= vals).all()))
            or (not req.evict and bool((table.future[g.rows][:, cols].sum(axis=0) >= vals).all()))
        ):
            eligible.setdefault(g.tier, []).append(g)
        queue.extend(g.children)
    found = [sorted(eligible[t], key=lambda g: g.name) for t in sorted(eligible)]
    return reverse_and_cap(found, evict_cap) if req.evict else found


#: network-topology-aware's default weights of the resources it bin-packs HyperNodes by
#: (``getPriorityWeight``: cpu 1, memory 1, no others; ``hypernode.binpack.*`` change them)
BINPACK_WEIGHTS = {"cpu": 1.0, "memory": 1.0}
MAX_NODE_SCORE = 100.0


def binpack_scores(
    table: NodeTable,
    tasks: Sequence[TaskInfo],
    groups: Sequence[NodeGroup],
    weights: Mapping[str, float] = BINPACK_WEIGHTS,
    weight: float = 1.0,
) -> dict[str, float]:
    """network-topology-aware's ``HyperNodeOrderFn`` (network_topology_aware.go): per group, the
    weighted mean over the weighted resources the sub-job asks (``getBinPackWeight``: cpu, memory
    and the ``hypernode.binpack.resources`` listed) of (used + the sub-job's whole request) /
    allocatable, 0 when the request overflows a resource (``getSubJobHyperNodeBinPackingScore``;
    used counts what this session placed and pipelined there, as the plugin's allocate events do);
    when several groups share the best score, each adds the share of the sub-job's pods already on
    its nodes (``scoreWithTaskNum``); scaled to 0..100 times the plugin's ``weight``
    (``scaleFinalScore``)."""
    request = dict.fromkeys(weights, 0.0)
    for task in tasks:
        for name in weights:
            request[name] += max(0.0, task.resreq.get(name))
    asked = [name for name, value in request.items() if value > 0]
    present = [name for name in asked if name in table.dims]
    missing = len(present) < len(asked)  # no node has it: every group overflows
    cols = np.asarray([table.dims[name] for name in present], dtype=np.intp)
    want = np.asarray([request[name] for name in present])
    factors = np.asarray([weights[name] for name in present])
    scores: dict[str, float] = {}
    for g in groups:
        if missing or not len(cols) or factors.sum() <= 0:
            scores[g.name] = 0.0
            continue
        alloc = table.allocatable[g.rows][:, cols].sum(axis=0)
        used = (table.used[g.rows][:, cols] + table.pipelined[g.rows][:, cols]).sum(axis=0) + want
        if bool((used > alloc + MIN_RESOURCE).any()) or bool((alloc <= 0).any()):
            scores[g.name] = 0.0
        else:
            scores[g.name] = float((factors * used / alloc).sum() / factors.sum())
    best = max(scores.values(), default=0.0)
    tied = [g for g in groups if scores[g.name] == best]
    if len(tied) > 1 and tasks:
        placed = {t.node_name for t in tasks if t.node_name}
        row_of = {name: i for i, name in enumerate(table.names) if name in placed} if placed else {}
        for g in tied:
            members = set(g.rows.tolist()) if row_of else set()
            on = sum(1 for t in tasks if row_of.get(t.node_name, -1) in members)
            scores[g.name] += on / len(tasks)
    return {name: MAX_NODE_SCORE * weight * score for name, score in scores.items()}


def network_aware_scores(
    topo: Topology, rows: np.ndarray, allocated: NodeGroup | None, placed_rows: np.ndarray, tasks: int
) -> np.ndarray:
    """network-topology-aware's ``batchNodeOrderFnForNetworkAwarePods`` (network_topology_aware.go),
    before its scaling: for a pod of a sub-group with a ``networkTopology`` whose pods already sit in
    ``allocated`` (the narrowest group holding them, Volcano's ``JobAllocatedHyperNode``), each
    node scores by the tier of the narrowest group holding both it and ``allocated``
    (``networkTopologyAwareScore``: 1 when the node's own group is ``allocated``, else
    ``Topology.tier_score`` of their lowest common group); the nodes sharing the best score each add
    the share of the sub-group's ``tasks`` pods already on their own group's nodes
    (``scoreWithTaskNum``; ``placed_rows``: the rows of those pods). All 0 before any pod is placed."""
    out = np.zeros(len(rows))
    if allocated is None or not len(rows):
        return out
    for g in reversed(ancestors(allocated)):  # widest first: narrower groups overwrite
        out[np.isin(rows, g.rows, assume_unique=False)] = topo.tier_score(g.tier)
    leaf_of, leaves = topo.leaves()
    own = leaf_of[rows]
    mine = next((i for i, g in enumerate(leaves) if g is allocated), -1)
    if mine >= 0:
        out[own == mine] = 1.0
    tied = out == out.max()
    if int(tied.sum()) > 1 and tasks:
        counts = np.bincount(leaf_of[placed_rows] + 1, minlength=len(leaves) + 1).astype(float)
        counts[0] = len(placed_rows)  # a node in no group: its own is the cluster, holding every pod
        out[tied] += counts[own[tied] + 1] / tasks
    return out


#: network-topology-aware's ``DefaultNormalPodEnable`` and ``DefaultNormalPodFading``
#: (``hypernode.binpack.normal-pod.enable`` / ``.fading``)
DEFAULT_NORMAL_POD_ENABLE = True
DEFAULT_NORMAL_POD_FADING = 0.8


class NormalPodBinpack:
    """network-topology-aware's node order for pods without a network topology
    (``batchNodeOrderFnForNormalPods`` with ``getPodHyperNodeBinPackingScore``,
    pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go), before its scaling:
    HyperNode-level bin-packing, so that such pods fill the HyperNodes already in use and leave
    whole HyperNodes free for jobs that need one.

    Each of ``tiers`` (default: every tier from the lowest to the cluster's, Volcano's
    ``hyperNodesTier`` from ``ssn.HyperNodesTiers``, whose top is ``ClusterTopHyperNode``) weighs
    ``fading ** (tier - 1)`` (``0 ** 0`` is 1: fading 0 leaves tier 1 alone). At a tier a node
    scores its own group's bin-packing score for the pod: the mean, weighted by ``weights``
    (``getBinPackWeight``), over the weighted resources the pod asks (at least ``MIN_RESOURCE``,
    Volcano's ``Resource.ResourceNames``) of (the group's used + the pod's request) / the group's
    allocatable; 0 when the request overflows any of them or none has a weight; 1 where the node is
    in no group of that tier (Volcano prefers nodes outside every HyperNode). The node's score is
    the weighted mean over the tiers, 0..1.

    A group's used is what its nodes hold plus what is pipelined on them, so this session's
    placements count as they are made (the plugin's allocate and deallocate event handlers keep
    its ``hyperNodeResourceCache`` so; a pod evicted this session still counts here until it is
    gone, where Volcano's ``Statement.Evict`` fires the deallocate handler); the sums follow the node table's write log, so a placement
    costs the groups of the rows it wrote, not a pass over every node. Caldera's label tiers
    (``topologyKeys``) are groups here as HyperNodes are."""

    def __init__(
        self,
        topo: Topology,
        table: NodeTable,
        weights: Mapping[str, float] = BINPACK_WEIGHTS,
        fading: float = DEFAULT_NORMAL_POD_FADING,
        tiers: Sequence[int] | None = None,
    ) -> None:
        if tiers is None:
            low = topo.tiers[0] if topo.tiers else topo.top_tier
            tiers = range(low, topo.top_tier + 1)
        self.layout = topo.tier_layout(tiers)
        with np.errstate(over="ignore", divide="ignore"):
            power = np.power(float(fading), np.asarray(self.layout.tiers, dtype=float) - 1.0)
        total = float(power.sum())
        #: each tier's share of a node's score; None when the weights are no numbers (a tier below
        #: 1 with fading 0, or a fading so large the powers overflow): then no node scores
        self.tier_weights: np.ndarray | None = power / total if total > 0 and np.isfinite(total) else None
        # (Volcano's task request has no pod count among its resource names)
        self.names = [name for name in weights if name != "pods"]
        self.factors = np.asarray([float(weights[name]) for name in self.names])
        self.table = table
        self._version = -1
        self._width = -1
        self._present = np.zeros(0, dtype=np.intp)
        self._cols = np.zeros(0, dtype=np.intp)
        #: per row: allocatable then used + pipelined of each weighted resource, as last read
        self._seen = np.zeros((0, 0))
        #: the same summed per group of the layout
        self._sums = np.zeros((0, 0))
        #: each cell's score for the last request asked, and (table version, request) it is for
        self._cells = np.zeros(0)
        self._cells_key: tuple[object, ...] = ()

    def _values(self, rows: np.ndarray) -> np.ndarray:
        table, k = self.table, len(self.names)
        at = np.ix_(rows, self._cols)
        out = np.zeros((len(rows), 2 * k))
        out[:, self._present] = table.allocatable[at]
        out[:, k + self._present] = table.used[at] + table.pipelined[at]
        return out

    def _sync(self) -> None:
        table = self.table
        behind = table.version - self._version
        width = len(table.dims)
        if behind == 0 and width == self._width:
            return
        log = table.log
        n = table.rows
        layout = self.layout
        if width == self._width and log is not None and behind == 1 and log:
            row = log[-1]  # (one write, the common case: a row holds no group twice)
            now = self._values(np.asarray([row], dtype=np.intp))[0]
            self._sums[layout.row_groups[layout.row_ptr[row] : layout.row_ptr[row + 1]]] += (
                now - self._seen[row]
            )
            self._seen[row] = now
        elif width == self._width and log is not None and 0 < behind <= min(len(log), max(8, n // 16)):
            changed = np.fromiter(sorted(set(log[len(log) - behind :])), dtype=np.intp)
            now = self._values(changed)
            delta = now - self._seen[changed]
            self._seen[changed] = now
            which, groups = layout.memberships(changed)
            if len(groups):
                np.add.at(self._sums, groups, delta[which])
        else:
            dims = table.dims
            self._present = np.asarray(
                [i for i, name in enumerate(self.names) if name in dims], dtype=np.intp
            )
            self._cols = np.asarray([dims[self.names[i]] for i in self._present], dtype=np.intp)
            self._seen = self._values(np.arange(n, dtype=np.intp))
            self._sums = (
                np.add.reduceat(self._seen[layout.rows], layout.starts, axis=0)
                if layout.count
                else np.zeros((0, 2 * len(self.names)))
            )
            self._width = width
        self._version = table.version

    def group_scores(self, task: TaskInfo) -> np.ndarray:
        """Every group's bin-packing score for the pod, then 1 (a node in no group of a tier)."""
        count, k = self.layout.count, len(self.names)
        out = np.ones(count + 1)
        request = np.asarray([task.resreq.get(name) for name in self.names])
        asked = request >= MIN_RESOURCE
        every = bool(asked.all())
        factors = self.factors if every else self.factors[asked]
        total = float(factors.sum())
        if not len(factors) or total <= 0:
            out[:count] = 0.0
            return out
        self._sync()
        alloc, used = self._sums[:, :k], self._sums[:, k:]
        if not every:
            alloc, used, request = alloc[:, asked], used[:, asked], request[asked]
        used = used + request
        ratio = np.divide(used, alloc, out=np.zeros_like(used), where=alloc > 0)
        scores = ratio @ factors
        scores /= total
        scores[((used > alloc + MIN_RESOURCE) | (alloc <= 0)).any(axis=1)] = 0.0
        out[:count] = scores
        return out

    def scores(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """Each of ``rows``' score for the pod, 0..1: each cell's (``TierLayout``) weighted mean
        over the tiers, read out per row."""
        weights = self.tier_weights
        if weights is None or not len(rows):
            return np.zeros(len(rows))
        request = task.resreq
        key = (self.table.version, tuple(request.get(name) for name in self.names))
        if key != self._cells_key:
            per_group = self.group_scores(task)
            self._cells = per_group[self.layout.cell_groups] @ weights
            self._cells_key = key
        return self._cells[self.layout.cell_of[rows]]


# ------------------------------------------------------------------------------------------------
# building
# ------------------------------------------------------------------------------------------------
def _label_groups(keys: Sequence[str], node_list: Sequence[NodeInfo]) -> list[NodeGroup]:
    groups: list[NodeGroup] = []
    for i, key in enumerate(keys, start=1):
        members: dict[str, list[int]] = {}
        for node in node_list:
            value = node.labels.get(key)
            if value is not None:
                members.setdefault(value, []).append(node.row)
        for value, rows in members.items():
            groups.append(NodeGroup(value, i, np.asarray(sorted(rows), dtype=np.intp), f"label:{key}"))
    return groups


def label_domains(node_list: Sequence[NodeInfo], keys: Sequence[str]) -> Topology:
    """A one-tier topology whose groups are the domains of the label ``keys``: one group per
    combination of their values (named ``v1/v2/...``), a node lacking any of them in none. What
    KEP-5732 (topology-aware workload scheduling) asks of a PodGroup's ``topology[].key``: all its
    pods inside one domain of the key."""
    members: dict[tuple[str, ...], list[int]] = {}
    for node in node_list:
        values = tuple(node.labels.get(k) for k in keys)
        if all(v is not None for v in values):
            members.setdefault(values, []).append(node.row)  # type: ignore[arg-type]
    source = f"label:{'+'.join(keys)}"
    groups = [
        NodeGroup("/".join(values), 1, np.asarray(sorted(rows), dtype=np.intp), source)
        for values, rows in members.items()
    ]
    return Topology(groups, len(node_list), {1: "+".join(keys)})


class _LabelIndex:
    """Node names by label value, per label key, built on first use of a key: a leaf HyperNode's
    ``labelMatch`` then costs the nodes it selects, not a pass over every node (625 leaves over
    5,000 nodes took seconds per session scanned one by one)."""

    def __init__(self, node_list: Sequence[NodeInfo]) -> None:
        self.node_list = node_list
        self.by_key: dict[str, dict[str, set[str]]] = {}

    def names(self, key: str, value: str) -> set[str]:
        values = self.by_key.get(key)
        if values is None:
            values = self.by_key[key] = {}
            for n in self.node_list:
                have = n.labels.get(key)
                if have is not None:
                    values.setdefault(have, set()).add(n.name)
        return values.get(value, set())

    def matching(self, match_labels: Mapping[str, str]) -> set[str]:
        """Names of the nodes carrying every one of ``match_labels``."""
        out: set[str] | None = None
        for key, value in sorted(match_labels.items(), key=lambda kv: len(self.names(*kv))):
            found = self.names(key, value)
            out = set(found) if out is None else out & found
            if not out:
                return set()
        return out or set()


def hypernode_members(
    selector: MemberSelector, node_list: Sequence[NodeInfo], index: _LabelIndex | None = None
) -> set[str]:
    """Node names a Node-type member selects (Volcano's semantics: an empty exact name, a bad
    pattern or an empty label match select nothing; a pattern matches anywhere in the name)."""
    names: set[str] = set()
    if selector.exact_match is not None and selector.exact_match.name:
        names.add(selector.exact_match.name)
    if selector.regex_match is not None and selector.regex_match.pattern:
        try:
            pattern = re.compile(selector.regex_match.pattern)
        except re.error:
            log.warning("hypernode member pattern %r does not compile", selector.regex_match.pattern)
            return set()
        names.update(n.name for n in node_list if pattern.search(n.name))
    if selector.label_match is not None and selector.label_match.match_labels:
        names.update((index or _LabelIndex(node_list)).matching(selector.label_match.match_labels))
    return names


def _hypernode_groups(
    hypernodes: Mapping[str, HyperNode], node_list: Sequence[NodeInfo], errors: list[str]
) -> list[NodeGroup]:
    row_of = {n.name: n.row for n in node_list}
    index = _LabelIndex(node_list)
    direct: dict[str, set[int]] = {}
    children: dict[str, list[str]] = {}
    parent_of: dict[str, str] = {}
    for name in sorted(hypernodes):
        hn = hypernodes[name]
        rows: set[int] = set()
        kids: list[str] = []
        for member in hn.spec.members:
            if member.type == MEMBER_HYPERNODE:
                child = member.selector.exact_match.name if member.selector.exact_match else ""
                if not child:
                    errors.append(f"hypernode {name}: a HyperNode member needs an exactMatch name")
                    continue
                if child in parent_of and parent_of[child] != name:
                    errors.append(
                        f"hypernode {child} has two parents ({parent_of[child]}, {name}); kept {parent_of[child]}"
                    )
                    continue
                if child not in hypernodes:
                    errors.append(f"hypernode {name}: member hypernode {child} does not exist")
                    continue
                if hypernodes[child].spec.tier >= hn.spec.tier:
                    errors.append(
                        f"hypernode {name} (tier {hn.spec.tier}) cannot hold {child} "
                        f"(tier {hypernodes[child].spec.tier}): a member must sit in a lower tier"
                    )
                    continue
                parent_of[child] = name
                kids.append(child)
            elif member.type == MEMBER_NODE:
                rows.update(
                    row_of[n] for n in hypernode_members(member.selector, node_list, index) if n in row_of
                )
            else:
                errors.append(f"hypernode {name}: unknown member type {member.type!r}")
        direct[name] = rows
        children[name] = kids

    # Strictly lower tiers for members make cycles impossible; resolve nested rows bottom-up.
    resolved: dict[str, set[int]] = {}
    for name in sorted(hypernodes, key=lambda n: (hypernodes[n].spec.tier, n)):
        rows = set(direct[name])
        for child in children[name]:
            rows |= resolved.get(child, set())
        resolved[name] = rows
    groups = {
        name: NodeGroup(
            name,
            hypernodes[name].spec.tier,
            np.asarray(sorted(resolved[name]), dtype=np.intp),
            "hypernode",
        )
        for name in hypernodes
    }
    for child, parent in parent_of.items():
        groups[child].parent = groups[parent]
    return list(groups.values())


def build_topology(
    node_list: Sequence[NodeInfo],
    keys: Sequence[str] = (),
    hypernodes: Mapping[str, HyperNode] | None = None,
) -> Topology:
    """The session's topology from label keys (tier i = i-th key) and HyperNode objects. Where both
    name a group of the same tier and name, the HyperNode wins."""
    errors: list[str] = []
    groups: list[NodeGroup] = []
    labels: dict[int, str] = {}
    names = {key: i for i, key in enumerate(keys, start=1)}
    if hypernodes:
        names.update(_tier_names(hypernodes, errors))
        hn_groups = _hypernode_groups(hypernodes, node_list, errors)
        groups.extend(hn_groups)
        for g in hn_groups:
            labels.setdefault(g.tier, f"hypernode tier {g.tier}")
    if keys:
        taken = {g.key for g in groups}
        for g in _label_groups(keys, node_list):
            if g.key in taken:
                errors.append(
                    f"label group {g.name!r} of tier {g.tier} is also a hypernode; kept the hypernode"
                )
                continue
            groups.append(g)
        for i, key in enumerate(keys, start=1):
            labels[i] = key if i not in labels else f"{labels[i]}, {key}"
    for message in errors:
        log.warning("topology: %s", message)
    rows = len(node_list)
    return Topology(groups, rows, labels, errors, names)


def _tier_names(hypernodes: Mapping[str, HyperNode], errors: list[str]) -> dict[str, int]:
    """Volcano's ``HyperNodesInfo.HyperNodeTierNameMap`` (pkg/scheduler/api/hyper_node_info.go):
    each ``spec.tierName`` with its HyperNodes' tier. Two tiers under one name are reported; the
    last HyperNode by name decides (Volcano: whichever its map walk meets last)."""
    out: dict[str, int] = {}
    for name in sorted(hypernodes):
        spec = hypernodes[name].spec
        if not spec.tier_name:
            continue
        before = out.get(spec.tier_name)
        if before is not None and before != spec.tier:
            errors.append(
                f"tier name {spec.tier_name!r} is given to tier {before} and tier {spec.tier} "
                f"(hypernode {name}); using tier {spec.tier}"
            )
        out[spec.tier_name] = spec.tier
    return out


class _CachedTopology:
    """A topology kept across cycles (``Session.node_memo``) with what it was built from."""

    __slots__ = ("hypernodes_revision", "keys", "topology")

    def __init__(self, keys: tuple[str, ...], hypernodes_revision: int, topology: Topology) -> None:
        self.keys = keys
        self.hypernodes_revision = hypernodes_revision
        self.topology = topology


def session_topology_of(ssn: Session, keys: Sequence[str] = ()) -> Topology:
    """The session's topology for the label ``keys`` and the snapshot's HyperNodes: the one the
    last cycle built when neither the node specs (``Session.node_memo``) nor the HyperNodes
    (``Snapshot.hypernodes_revision``) changed since, else built afresh. A topology is never
    changed once built, so sessions may share it."""
    snapshot = ssn.snapshot
    revision = snapshot.hypernodes_revision
    wanted = tuple(keys)
    cached = ssn.node_memo(_CachedTopology, lambda: None)
    if (
        isinstance(cached, _CachedTopology)
        and cached.keys == wanted
        and cached.hypernodes_revision == revision
        and (revision or not snapshot.hypernodes)
    ):
        return cached.topology
    topology = build_topology(ssn.node_list, wanted, snapshot.hypernodes)
    ssn.node_memo_replace(_CachedTopology, _CachedTopology(wanted, revision, topology))
    return topology
