"""The typed form of a scheduler conf: actions, tiers of plugin options, per-action configurations."""

from __future__ import annotations

from dataclasses import dataclass, field

from caldera.config.arguments import Arguments
from caldera.config.metrics import MetricsConf

#: Callback kind → the conf key that switches it for one plugin (Volcano's names, PluginOption in
#: pkg/scheduler/conf/scheduler_conf.go).
SWITCHES: dict[str, str] = {
    "job_order": "enableJobOrder",
    "hierarchy": "enableHierarchy",
    "job_ready": "enableJobReady",
    "job_pipelined": "enableJobPipelined",
    "task_order": "enableTaskOrder",
    "preemptable": "enablePreemptable",
    "reclaimable": "enableReclaimable",
    "queue_order": "enableQueueOrder",
    "predicate": "enablePredicate",
    "pre_predicate": "enablePredicate",
    "best_node": "enableBestNode",
    "node_order": "enableNodeOrder",
    "batch_node_order": "enableNodeOrder",
    "job_enqueueable": "enableJobEnqueued",
    "job_enqueued": "enableJobEnqueued",
    "job_starving": "enableJobStarving",
    "overused": "enabledOverused",
    "allocatable": "enabledAllocatable",
    "preemptive": "enablePreemptive",
    "job_valid": "enableJobValid",
    "victim_tasks": "enabledVictim",
    "victim_guard": "enabledVictim",
    "sub_job_ready": "enabledSubJobReady",
    "sub_job_pipelined": "enabledSubJobPipelined",
    "sub_job_order": "enabledSubJobOrder",
    "hypernode_order": "enabledHyperNodeOrder",
    "hypernode_gradient": "enabledHyperNodeGradient",
}
#: Earlier Caldera spellings of Volcano's ``enabledOverused``/``enabledAllocatable``, still read.
SWITCH_ALIASES: dict[str, str] = {
    "enableOverused": "enabledOverused",
    "enableAllocatable": "enabledAllocatable",
}
#: Switches Volcano's PluginOption carries (or once carried) whose callbacks no action of Volcano's
#: calls: at ed72c7c8 no file of pkg/scheduler/actions calls ``Session.TargetJob``, ``ReservedNodes``
#: or ``ClusterOrderFn`` (pkg/scheduler/framework/session_plugins.go), and the namespace order is gone
#: from the framework. They switch nothing there either: a conf carrying them loads, with one warning
#: line at load that names them.
NO_EFFECT_SWITCHES: dict[str, str] = {
    "enableNamespaceOrder": "no action orders namespaces",
    "enableTargetJob": "no action asks for a target job",
    "enableReservedNodes": "no action reserves nodes",
    "enabledClusterOrder": "no action orders clusters",
    "enableClusterOrder": "no action orders clusters",
}
#: Plugins for which ``enableHierarchy: true`` means something: capacity (hierarchical queues),
#: drf (Volcano's hdrf) and nodegroup (a queue inherits its ancestor's node-group affinity); the
#: switch is handed to them as an argument.
HIERARCHY_PLUGINS = frozenset({"capacity", "drf", "nodegroup"})
#: Every switch key a conf may carry.
SWITCH_KEYS = frozenset(SWITCHES.values()) | frozenset(SWITCH_ALIASES)


@dataclass
class PluginOption:
    name: str
    arguments: Arguments
    switches: dict[str, bool] = field(default_factory=dict)

    def enabled(self, kind: str) -> bool:
        key = SWITCHES.get(kind)
        if key is None:
            return True
        return self.switches.get(key, True)

    def __post_init__(self) -> None:
        for old, new in SWITCH_ALIASES.items():
            if old in self.switches:
                self.switches.setdefault(new, self.switches.pop(old))


@dataclass
class Tier:
    plugins: list[PluginOption]


@dataclass
class SchedulerConf:
    actions: list[str]
    tiers: list[Tier]
    configurations: dict[str, Arguments] = field(default_factory=dict)
    source: str = ""
    #: the conf's ``metrics:`` section (Volcano's ``MetricsConfiguration``, a string map), checked by
    #: ``config.metrics.check_metrics``; empty: no metrics source, nothing polled
    metrics: MetricsConf | None = None

    def plugin_names(self) -> list[str]:
        return [p.name for t in self.tiers for p in t.plugins]

    def plugin_option(self, name: str) -> PluginOption | None:
        for tier in self.tiers:
            for p in tier.plugins:
                if p.name == name:
                    return p
        return None
