"""The typed form of a scheduler conf: actions, tiers of plugin options, per-action configurations."""

from __future__ import annotations

from dataclasses import dataclass, field

from caldera.config.arguments import Arguments

#: Callback kind → the conf key that switches it for one plugin (Volcano's names).
SWITCHES: dict[str, str] = {
    "job_order": "enableJobOrder",
    "namespace_order": "enableNamespaceOrder",
    "hierarchy": "enableHierarchy",
    "job_ready": "enableJobReady",
    "job_pipelined": "enableJobPipelined",
    "task_order": "enableTaskOrder",
    "preemptable": "enablePreemptable",
    "reclaimable": "enableReclaimable",
    "queue_order": "enableQueueOrder",
    "victim_queue_order": "enableVictimQueueOrder",
    "predicate": "enablePredicate",
    "pre_predicate": "enablePredicate",
    "best_node": "enableBestNode",
    "node_order": "enableNodeOrder",
    "batch_node_order": "enableNodeOrder",
    "job_enqueueable": "enableJobEnqueued",
    "job_enqueued": "enableJobEnqueued",
    "victim_tasks": "enabledVictim",
    "job_starving": "enableJobStarving",
    "overused": "enableOverused",
    "allocatable": "enableAllocatable",
    "preemptive": "enablePreemptive",
    "target_job": "enableTargetJob",
    "reserved_nodes": "enableReservedNodes",
    "job_valid": "enableJobValid",
}
#: Every switch key a conf may carry.
SWITCH_KEYS = frozenset(SWITCHES.values()) | {"enableClusterOrder"}


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


@dataclass
class Tier:
    plugins: list[PluginOption]


@dataclass
class SchedulerConf:
    actions: list[str]
    tiers: list[Tier]
    configurations: dict[str, Arguments] = field(default_factory=dict)
    source: str = ""

    def plugin_names(self) -> list[str]:
        return [p.name for t in self.tiers for p in t.plugins]

    def plugin_option(self, name: str) -> PluginOption | None:
        for tier in self.tiers:
            for p in tier.plugins:
                if p.name == name:
                    return p
        return None
