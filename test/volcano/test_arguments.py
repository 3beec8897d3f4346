"""Issue 14 items 8 and 9: every argument a plugin or action declares is implemented (changing it
changes what the scheduler does) or refused with a message naming it; unknown arguments and
switches that switch nothing are refused; the extension points no action called are gone."""

import numpy as np
import pytest

from caldera.config.arguments import UnsupportedArgument
from caldera.config.conf import ConfError, parse_conf
from caldera.framework.session import Session, open_session
from caldera.hack.scenario import cluster, node, pod, podgroup, queue
from caldera.plugins.extender import VERBS as EXTENDER_VERBS
from caldera.scheduler.registry import builtin_registry

REGISTRY = builtin_registry()

CLUSTER = dict(
    nodes=[
        node("n1", cpu="8", memory="16Gi", labels={"zone": "a"}, extra={"nvidia.com/gpu": "4"}),
        node("n2", cpu="8", memory="32Gi", labels={"zone": "b"}),
        node(
            "n3",
            cpu="8",
            memory="32Gi",
            labels={"zone": "b"},
            taints=[{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}],
        ),
        node(
            "n4",
            cpu="8",
            memory="32Gi",
            labels={"zone": "c"},
            taints=[{"key": "hard", "effect": "NoSchedule"}],
        ),
    ],
    queues=[queue("default")],
    podgroups=[
        podgroup("run", phase="Running"),
        podgroup("probe"),
        podgroup("big", min_resources={"cpu": "30"}),
    ],
    pods=[
        pod(
            "run-0", cpu="6", memory="2Gi", group="run", node_name="n1", phase="Running", labels={"app": "db"}
        ),
        pod("run-1", cpu="1", memory="8Gi", group="run", node_name="n2", phase="Running", host_ports=[80]),
        pod(
            "probe-0",
            cpu="1",
            memory="1Gi",
            group="probe",
            extra={"nvidia.com/gpu": "1"},
            host_ports=[80],
            node_selector={"zone": "a"},
            affinity={
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 10,
                            "preference": {
                                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]
                            },
                        }
                    ]
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": "db"}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                },
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 50,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app": "db"}},
                                "topologyKey": "zone",
                            },
                        }
                    ]
                },
            },
        ),
        pod("free-0", cpu="1", memory="1Gi", group="probe"),
        pod("port-0", cpu="1", memory="1Gi", group="probe", host_ports=[80]),
        pod("big-0", cpu="30", group="big"),
    ],
)


def conf_text(plugin: str, arguments: dict | None) -> str:
    args = ""
    if arguments:
        args = "\n    arguments:\n" + "\n".join(f"      {k}: {v!r}" for k, v in arguments.items())
    return f"""
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: {plugin}{args}
"""


def session(plugin: str, arguments: dict | None = None) -> Session:
    conf = parse_conf(conf_text(plugin, arguments), REGISTRY)
    return open_session(cluster(**CLUSTER), conf.tiers, REGISTRY.plugins, conf.configurations)


def task(ssn: Session, name: str):
    return next(t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == name)


def scores(ssn: Session, name: str = "free-0") -> tuple:
    return tuple(np.round(ssn.node_scores(task(ssn, name), ssn.all_rows), 6))


def feasible(ssn: Session, name: str = "probe-0") -> tuple:
    return tuple(int(r) for r in ssn.feasible_rows(task(ssn, name), resources=False))


def enqueue_big(ssn: Session) -> bool:
    return ssn.job_enqueueable(ssn.jobs["default/big"])


