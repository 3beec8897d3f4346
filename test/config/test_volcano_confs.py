"""Volcano's default conf and the conf its Helm chart ships load and run through the loop."""

from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.hack.scenario import InProcessCluster, gang, node, queue
from caldera.scheduler.registry import builtin_registry

HELM_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

FULL_CONF = """
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla
    arguments:
      sla-waiting-time: 1h
- plugins:
  - name: overcommit
    arguments:
      overcommit-factor: 1.5
  - name: drf
    enablePreemptable: false
  - name: predicates
    arguments:
      predicate.PodAffinityEnable: true
  - name: proportion
  - name: nodeorder
    arguments:
      leastrequested.weight: 1
      balancedresource.weight: 1
      nodeaffinity.weight: 2
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: 3
"""


def run(conf_text):
    pg1, pods1 = gang("one", 3, cpu="1")
    pg2, pods2 = gang("two", 2, cpu="2", queue="q2")
    sim = InProcessCluster(
        conf_text,
        nodes=[node("n1", cpu="4"), node("n2", cpu="4")],
        queues=[queue("q2", weight=2)],
        podgroups=[pg1, pg2],
        pods=[*pods1, *pods2],
    )
    sim.cycle()
    sim.cycle()
    assert sim.loop.stats.failed == 0, sim.loop.stats.last_error
    return sim


def test_default_conf_loads_and_runs():
    conf = parse_conf(DEFAULT_CONF, builtin_registry())
    assert conf.actions == ["enqueue", "allocate", "backfill"]
    assert len(run(DEFAULT_CONF).running_on()) == 5


def test_helm_conf_with_binpack_in_tier_two_and_preemptable_switches_loads_and_runs():
    conf = parse_conf(HELM_CONF, builtin_registry())
    assert conf.plugin_option("gang").switches == {"enablePreemptable": False}
    assert conf.plugin_option("drf").switches == {"enablePreemptable": False}
    assert [p.name for p in conf.tiers[1].plugins][-1] == "binpack"
    assert len(run(HELM_CONF).running_on()) == 5


def test_every_action_and_plugin_with_arguments_loads_and_runs():
    assert len(run(FULL_CONF).running_on()) == 5


#: installer/helm/chart/volcano/config/volcano-scheduler-ci.conf at Volcano HEAD (ed72c7c8, 2026-08-20):
#: the conf Volcano's own e2e runs with, DRA on.
VOLCANO_CI_CONF = """actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""


def test_volcanos_e2e_conf_with_dra_on_loads_unchanged_and_runs():
    conf = parse_conf(VOLCANO_CI_CONF, builtin_registry())
    assert conf.plugin_option("predicates").arguments.bool("predicate.DynamicResourceAllocationEnable", False)
    assert len(run(VOLCANO_CI_CONF).running_on()) == 5


def test_capacity_conf_loads_and_runs():
    text = DEFAULT_CONF.replace("  - name: proportion", "  - name: capacity")
    assert len(run(text).running_on()) == 5


NODEGROUP_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodegroup
    enableHierarchy: true
    arguments:
      strict: false
      enablePreferredOrder: true
"""


def test_nodegroup_conf_as_volcano_documents_it_loads_and_runs():
    """nodegroup.go's own example conf (with both arguments and the hierarchy option): the nodes
    carry no group label and the queues no affinity, so with strict: false every pod runs."""
    conf = parse_conf(NODEGROUP_CONF, builtin_registry())
    option = conf.plugin_option("nodegroup")
    assert option.switches == {"enableHierarchy": True}
    assert dict(option.arguments) == {"strict": False, "enablePreferredOrder": True, "enableHierarchy": True}
    assert len(run(NODEGROUP_CONF).running_on()) == 5


RESOURCE_STRATEGY_FIT_CONF = """
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: resource-strategy-fit
    arguments:
       resourceStrategyFitWeight: 10
       resources:
         nvidia.com/gpu:
           type: MostAllocated
           weight: 2
         cpu:
           type: LeastAllocated
           weight: 1
       sra:
         enable: true
         resources: nvidia.com/gpu
         weight: 10
         resourceWeight:
           nvidia.com/gpu: 1
       proportional:
         enable: false
         resources: nvidia.com/gpu
         resourceProportion:
           nvidia.com/gpu.cpu: 4
           nvidia.com/gpu.memory: 8
- plugins:
  - name: priority
  - name: gang
  - name: predicates
  - name: proportion
"""


def test_resource_strategy_fit_conf_as_volcano_documents_it_loads_and_runs():
    """The example in resource_strategy_fit.go's calculateWeight, verbatim (indentation and all)."""
    conf = parse_conf(RESOURCE_STRATEGY_FIT_CONF, builtin_registry())
    args = conf.plugin_option("resource-strategy-fit").arguments
    assert args["sra"]["resourceWeight"] == {"nvidia.com/gpu": 1}
    assert len(run(RESOURCE_STRATEGY_FIT_CONF).running_on()) == 5


def test_cdp_conf_loads_and_runs():
    """cdp beside gang in the tier that decides victims, with preempt and reclaim."""
    text = FULL_CONF.replace("  - name: conformance\n", "  - name: conformance\n  - name: cdp\n", 1)
    conf = parse_conf(text, builtin_registry())
    assert [p.name for p in conf.tiers[0].plugins] == ["priority", "gang", "conformance", "cdp", "sla"]
    assert len(run(text).running_on()) == 5


def test_task_topology_conf_as_volcano_documents_it_loads_and_runs():
    """util.go calculateWeight's example conf."""
    text = """
actions: "enqueue, reclaim, allocate, backfill, preempt"
tiers:
- plugins:
  - name: task-topology
    arguments:
      task-topology.weight: 10
- plugins:
  - name: priority
  - name: gang
  - name: predicates
  - name: proportion
"""
    conf = parse_conf(text, builtin_registry())
    assert conf.plugin_option("task-topology").arguments["task-topology.weight"] == 10
    assert len(run(text).running_on()) == 5
