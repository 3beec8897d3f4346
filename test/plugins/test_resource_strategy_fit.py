"""resource-strategy-fit: GPU pods packed, cpu pods spread, cpu-only pods kept off scarce GPU nodes,
cpu and memory kept beside idle GPUs; its nested arguments checked as Volcano decodes them."""

import pytest
import yaml

from caldera.config.conf import ConfError, parse_conf
from caldera.hack.scenario import cluster, node, pod, podgroup, run_session
from caldera.scheduler.registry import builtin_registry

GPU = "nvidia.com/gpu"


def conf(arguments):
    plugins = [
        {"name": "gang"},
        {"name": "predicates"},
        {"name": "resource-strategy-fit", "arguments": arguments},
    ]
    return yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": plugins}]})


def place(nodes, pods, arguments, running=()):
    snap = cluster(nodes=nodes, pods=[*running, *pods], podgroups=[podgroup("job", min_member=1)])
    _, result = run_session(snap, conf(arguments))
    return {p.task.name: p.node for p in result.placements}


def busy(name, node_name, **kw):
    return pod(name, node_name=node_name, phase="Running", scheduler="other", **kw)


def test_gpu_pods_fill_the_gpu_node_in_use_and_cpu_pods_take_the_emptiest_node():
    args = {
        "resources": {
            GPU: {"type": "MostAllocated", "weight": 2},
            "cpu": {"type": "LeastAllocated", "weight": 1},
        }
    }
    nodes = [node(f"g{i}", cpu="16", extra={GPU: "8"}) for i in (1, 2)] + [
        node("c1", cpu="16"),
        node("c2", cpu="16"),
    ]
    running = [busy("gpu-user", "g2", cpu="1", extra={GPU: "4"}), busy("cpu-user", "c1", cpu="8")]
    placed = place(nodes, [pod("train", group="job", cpu="1", extra={GPU: "2"})], args, running)
    assert placed == {"train": "g2"}
    placed = place(nodes, [pod("web", group="job", cpu="1")], args, running)
    assert placed == {"web": "c2"}


def test_sra_keeps_cpu_only_pods_off_nodes_with_scarce_gpus():
    args = {
        "resourceStrategyFitWeight": 0,
        "sra": {"enable": True, "resources": GPU, "weight": 10, "resourceWeight": {GPU: 1}},
    }
    nodes = [node("gpu", cpu="64", extra={GPU: "8"}), node("plain", cpu="8")]
    assert place(nodes, [pod("web", group="job", cpu="1")], args) == {"web": "plain"}
    # a pod that needs the GPU can only go where it is
    assert place(nodes, [pod("train", group="job", cpu="1", extra={GPU: "1"})], args) == {"train": "gpu"}


def test_proportional_keeps_cpu_beside_idle_gpus():
    """4 cores per idle GPU are kept on the GPU node: a 10-core cpu pod fits only on the other node
    even though the GPU node has more free cores; a GPU pod is not held back."""
    args = {
        "resourceStrategyFitWeight": 0,
        "proportional": {
            "enable": True,
            "resources": GPU,
            "resourceProportion": {f"{GPU}.cpu": 4, f"{GPU}.memory": 1},
        },
    }
    nodes = [node("gpu", cpu="40", memory="64Gi", extra={GPU: "8"}), node("plain", cpu="12", memory="64Gi")]
    assert place(nodes, [pod("batch", group="job", cpu="10")], args) == {"batch": "plain"}
    placed = place(nodes, [pod("big", group="job", cpu="20")], args)
    assert placed == {}
    assert place(nodes, [pod("train", group="job", cpu="30", extra={GPU: "1"})], args) == {"train": "gpu"}


def test_a_pods_own_scoring_annotations_apply_to_it_alone():
    """Two pods of one spec: the one annotated MostAllocated packs onto the busier node, the other
    (the conf's LeastAllocated) goes to the emptier one."""
    nodes = [node("busy", cpu="16"), node("idle", cpu="16")]
    running = [busy("x", "busy", cpu="8")]
    packed = pod(
        "packed",
        group="job",
        cpu="1",
        annotations={
            "volcano.sh/resource-strategy-scoring-type": "MostAllocated",
            "volcano.sh/resource-strategy-weight": '{"cpu": 1}',
        },
    )
    placed = place(nodes, [pod("spread", group="job", cpu="1"), packed], {}, running)
    assert placed == {"spread": "idle", "packed": "busy"}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"resources": {"cpu": {"type": "MostAllocated", "weight": "heavy"}}},
            r"resources\['cpu'\]\.weight must be an integer, got 'heavy' \(in the arguments of plugin 'resource-strategy-fit'\)",
        ),
        ({"resources": {"cpu": {"kind": "MostAllocated"}}}, r"has no setting 'kind'"),
        ({"sra": {"enable": "yes"}}, r"sra.*enable must be true or false"),
        ({"proportional": {"enable": True, "resourceProportion": {"a.cpu": "four"}}}, r"must be a number"),
        ({"sra": "on"}, r"argument 'sra' of plugin 'resource-strategy-fit' must be a mapping"),
    ],
)
def test_a_nested_argument_of_the_wrong_shape_is_refused_naming_it(arguments, message):
    """Volcano's mapstructure decode ends the scheduler (klog.Fatalf) on these; Caldera refuses the
    conf with the argument named (on a reload the last good conf keeps running)."""
    with pytest.raises(ConfError, match=message):
        parse_conf(conf(arguments), builtin_registry())


def test_settings_are_matched_without_regard_to_case_as_mapstructure_does():
    text = conf({"sra": {"Enable": True, "Resources": GPU, "Weight": 2, "ResourceWeight": {GPU: 1}}})
    option = parse_conf(text, builtin_registry()).plugin_option("resource-strategy-fit")
    assert option.arguments["sra"] == {
        "enable": True,
        "resources": GPU,
        "weight": 2,
        "resourceWeight": {GPU: 1},
    }
