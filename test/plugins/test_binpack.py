"""binpack: fill nodes before opening new ones; resource weights decide between resources."""

from caldera.hack.scenario import cluster, node, pod, podgroup, run_session

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: binpack
    arguments:
      binpack.weight: 1
      binpack.cpu: {cpu}
      binpack.memory: {memory}
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: {gpu}
"""


def place(nodes, pods, cpu=1, memory=1, gpu=1):
    snap = cluster(nodes=nodes, pods=pods, podgroups=[podgroup("g", min_member=1)])
    _, result = run_session(snap, CONF.format(cpu=cpu, memory=memory, gpu=gpu))
    return {p.task.name: p.node for p in result.placements}


def test_pods_pack_onto_the_fuller_node():
    nodes = [node("a", cpu="8"), node("b", cpu="8")]
    others = [pod("x", cpu="4", node_name="b", phase="Running", scheduler="other")]
    assert place(nodes, [*others, pod("p", group="g")]) == {"p": "b"}


def test_a_job_fills_one_node_before_the_next():
    nodes = [node("a", cpu="4"), node("b", cpu="4")]
    placed = place(nodes, [pod(f"p{i}", group="g", cpu="1") for i in range(4)])
    assert set(placed.values()) == {"a"}


def test_resource_weights_decide_which_fullness_counts():
    nodes = [
        node("cpu-full", cpu="8", extra={"nvidia.com/gpu": "4"}),
        node("gpu-full", cpu="8", extra={"nvidia.com/gpu": "4"}),
    ]
    others = [
        pod("c", cpu="6", node_name="cpu-full", phase="Running", scheduler="other"),
        pod(
            "g",
            cpu="1",
            extra={"nvidia.com/gpu": "3"},
            node_name="gpu-full",
            phase="Running",
            scheduler="other",
        ),
    ]
    task = pod("p", group="g", cpu="1", extra={"nvidia.com/gpu": "1"})
    assert place(nodes, [*others, task], cpu=1, memory=0, gpu=10) == {"p": "gpu-full"}
    assert place(nodes, [*others, task], cpu=10, memory=0, gpu=1) == {"p": "cpu-full"}
