"""network-topology-aware: publishes the session's network topology for the allocate action.

It builds the tree of node groups (label-key tiers from ``topologyKeys``, narrowest first, plus any
HyperNode objects) once per session and leaves it in ``ssn.report.topology`` with the conf-level
defaults. It never places pods itself: that needs the full predicate results of every plugin, which
only the allocate action has (see actions/topology.py and actions/subjobs.py). As Volcano's plugin
(pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go) it registers:

- the HyperNode gradient function (``AddHyperNodeGradientForJobFn`` / ``ForSubJobFn``;
  ``framework.topology.gradients``): which groups, tier by tier, a job or sub-group is tried in.
  ``enabledHyperNodeGradient: false`` leaves the search at the root alone: no tier bounds a job;
- the HyperNode order function (``AddHyperNodeOrderFn``; ``framework.topology.binpack_scores``):
  how the groups a sub-group fits in are ranked. ``enabledHyperNodeOrder: false`` leaves every
  group unscored: the first that fits, by name, is taken (for whole jobs too, instead of the
  ``scorePolicy`` fit).

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

from typing import TYPE_CHECKING, ClassVar

from caldera.framework.plugin import ArgumentError, Arguments, Plugin, unsupported
from caldera.framework.topology import (
    HARD,
    SOFT,
    TopologySettings,
    binpack_scores,
    gradients,
    session_topology_of,
)

if TYPE_CHECKING:
    from caldera.framework.session import Session

SCORE_POLICIES = ("binpack", "spread")


class NetworkTopologyAwarePlugin(Plugin):
    name: ClassVar[str] = "network-topology-aware"
    arguments_schema: ClassVar[dict[str, type]] = {
        "topologyKeys": list,
        "defaultMode": str,
        "defaultHighestTierAllowed": int,
        "scorePolicy": str,
        # Volcano's (pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go):
        # Caldera's topology score is set by scorePolicy, not by these
        "weight": unsupported(int, "the topology score's weight is not configurable; see scorePolicy"),
        "hypernode.binpack.cpu": unsupported(
            int, "hypernode binpacking weights are not implemented; see scorePolicy"
        ),
        "hypernode.binpack.memory": unsupported(
            int, "hypernode binpacking weights are not implemented; see scorePolicy"
        ),
        "hypernode.binpack.resources": unsupported(str, "hypernode binpacking weights are not implemented"),
        "hypernode.binpack.resources.*": unsupported(int, "hypernode binpacking weights are not implemented"),
        "hypernode.binpack.normal-pod.enable": unsupported(
            bool, "hypernode binpacking of normal pods is not implemented"
        ),
        "hypernode.binpack.normal-pod.fading": unsupported(
            float, "hypernode binpacking of normal pods is not implemented"
        ),
        "hypernode.gradient.evict.max-hypernodes": unsupported(
            int, "hypernode gradients are not implemented"
        ),
    }

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.settings = settings_from(arguments)

    def on_session_open(self, ssn: Session) -> None:
        s = self.settings
        topo = session_topology_of(ssn, s.keys)
        ssn.report.topology = (topo, s)
        ssn.add_hypernode_gradient_fn(self.name, gradients)
        table = ssn.table
        ssn.add_hypernode_order_fn(
            self.name, lambda sub, groups: binpack_scores(table, list(sub.tasks.values()), groups)
        )


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
