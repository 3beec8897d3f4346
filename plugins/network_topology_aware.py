"""network-topology-aware: publishes the session's network topology for the allocate action.

It builds the tree of node groups (label-key tiers from ``topologyKeys``, narrowest first, plus any
HyperNode objects) once per session and leaves it in ``ssn.report.topology`` with the conf-level
defaults. It never places pods itself: that needs the full predicate results of every plugin, which
only the allocate action has (see actions/topology.py and actions/subjobs.py). As Volcano's plugin
(pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go) it registers:

- the HyperNode gradient function (``AddHyperNodeGradientForJobFn`` / ``ForSubJobFn``;
  ``framework.topology.gradients``): which groups, tier by tier, a job or sub-group is tried in;
  for gangpreempt / gangreclaim (``PurposeEvict``) widest first, at most
  ``hypernode.gradient.evict.max-hypernodes`` groups (default 8).
  ``enabledHyperNodeGradient: false`` leaves the search at the root alone: no tier bounds a job;
- the HyperNode order function (``AddHyperNodeOrderFn``; ``framework.topology.binpack_scores``):
  how the groups a sub-group fits in are ranked, by bin-packing the resources weighted by
  ``hypernode.binpack.cpu`` / ``.memory`` / ``.resources`` (default cpu and memory, 1 each).
  ``enabledHyperNodeOrder: false`` leaves every group unscored: the first that fits, by name, is
  taken (for whole jobs too, instead of the ``scorePolicy`` fit);
- a node order for the pods of sub-groups with a ``networkTopology``
  (``batchNodeOrderFnForNetworkAwarePods``): toward the group the sub-group's placed pods share.
  ``weight`` (default 1) scales it and the HyperNode order.

Arguments:
- ``topologyKeys``: node label keys, one per tier from narrowest to widest, e.g.
  ``[example.com/leaf, example.com/spine, volcano.sh/ib-cluster]``;
- ``defaultMode``: ``hard`` or ``soft``, applied to every gang (PodGroup with minMember above 1)
  that has no ``networkTopology`` of its own; unset: only jobs that ask are topology-bound;
- ``defaultHighestTierAllowed``: the highest tier such jobs may span (default 1); also used for a
  job's ``networkTopology`` without ``highestTierAllowed``;
- ``scorePolicy``: ``binpack`` (default: the tightest-fitting group, keeping large groups free for
  large jobs) or ``spread`` (the group with the most room left).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from caldera.framework.model import ALLOCATED_STATUSES, TaskInfo, TaskStatus
from caldera.framework.plugin import ArgumentError, Arguments, Plugin, unsupported
from caldera.framework.subjobs import SubJob, sub_jobs
from caldera.framework.topology import (
    DEFAULT_EVICT_MAX_GROUPS,
    HARD,
    MAX_NODE_SCORE,
    SOFT,
    NodeGroup,
    Topology,
    TopologySettings,
    binpack_scores,
    gradients,
    network_aware_scores,
    session_topology_of,
)

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins")

SCORE_POLICIES = ("binpack", "spread")
DEFAULT_WEIGHT = 1
#: where a sub-group's pods count as placed for its node order (as ``Topology.job_rows``)
PLACED = ALLOCATED_STATUSES | {TaskStatus.PIPELINED}


class NetworkTopologyAwarePlugin(Plugin):
    name: ClassVar[str] = "network-topology-aware"
    arguments_schema: ClassVar[dict[str, type]] = {
        "topologyKeys": list,
        "defaultMode": str,
        "defaultHighestTierAllowed": int,
        "scorePolicy": str,
        # Volcano's (pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go,
        # getPriorityWeight): the scale of its scores and the weights of its HyperNode bin-packing
        "weight": int,
        "hypernode.binpack.cpu": int,
        "hypernode.binpack.memory": int,
        "hypernode.binpack.resources": str,
        "hypernode.binpack.resources.*": int,
        "hypernode.binpack.normal-pod.enable": unsupported(
            bool,
            "hypernode binpacking of pods without a network topology is not implemented (set it false)",
            accepted=False,
        ),
        "hypernode.binpack.normal-pod.fading": unsupported(
            float, "hypernode binpacking of normal pods is not implemented"
        ),
        "hypernode.gradient.evict.max-hypernodes": int,
    }

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.settings = settings_from(arguments)
        self.weight, self.weights = weights_from(arguments)
        # Volcano's getMaxHyperNodesForEviction: not positive means the default
        cap = arguments.int("hypernode.gradient.evict.max-hypernodes", DEFAULT_EVICT_MAX_GROUPS)
        self.evict_cap = cap if cap > 0 else DEFAULT_EVICT_MAX_GROUPS

    def on_session_open(self, ssn: Session) -> None:
        s = self.settings
        topo = session_topology_of(ssn, s.keys)
        ssn.report.topology = (topo, s)
        cap = self.evict_cap
        ssn.add_hypernode_gradient_fn(self.name, lambda req: gradients(req, cap))
        table = ssn.table
        weights, weight = self.weights, self.weight

        def order(sub: SubJob, groups: list[NodeGroup]) -> dict[str, float]:
            return binpack_scores(table, list(sub.tasks.values()), groups, weights, weight)

        ssn.add_hypernode_order_fn(self.name, order)
        if weight and _with_sub_groups(ssn):
            aware = _NetworkAware(ssn, topo, weight)
            ssn.add_template_qualifier(self.name, aware.qualifier)
            ssn.add_bulk_node_order_fn(self.name, aware.score, part="network-aware", applies=aware.applies)


def _with_sub_groups(ssn: Session) -> bool:
    """Whether a job with pending pods has sub-group policies (only they are scored per node)."""
    candidates = ssn.pending_candidates()
    jobs = ssn.jobs
    uids = candidates if candidates is not None else jobs
    return any((job := jobs.get(uid)) is not None and job.sub_groups is not None for uid in uids)


class _NetworkAware:
    """network-topology-aware's node order for the pods of a sub-group with a ``networkTopology``
    (``batchNodeOrderFnForNetworkAwarePods``, ``framework.topology.network_aware_scores``): nodes
    near the HyperNode the sub-group's placed pods already share score higher, so a sub-group
    whose group spans several HyperNodes (a soft one, or a hard one above the lowest tier) keeps
    together. Volcano scores the job's default sub-group too; here only jobs with sub-group
    policies are scored this way (a whole job is placed by actions/topology.py's group choice)."""

    def __init__(self, ssn: Session, topo: Topology, weight: float) -> None:
        self.ssn = ssn
        self.topo = topo
        self.scale = MAX_NODE_SCORE * weight

    def sub_job(self, task: TaskInfo) -> SubJob | None:
        job = self.ssn.jobs.get(task.job)
        if job is None or job.sub_groups is None:
            return None
        sub = sub_jobs(self.ssn, job).of(task)
        return sub if sub is not None and sub.network_topology is not None else None

    def applies(self, task: TaskInfo) -> bool:
        return self.sub_job(task) is not None

    def qualifier(self, task: TaskInfo) -> bytes:
        """Pods of one template in and out of such sub-groups are scored differently."""
        return b"1" if self.sub_job(task) is not None else b""

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        sub = self.sub_job(task)
        if sub is None:
            return np.zeros(len(rows))
        nodes = self.ssn.nodes
        placed = np.asarray(
            sorted(
                nodes[t.node_name].row
                for t in sub.tasks.values()
                if t.status in PLACED and t.node_name in nodes
            ),
            dtype=np.intp,
        )
        found = self.topo.containing(placed) if len(placed) else []
        allocated = found[0] if found else None
        return self.scale * network_aware_scores(self.topo, rows, allocated, placed, len(sub.tasks))


def settings_from(arguments: Arguments) -> TopologySettings:
    """Check the arguments' values (their types are checked when the conf is parsed)."""
    owner = f"plugin {NetworkTopologyAwarePlugin.name!r}"
    keys = arguments.list("topologyKeys", [])
    if not all(isinstance(k, str) and k for k in keys):
        raise ArgumentError(f"argument 'topologyKeys' of {owner} must be a list of label keys, got {keys!r}")
    mode = arguments.str("defaultMode", "").strip().lower()
    if mode not in ("", HARD, SOFT):
        raise ArgumentError(f"argument 'defaultMode' of {owner} must be hard or soft, got {mode!r}")
    highest = arguments.int("defaultHighestTierAllowed", 1)
    if highest < 1:
        raise ArgumentError(
            f"argument 'defaultHighestTierAllowed' of {owner} must be at least 1, got {highest}"
        )
    policy = arguments.str("scorePolicy", "binpack").strip().lower()
    if policy not in SCORE_POLICIES:
        raise ArgumentError(f"argument 'scorePolicy' of {owner} must be binpack or spread, got {policy!r}")
    return TopologySettings(tuple(keys), mode, highest, policy)


def weights_from(arguments: Arguments) -> tuple[int, dict[str, float]]:
    """Volcano's ``getPriorityWeight``: ``weight`` (default 1) scales the plugin's scores;
    ``hypernode.binpack.cpu`` and ``.memory`` (default 1) and each resource named in the
    comma-separated ``hypernode.binpack.resources`` (its weight ``hypernode.binpack.resources.NAME``,
    default 1) are what HyperNodes are bin-packed by. A negative value is taken as the default, as
    Volcano does (logged)."""
    owner = f"plugin {NetworkTopologyAwarePlugin.name!r}"

    def weight_of(key: str) -> int:
        value = arguments.int(key, DEFAULT_WEIGHT)
        if value < 0:
            log.warning("%s: %s is %d, below 0; using %d", owner, key, value, DEFAULT_WEIGHT)
            return DEFAULT_WEIGHT
        return value

    weights: dict[str, float] = {
        "cpu": weight_of("hypernode.binpack.cpu"),
        "memory": weight_of("hypernode.binpack.memory"),
    }
    for name in arguments.str("hypernode.binpack.resources", "").split(","):
        name = name.strip()
        if name:
            weights[name] = weight_of(f"hypernode.binpack.resources.{name}")
    return weight_of("weight"), weights
