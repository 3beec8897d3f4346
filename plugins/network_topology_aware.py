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
  (``batchNodeOrderFnForNetworkAwarePods``): toward the group the sub-group's placed pods share;
- a node order for the pods without one (``batchNodeOrderFnForNormalPods``;
  ``framework.topology.NormalPodBinpack``): HyperNode-level bin-packing, each tier's group scored by
  how full it would be, tier ``t`` weighing ``hypernode.binpack.normal-pod.fading ** (t - 1)``
  (default 0.8), so that such pods fill the HyperNodes in use and leave whole ones free. On by
  default, as in Volcano (``hypernode.binpack.normal-pod.enable``, default true); with no tier but
  the cluster's it would score every node the same, and is not registered.
  ``weight`` (default 1) scales both node orders and the HyperNode order.

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
import math
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from caldera.framework.model import ALLOCATED_STATUSES, TaskInfo, TaskStatus
from caldera.framework.plugin import ArgumentError, Arguments, Plugin
from caldera.framework.subjobs import SubJob, sub_jobs
from caldera.framework.topology import (
    DEFAULT_EVICT_MAX_GROUPS,
    DEFAULT_NORMAL_POD_ENABLE,
    DEFAULT_NORMAL_POD_FADING,
    HARD,
    MAX_NODE_SCORE,
    SOFT,
    NodeGroup,
    NormalPodBinpack,
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
        # getNormalPodConfig: HyperNode bin-packing of pods without a network topology
        "hypernode.binpack.normal-pod.enable": bool,
        "hypernode.binpack.normal-pod.fading": float,
        "hypernode.gradient.evict.max-hypernodes": int,
    }

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.settings = settings_from(arguments)
        self.weight, self.weights = weights_from(arguments)
        # Volcano's getMaxHyperNodesForEviction: not positive means the default
        cap = arguments.int("hypernode.gradient.evict.max-hypernodes", DEFAULT_EVICT_MAX_GROUPS)
        self.evict_cap = cap if cap > 0 else DEFAULT_EVICT_MAX_GROUPS
        self.normal_pods, self.fading = normal_pod_config(arguments)

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
        if not weight:
            return
        kinds = _PodKinds(ssn, s)
        scored = False
        if _with_sub_groups(ssn):
            aware = _NetworkAware(ssn, topo, weight, kinds)
            ssn.add_bulk_node_order_fn(self.name, aware.score, part="network-aware", applies=kinds.aware)
            scored = True
        # With no tier but the cluster's every node would score the same: nothing to register.
        if self.normal_pods and not topo.empty:
            normal = NormalPodBinpack(topo, table, weights, self.fading)
            if normal.tier_weights is None:
                log.warning(
                    "plugin %s: hypernode.binpack.normal-pod.fading %g weighs tiers %s with no finite "
                    "total; pods without a network topology are not bin-packed",
                    self.name,
                    self.fading,
                    list(normal.layout.tiers),
                )
            else:
                scale = MAX_NODE_SCORE * weight

                def normal_score(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
                    return scale * normal.scores(task, rows)

                ssn.add_bulk_node_order_fn(self.name, normal_score, part="normal-pod", applies=kinds.normal)
                scored = True
        if scored:
            ssn.add_template_qualifier(self.name, kinds.qualifier)


def _with_sub_groups(ssn: Session) -> bool:
    """Whether a job with pending pods has sub-group policies (only they are scored per node)."""
    candidates = ssn.pending_candidates()
    jobs = ssn.jobs
    uids = candidates if candidates is not None else jobs
    return any((job := jobs.get(uid)) is not None and job.sub_groups is not None for uid in uids)


class _PodKinds:
    """Which of the plugin's node orders a pod gets (Volcano's ``batchNodeOrderFn``, by the pod's
    sub-job: ``job.TaskToSubJob``): the pods of a sub-group with a ``networkTopology`` the
    network-aware one (``_NetworkAware``, jobs with sub-group policies only); the pods of a
    sub-group without one, or of a job without one (its default sub-group), HyperNode bin-packing
    (``batchNodeOrderFnForNormalPods``). Caldera's own requirements count as a job's
    ``networkTopology``: a Kubernetes PodGroup's topology keys and the conf's ``defaultMode`` for
    gangs (such a job is placed in one group by actions/topology.py, as one with a
    ``networkTopology``). Stable for the session, as ``applies`` must be."""

    def __init__(self, ssn: Session, settings: TopologySettings) -> None:
        self.ssn = ssn
        self.default_mode = settings.default_mode

    def sub_job(self, task: TaskInfo) -> SubJob | None:
        """The task's sub-group, for a job with sub-group policies."""
        job = self.ssn.jobs.get(task.job)
        if job is None or job.sub_groups is None:
            return None
        return sub_jobs(self.ssn, job).of(task)

    def aware(self, task: TaskInfo) -> bool:
        sub = self.sub_job(task)
        return sub is not None and sub.network_topology is not None

    def normal(self, task: TaskInfo) -> bool:
        job = self.ssn.jobs.get(task.job)
        if job is None:  # (Volcano: no scores for a task whose job is gone)
            return False
        sub = self.sub_job(task)
        if sub is not None and sub.policy:
            return sub.network_topology is None
        return not (
            job.topology_keys
            or job.network_topology is not None
            or (self.default_mode and job.min_available > 1)
        )

    def qualifier(self, task: TaskInfo) -> bytes:
        """Pods of one template scored by different parts (or none) are not interchangeable."""
        return b"a" if self.aware(task) else b"n" if self.normal(task) else b""


class _NetworkAware:
    """network-topology-aware's node order for the pods of a sub-group with a ``networkTopology``
    (``batchNodeOrderFnForNetworkAwarePods``, ``framework.topology.network_aware_scores``): nodes
    near the HyperNode the sub-group's placed pods already share score higher, so a sub-group
    whose group spans several HyperNodes (a soft one, or a hard one above the lowest tier) keeps
    together. Volcano scores the job's default sub-group too; here only jobs with sub-group
    policies are scored this way (a whole job is placed by actions/topology.py's group choice)."""

    def __init__(self, ssn: Session, topo: Topology, weight: float, kinds: _PodKinds) -> None:
        self.ssn = ssn
        self.topo = topo
        self.scale = MAX_NODE_SCORE * weight
        self.kinds = kinds

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        sub = self.kinds.sub_job(task)
        if sub is None or sub.network_topology is None:
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


def normal_pod_config(arguments: Arguments) -> tuple[bool, float]:
    """Volcano's ``getNormalPodConfig``: ``hypernode.binpack.normal-pod.enable`` (default true) and
    ``.fading`` (default 0.8; 0 counts tier 1 alone). A negative fading is taken as the default, as
    Volcano does; so is one that is no finite number (logged)."""
    enable = arguments.bool("hypernode.binpack.normal-pod.enable", DEFAULT_NORMAL_POD_ENABLE)
    fading = arguments.float("hypernode.binpack.normal-pod.fading", DEFAULT_NORMAL_POD_FADING)
    if not math.isfinite(fading) or fading < 0:
        log.warning(
            "plugin %r: hypernode.binpack.normal-pod.fading is %s; using %g",
            NetworkTopologyAwarePlugin.name,
            fading,
            DEFAULT_NORMAL_POD_FADING,
        )
        fading = DEFAULT_NORMAL_POD_FADING
    return enable, fading


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