# (plugin, argument, value that differs from the default, what it changes)
IMPLEMENTED = [
    ("nodeorder", "leastrequested.weight", 7, scores),
    ("nodeorder", "mostrequested.weight", 3, scores),
    ("nodeorder", "balancedresource.weight", 5, scores),
    ("nodeorder", "nodeaffinity.weight", 0, lambda s: scores(s, "probe-0")),
    ("nodeorder", "podaffinity.weight", 0, lambda s: scores(s, "probe-0")),
    ("nodeorder", "tainttoleration.weight", 0, scores),
    ("binpack", "binpack.weight", 4, scores),
    ("binpack", "binpack.cpu", 5, scores),
    ("binpack", "binpack.memory", 0, scores),
    ("predicates", "predicate.NodeAffinityEnable", False, feasible),
    ("predicates", "predicate.NodePortsEnable", False, lambda s: feasible(s, "port-0")),
    ("predicates", "predicate.TaintTolerationEnable", False, lambda s: feasible(s, "free-0")),
    ("predicates", "predicate.PodAffinityEnable", False, feasible),
    ("overcommit", "overcommit-factor", 10.0, enqueue_big),
]
# Arguments whose effect needs a scenario of its own, in the plugin's test module.
COVERED_ELSEWHERE = {
    ("binpack", "binpack.resources"): "test/plugins/test_binpack.py",
    ("binpack", "binpack.resources.*"): "test/plugins/test_binpack.py",
    ("sla", "sla-waiting-time"): "test/plugins/test_sla.py",
    ("predicates", "predicate.DynamicResourceAllocationEnable"): "test/plugins/test_dra.py",
    ("predicates", "dynamicresources.filterTimeoutSeconds"): "test/plugins/test_dra.py",
    ("capacity", "capacity.DynamicResourceAllocationEnable"): "test/plugins/test_dra_quota.py",
    ("capacity", "capacity.DRAConsumableCapacityEnable"): "test/plugins/test_dra_quota.py",
    ("numa-aware", "weight"): "test/plugins/test_numaaware.py",
    ("rescheduling", "interval"): "test/plugins/test_rescheduling.py",
    ("rescheduling", "metricsPeriod"): "test/plugins/test_rescheduling.py",
    ("rescheduling", "strategies"): "test/plugins/test_rescheduling.py",
    ("deviceshare", "deviceshare.VGPUEnable"): "test/plugins/test_deviceshare.py",
    ("deviceshare", "deviceshare.SchedulePolicy"): "test/plugins/test_deviceshare.py",
    ("deviceshare", "deviceshare.ScheduleWeight"): "test/plugins/test_deviceshare.py",
    ("capacity", "enableHierarchy"): "test/volcano/test_capacity_hierarchy_test.py",
    ("drf", "enableHierarchy"): "test/plugins/test_drf.py",
    ("network-topology-aware", "topologyKeys"): "test/actions/test_topology_allocate.py",
    ("network-topology-aware", "defaultMode"): "test/actions/test_topology_allocate.py",
    ("network-topology-aware", "defaultHighestTierAllowed"): "test/actions/test_topology_allocate.py",
    ("network-topology-aware", "scorePolicy"): "test/actions/test_topology_allocate.py",
    ("network-topology-aware", "weight"): "test/volcano/test_network_topology_aware_test.py",
    ("network-topology-aware", "hypernode.binpack.cpu"): "test/volcano/test_network_topology_aware_test.py",
    # getNormalPodConfig (TestNew) and the scores they switch (TestBatchNodeOrderFn)
    (
        "network-topology-aware",
        "hypernode.binpack.normal-pod.enable",
    ): "test/volcano/test_network_topology_aware_test.py",
    (
        "network-topology-aware",
        "hypernode.binpack.normal-pod.fading",
    ): "test/volcano/test_network_topology_aware_test.py",
    (
        "network-topology-aware",
        "hypernode.binpack.memory",
    ): "test/volcano/test_network_topology_aware_test.py",
    (
        "network-topology-aware",
        "hypernode.binpack.resources",
    ): "test/volcano/test_network_topology_aware_test.py",
    (
        "network-topology-aware",
        "hypernode.binpack.resources.*",
    ): "test/volcano/test_network_topology_aware_test.py",
    # the cap of the eviction gradients (reverse_and_cap; TestReverseAndCapEvictionGradients)
    (
        "network-topology-aware",
        "hypernode.gradient.evict.max-hypernodes",
    ): "test/volcano/test_network_topology_aware_test.py",
    ("nodegroup", "strict"): "test/volcano/test_nodegroup_test.py",
    ("nodegroup", "enablePreferredOrder"): "test/volcano/test_nodegroup_test.py",
    ("nodegroup", "enableHierarchy"): "test/volcano/test_nodegroup_test.py",
    ("resource-strategy-fit", "resourceStrategyFitWeight"): "test/volcano/test_resource_strategy_fit_test.py",
    ("resource-strategy-fit", "resources"): "test/volcano/test_resource_strategy_fit_test.py",
    ("resource-strategy-fit", "sra"): "test/volcano/test_resource_strategy_fit_test.py",
    ("resource-strategy-fit", "proportional"): "test/volcano/test_resource_strategy_fit_test.py",
    ("task-topology", "task-topology.weight"): "test/plugins/test_task_topology.py",
    **{
        ("usage", name): "test/volcano/test_usage_test.py"
        for name in ("usage.weight", "cpu.weight", "memory.weight", "thresholds", "estimator")
    },
    **{
        ("extender", f"extender.{name}"): "test/plugins/test_extender.py"
        for name in (
            "urlPrefix",
            "httpTimeout",
            "ignorable",
            "managedResources",
            *(f"{verb}Verb" for verb in EXTENDER_VERBS),
        )
    },
}
COVERED_ELSEWHERE.update(
    {
        ("nodeorder", "podtopologyspread.weight"): "test/volcano/test_predicate_switches.py",
        ("predicates", "predicate.PodTopologySpreadEnable"): "test/volcano/test_predicate_switches.py",
        ("predicates", "predicate.VolumeZoneEnable"): "test/volcano/test_predicate_switches.py",
        ("predicates", "predicate.VolumeBindingEnable"): "test/volcano/test_predicate_switches.py",
        ("predicates", "predicate.NodeVolumeLimitsEnable"): "test/volcano/test_predicate_switches.py",
        ("gangpreempt", "allowWholeBundle"): "test/volcano/test_gang_actions.py",
        ("gangreclaim", "allowWholeBundle"): "test/volcano/test_gangreclaim_test.py",
        # read and defaulted as Volcano's parseArguments (ported TestParseArguments*); it caps
        # the domains of a job with a network-topology requirement (gang_eviction.candidate_domains)
        ("gangpreempt", "maxDomains"): "test/volcano/test_gangpreempt_test.py",
        ("gangreclaim", "maxDomains"): "test/volcano/test_gangreclaim_test.py",
        ("tdm", "tdm.revocable-zone.*"): "test/volcano/test_tdm_test.py",
        ("tdm", "tdm.evict.period"): "test/volcano/test_tdm_test.py",
    }
)


