"""nodegroup: queues bound to node groups (the ``volcano.sh/nodegroup-name`` node label)."""

from caldera.hack.scenario import cluster, node, pod, podgroup, queue, run_session

GROUP = "volcano.sh/nodegroup-name"

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: nodegroup
{options}
"""


def bound_to(required=(), preferred=(), anti_required=(), anti_preferred=()):
    return {
        "nodeGroupAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": list(required),
            "preferredDuringSchedulingIgnoredDuringExecution": list(preferred),
        },
        "nodeGroupAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": list(anti_required),
            "preferredDuringSchedulingIgnoredDuringExecution": list(anti_preferred),
        },
    }


NODES = [
    node("train-1", labels={GROUP: "training"}),
    node("train-2", labels={GROUP: "training"}),
    node("serve-1", labels={GROUP: "serving"}),
    node("spare", labels={}),
]


def run(queues, pods, podgroups, options=""):
    snap = cluster(nodes=NODES, pods=pods, podgroups=podgroups, queues=queues)
    ssn, result = run_session(snap, CONF.format(options=options))
    return ssn, {p.task.name: p.node for p in result.placements}


def test_identical_pods_of_two_queues_go_to_their_own_groups():
    """The same pod spec in two queues: each lands in its queue's group (pods of one template are
    not interchangeable when their queues differ)."""
    queues = [
        queue("research", affinity=bound_to(required=["training"])),
        queue("prod", affinity=bound_to(required=["serving"])),
    ]
    pods = [pod("r", group="r-job", cpu="2"), pod("p", group="p-job", cpu="2")]
    pgs = [podgroup("r-job", queue="research"), podgroup("p-job", queue="prod")]
    _, placed = run(queues, pods, pgs)
    assert placed["r"].startswith("train-")
    assert placed["p"] == "serve-1"


def test_a_queue_without_affinity_is_kept_off_grouped_and_unlabelled_nodes():
    """strict (the default): a queue without affinity fits no node, and says why."""
    ssn, placed = run([queue("plain")], [pod("x", group="x-job")], [podgroup("x-job", queue="plain")])
    assert placed == {}
    (job,) = ssn.jobs.values()
    message = job.job_fit_error
    assert "node group affinity not specified" in message
    assert "node group label not found" in message


def test_not_strict_lets_a_queue_without_affinity_use_unlabelled_nodes():
    _, placed = run(
        [queue("plain")],
        [pod("x", group="x-job")],
        [podgroup("x-job", queue="plain")],
        options="    arguments:\n      strict: false",
    )
    assert placed == {"x": "spare"}


def test_preferred_group_wins_until_it_is_full():
    """Required both groups, preferring serving: pods go to serving first, then to training."""
    queues = [queue("q", affinity=bound_to(required=["training", "serving"], preferred=["serving"]))]
    pods = [pod(f"p{i}", group="job", cpu="4") for i in range(3)]
    _, placed = run(queues, pods, [podgroup("job", queue="q", min_member=3)])
    assert sorted(placed.values()) == ["serve-1", "serve-1", "train-1"]


def test_required_anti_affinity_keeps_pods_out():
    queues = [queue("q", affinity=bound_to(required=["training", "serving"], anti_required=["training"]))]
    pods = [pod(f"p{i}", group="job", cpu="4") for i in range(3)]
    _, placed = run(queues, pods, [podgroup("job", queue="q", min_member=1)])
    assert sorted(placed.values()) == ["serve-1", "serve-1"]


def test_group_resource_limit_sends_the_rest_elsewhere():
    """The queue may hold at most 4 cpu in training: the third 2-cpu pod goes to serving."""
    queues = [
        queue(
            "q",
            affinity=bound_to(required=["training", "serving"], preferred=["training"]),
            annotations={"volcano.sh/nodegroup-resource-limits": '{"training": {"cpu": "4"}}'},
        )
    ]
    pods = [pod(f"p{i}", group="job", cpu="2") for i in range(3)]
    _, placed = run(queues, pods, [podgroup("job", queue="q", min_member=3)])
    groups = sorted("serving" if n == "serve-1" else "training" for n in placed.values())
    assert groups == ["serving", "training", "training"]


def test_hierarchy_gives_a_child_queue_its_parents_affinity():
    queues = [
        queue("root", affinity=bound_to(required=["serving"])),
        queue("team", parent="root"),
    ]
    _, placed = run(
        queues,
        [pod("x", group="x-job")],
        [podgroup("x-job", queue="team")],
        options="    enableHierarchy: true",
    )
    assert placed == {"x": "serve-1"}
