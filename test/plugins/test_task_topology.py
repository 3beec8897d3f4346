"""task-topology: the roles of one job placed together or apart as its PodGroup's annotations ask."""

from caldera.hack.scenario import cluster, node, pod, podgroup, run_session

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
{nodeorder}{topology}
"""
WITH = "  - name: task-topology\n    arguments:\n      task-topology.weight: {weight}"


def place(annotations, roles, topology=True, nodes=3, nodeorder=True, weight=10):
    pods = [pod(f"{role}-{i}", group="tf", role=role, cpu="1") for role, n in roles.items() for i in range(n)]
    snap = cluster(
        nodes=[node(f"n{i}", cpu="8") for i in range(1, nodes + 1)],
        pods=pods,
        podgroups=[podgroup("tf", min_member=len(pods), annotations=annotations)],
    )
    text = CONF.format(
        topology=WITH.format(weight=weight) if topology else "",
        nodeorder="  - name: nodeorder\n" if nodeorder else "",
    )
    _, result = run_session(snap, text)
    return {p.task.name: p.node for p in result.placements}


def test_affine_roles_share_a_node_that_nodeorder_alone_would_spread_them_over():
    annotations = {"volcano.sh/task-topology-affinity": "ps,worker"}
    roles = {"ps": 1, "worker": 2}
    assert len(set(place(annotations, roles, topology=False).values())) > 1  # nodeorder spreads
    placed = place(annotations, roles)
    assert len(placed) == 3 and len(set(placed.values())) == 1
    # task-topology.weight 0: its score counts for nothing
    assert place(annotations, roles, weight=0) == place(annotations, roles, topology=False)


def test_self_anti_affinity_puts_each_worker_on_its_own_node():
    annotations = {"volcano.sh/task-topology-anti-affinity": "worker"}
    # without nodeorder the nodes tie and every worker would take the first
    assert set(place(annotations, {"worker": 3}, topology=False, nodeorder=False).values()) == {"n1"}
    placed = place(annotations, {"worker": 3}, nodeorder=False)
    assert sorted(placed.values()) == ["n1", "n2", "n3"]


def test_task_order_puts_the_named_role_first():
    """The PodGroup orders chief before worker: the chief is placed first and takes the first node."""
    from caldera.config.conf import parse_conf
    from caldera.framework.session import close_session, open_session
    from caldera.scheduler.registry import builtin_registry

    annotations = {
        "volcano.sh/task-topology-task-order": "chief,worker",
        "volcano.sh/task-topology-affinity": "chief;worker",
    }
    pods = [pod("a-worker", group="tf", role="worker"), pod("z-chief", group="tf", role="chief")]
    snap = cluster(
        nodes=[node("n1")], pods=pods, podgroups=[podgroup("tf", min_member=2, annotations=annotations)]
    )
    registry = builtin_registry()
    conf = parse_conf(CONF.format(topology=WITH.format(weight=1), nodeorder=""), registry)
    ssn = open_session(snap, conf.tiers, registry.plugins, conf.configurations)
    try:
        tasks = sorted((t for j in ssn.jobs.values() for t in j.tasks.values()), key=ssn.task_key)
        assert [t.name for t in tasks] == ["z-chief", "a-worker"]
    finally:
        close_session(ssn)


def test_invalid_annotations_leave_the_job_to_the_other_plugins():
    annotations = {"volcano.sh/task-topology-affinity": "ps,evaluator"}  # no evaluator in the job
    assert place(annotations, {"ps": 1, "worker": 2}) == place(
        annotations, {"ps": 1, "worker": 2}, topology=False
    )


def test_a_discarded_placement_is_taken_back():
    """Caldera's own: a statement discarded (a gang that did not fit) leaves the buckets as they were
    (Volcano has no deallocate handler and would keep counting it)."""
    from caldera.config.conf import parse_conf
    from caldera.framework.session import close_session, open_session
    from caldera.scheduler.registry import builtin_registry

    annotations = {"volcano.sh/task-topology-anti-affinity": "worker"}
    pods = [pod(f"worker-{i}", group="tf", role="worker") for i in range(2)]
    snap = cluster(
        nodes=[node("n1"), node("n2")],
        pods=pods,
        podgroups=[podgroup("tf", min_member=2, annotations=annotations)],
    )
    registry = builtin_registry()
    conf = parse_conf(CONF.format(topology=WITH.format(weight=1), nodeorder=""), registry)
    ssn = open_session(snap, conf.tiers, registry.plugins, conf.configurations)
    try:
        w0, w1 = sorted((t for j in ssn.jobs.values() for t in j.tasks.values()), key=lambda t: t.name)
        before = list(ssn.node_scores(w1, ssn.all_rows))
        stmt = ssn.statement()
        stmt.allocate(w0, "n1")
        assert list(ssn.node_scores(w1, ssn.all_rows)) != before  # n1 now holds a worker
        stmt.discard()
        assert list(ssn.node_scores(w1, ssn.all_rows)) == before
    finally:
        close_session(ssn)