@pytest.mark.parametrize(
    ("plugin", "key", "value", "observe"), IMPLEMENTED, ids=[f"{p}:{k}" for p, k, _, _ in IMPLEMENTED]
)
def test_each_implemented_argument_changes_behaviour(plugin, key, value, observe):
    assert observe(session(plugin)) != observe(session(plugin, {key: value}))


def test_every_declared_argument_is_implemented_covered_or_refused():
    """Walks every plugin's and action's schema: nothing is left without a behaviour test or a refusal."""
    here = {(p, k) for p, k, _, _ in IMPLEMENTED}
    for owner, cls in list(REGISTRY.plugins.items()) + list(REGISTRY.actions.items()):
        for key, kind in cls.arguments_schema.items():
            if isinstance(kind, type) and issubclass(kind, UnsupportedArgument):
                continue
            assert (owner, key) in here | set(COVERED_ELSEWHERE), f"{owner}: {key}"
    for path in set(COVERED_ELSEWHERE.values()):
        with open(path) as f:
            assert f.read().strip()


def unsupported_entries():
    out = []
    for owner, cls in list(REGISTRY.plugins.items()) + list(REGISTRY.actions.items()):
        for key, kind in cls.arguments_schema.items():
            if isinstance(kind, type) and issubclass(kind, UnsupportedArgument):
                out.append((owner, owner in REGISTRY.actions, key, kind))
    return out


@pytest.mark.parametrize(
    ("owner", "is_action", "key", "spec"), unsupported_entries(), ids=lambda v: str(v)[:40]
)
def test_each_unsupported_argument_is_refused_with_its_name(owner, is_action, key, spec):
    key = key.replace("*", "nvidia.com/gpu")
    bad = {
        bool: not spec.accepted if isinstance(spec.accepted, bool) else True,
        int: 3,
        float: 0.5,
        str: "x",
        list: [{"utilization": 0, "score": 10}],
    }[spec.kind]
    if is_action:
        text = f'actions: "{owner}"\ntiers: []\nconfigurations:\n- name: {owner}\n  arguments: {{{key!r}: {bad!r}}}\n'
    else:
        text = conf_text(owner, {key: bad})
    with pytest.raises(ConfError, match=f"argument '{key}' of .*not supported by Caldera"):
        parse_conf(text, REGISTRY)
    if isinstance(spec.accepted, (bool, int, str)) and not isinstance(spec.accepted, type):
        # the value that asks for what Caldera does anyway is accepted
        accepted_text = text.replace(repr(bad), repr(spec.accepted))
        parse_conf(accepted_text, REGISTRY)


@pytest.mark.parametrize("owner", ["priority", "proportion", "nodeorder", "predicates"])
def test_unknown_plugin_arguments_are_errors_naming_them(owner):
    with pytest.raises(ConfError, match=f"plugin '{owner}' has no argument 'nodeorder.typo'"):
        parse_conf(conf_text(owner, {"nodeorder.typo": 1}), REGISTRY)


def test_unknown_action_arguments_are_errors_naming_them():
    text = 'actions: "enqueue, allocate"\ntiers: []\nconfigurations:\n- name: enqueue\n  arguments: {overcommit-factor: 2}\n'
    with pytest.raises(ConfError, match="action 'enqueue' has no argument 'overcommit-factor'"):
        parse_conf(text, REGISTRY)


NO_EFFECT = ["enableNamespaceOrder", "enableTargetJob", "enableReservedNodes", "enabledClusterOrder"]


def test_switches_no_volcano_action_calls_load_with_one_warning_naming_them(caplog):
    """A Volcano conf carrying them must load: Volcano's actions never call TargetJob,
    ReservedNodes or ClusterOrderFn (session_plugins.go), so they change nothing there either."""
    lines = "".join(f"    {switch}: true\n" for switch in NO_EFFECT)
    text = f'actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n{lines}  - name: gang\n    enableTargetJob: false\n'
    with caplog.at_level("WARNING", logger="caldera.config"):
        conf = parse_conf(text, REGISTRY)
    assert conf.plugin_names() == ["drf", "gang"]
    (record,) = [r for r in caplog.records if r.name == "caldera.config"]
    message = record.getMessage()
    assert "no effect" in message
    for switch in NO_EFFECT:
        assert switch in message
    assert "enableTargetJob (no action asks for a target job; plugins drf, gang)" in message
    # nothing else of the plugins' is switched: the switches are not kept
    assert all(not p.switches for t in conf.tiers for p in t.plugins)


def test_a_conf_without_them_logs_nothing(caplog):
    with caplog.at_level("WARNING", logger="caldera.config"):
        parse_conf('actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n', REGISTRY)
    assert not [r for r in caplog.records if r.name == "caldera.config"]


def test_a_no_effect_switch_must_still_be_a_boolean():
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n    enableTargetJob: sometimes\n'
    with pytest.raises(ConfError, match="option 'enableTargetJob' of plugin 'drf' must be true or false"):
        parse_conf(text, REGISTRY)


def test_enable_hierarchy_goes_to_capacity_and_drf_and_is_refused_elsewhere():
    for plugin in ("capacity", "drf"):
        text = f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {plugin}\n    enableHierarchy: true\n'
        conf = parse_conf(text, REGISTRY)
        assert conf.tiers[0].plugins[0].arguments.bool("enableHierarchy", False) is True
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: proportion\n    enableHierarchy: true\n'
    with pytest.raises(ConfError, match="'enableHierarchy' of plugin 'proportion' is not supported"):
        parse_conf(text, REGISTRY)


def test_volcano_spellings_of_overused_and_allocatable_switches_work():
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: proportion\n    enabledOverused: false\n    enabledAllocatable: false\n'
    option = parse_conf(text, REGISTRY).tiers[0].plugins[0]
    assert not option.enabled("overused") and not option.enabled("allocatable")


def test_dead_extension_points_are_gone_and_victim_queue_order_is_used():
    for gone in (
        "add_namespace_order_fn",
        "add_target_job_fn",
        "add_reserved_nodes_fn",
    ):
        assert not hasattr(Session, gone)
    # the victim-task point is live: tdm registers on it, for the shuffle action to ask
    assert hasattr(Session, "add_victim_tasks_fns") and hasattr(Session, "victim_tasks")
    import inspect

    from caldera.actions import helpers

    assert "victim_queue_order" in inspect.getsource(helpers.victim_order_key)
