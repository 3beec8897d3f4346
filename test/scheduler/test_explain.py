"""Why is my job pending: the one-line reason and the explanation document for the common causes."""

import json

from caldera.hack.scenario import InProcessCluster, cluster, gang, node, pod, podgroup, queue, run_session
from caldera.scheduler.explain import explain_session, one_line
from caldera.scheduler.explain_cli import render
from test.actions.test_topology_allocate import LEAF, conf, filler, gang_pods, leaf_nodes

HARD1 = {"mode": "hard", "highestTierAllowed": 1}


def explained(snap, conf_text=None, uid="default/job"):
    ssn, _ = run_session(snap, conf_text)
    docs = explain_session(ssn)
    doc = docs[uid]
    # one readable line, the same text the PodGroup condition and the event carry
    assert "\n" not in doc["reason"] and doc["reason"] == one_line(ssn.jobs[uid])
    assert json.loads(json.dumps(doc)) == doc
    assert render({**doc, "cycle": 1}).startswith(f"Job {uid}")
    return doc


def test_insufficient_resources_counts_nodes_and_says_how_many_more_are_needed():
    pg, pods = gang("job", 4, cpu="6")
    snap = cluster(
        nodes=[node("n1", cpu="8"), node("n2", cpu="8"), node("n3", cpu="4")], pods=pods, podgroups=[pg]
    )
    doc = explained(snap)
    assert doc["reason"] == (
        "4/4 tasks in gang unschedulable: pod group is not ready, 0 ready, 4 minAvailable; "
        "0/3 nodes are available: 3 Insufficient cpu."
    )
    (role,) = doc["roles"]
    assert role["pending"] == 4 and role["nodes"] == 3
    assert role["request"] == {"cpu": 6.0, "memory": 2**30}
    assert role["predicates"] == {"Insufficient cpu": 1}
    assert role["feasible"] == 2
    # two nodes take one 6-cpu pod each: two more are needed
    assert doc["suggestion"] == "needs 2 more nodes with 6 cpu and 1Gi memory free"
    assert doc["topology"] is None and doc["queue_state"]["held"] is False


def test_taints_are_counted_and_the_suggestion_names_them():
    taint = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    pg, pods = gang("job", 2, cpu="1")
    nodes = [node("t1", taints=taint), node("t2", taints=taint), node("small", cpu="1")]
    doc = explained(cluster(nodes=nodes, pods=pods, podgroups=[pg]))
    (role,) = doc["roles"]
    taint_reason = next(k for k in role["predicates"] if "taint" in k)
    assert role["predicates"][taint_reason] == 2
    assert "2 node(s) had untolerated taint" in doc["reason"] or "taint" in doc["reason"]
    assert doc["suggestion"] == "needs 1 more node with 1 cpu and 1Gi memory free"


def test_only_tainted_nodes_suggest_a_toleration():
    taint = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    pg, pods = gang("job", 1)
    doc = explained(cluster(nodes=[node("t1", taints=taint)], pods=pods, podgroups=[pg]))
    assert "toleration" in doc["suggestion"]


def test_gang_below_min_member_says_how_many_pods_are_missing():
    pg = podgroup("job", min_member=4)
    pods = [pod(f"job-{i}", group="job") for i in range(2)]
    doc = explained(cluster(nodes=[node("n1")], pods=pods, podgroups=[pg]))
    assert "Not enough valid tasks for gang-scheduling, valid: 2, min: 4" in doc["reason"]
    assert doc["gang"]["valid"] == 2 and doc["gang"]["min_member"] == 4
    assert doc["suggestion"] == "needs 2 more pods to reach minMember 4 (or lower minMember to 2)"


def test_queue_capability_holds_the_job_at_enqueue():
    q = queue("small", capability={"cpu": "4", "memory": "8Gi"})
    pg = podgroup("job", min_member=1, queue="small", phase="Pending", min_resources={"cpu": "6"})
    pods = [pod("job-0", cpu="6", group="job")]
    doc = explained(cluster(nodes=[node("n1", cpu="16")], pods=pods, podgroups=[pg], queues=[q]))
    assert "queue resource quota insufficient" in doc["reason"]
    qs = doc["queue_state"]
    assert qs["held"] is True and qs["name"] == "small"
    assert "capability 4 cpu and 8Gi memory" in qs["message"]
    assert doc["suggestion"].startswith("raise queue small's capability")


def test_closed_queue_is_the_reason_and_the_suggestion_opens_it():
    q = queue("shut", state="Closed")
    pg = podgroup("job", min_member=1, queue="shut", phase="Pending")
    doc = explained(cluster(nodes=[node("n1")], pods=[pod("job-0", group="job")], podgroups=[pg], queues=[q]))
    assert "queue shut is not open" in doc["reason"]
    assert doc["queue_state"] == {
        "name": "shut",
        "state": "Closed",
        "held": True,
        "message": "queue shut is Closed: nothing is scheduled from it",
    }
    assert doc["suggestion"] == "open queue shut (it is Closed)"


def test_closed_queue_without_enqueue_still_gets_a_reason():
    q = queue("shut", state="Closed")
    pg = podgroup("job", min_member=1, queue="shut")
    snap = cluster(nodes=[node("n1")], pods=[pod("job-0", group="job")], podgroups=[pg], queues=[q])
    doc = explained(snap, 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n')
    assert doc["reason"].endswith("queue shut is not open")


def test_topology_shortfall_lists_groups_and_the_closest_one():
    nodes = leaf_nodes("leaf-a", "s1", 2) + leaf_nodes("leaf-b", "s2", 2)
    pg, pods = gang_pods("job", 3, "8", HARD1)
    snap = cluster(nodes=nodes, pods=[filler("leaf-b-n0", "2"), *pods], podgroups=[pg])
    doc = explained(snap, conf())
    topo = doc["topology"]
    assert topo["mode"] == "hard" and topo["highest_tier"] == 1 and topo["need"] == 3
    assert [g["name"] for g in topo["groups"]] == ["leaf-a", "leaf-b"]
    assert topo["groups"][0]["shortfall"] == "room for 2 of 3 pods, short of 8 cpu on its usable nodes"
    assert topo["groups"][0]["outcome"] == "short"
    assert doc["suggestion"] == (
        f"needs 1 more node with 8 cpu and 1Gi memory free in one {LEAF} (closest: leaf-a, room for 2 of 3 pods)"
    )
    text = render({**doc, "cycle": 7})
    assert "leaf-a: room for 2 of 3 pods" in text and "To fit:" in text


def test_placed_jobs_are_not_explained():
    pg, pods = gang("ok", 2)
    ssn, _ = run_session(cluster(nodes=[node("n1")], pods=pods, podgroups=[pg]))
    assert explain_session(ssn) == {}


def _scaled_queues_scenario():
    """8 cpu; queues a and b each guarantee 6 cpu (12 in all), so each guarantee is scaled to 4 cpu.
    Queue a runs 4 cpu already and has one more 2-cpu job pending; queue b's job runs too."""
    queues = [queue("a", guarantee={"cpu": "6"}, weight=1), queue("b", guarantee={"cpu": "6"}, weight=1)]
    running = podgroup("a-run", min_member=4, queue="a", phase="Running")
    pods = [
        pod(f"a-run-{i}", cpu="1", memory="1Gi", group="a-run", node_name="n1", phase="Running")
        for i in range(4)
    ]
    b_run = podgroup("b-run", min_member=4, queue="b", phase="Running")
    pods += [
        pod(f"b-run-{i}", cpu="1", memory="1Gi", group="b-run", node_name="n2", phase="Running")
        for i in range(3)
    ]
    job = podgroup("job", min_member=1, queue="a", phase="Inqueue")
    pods += [pod("job-0", cpu="1", memory="1Gi", group="job")]
    nodes = [node("n1", cpu="4", memory="64Gi"), node("n2", cpu="4", memory="64Gi")]
    return cluster(nodes=nodes, pods=pods, podgroups=[running, b_run, job], queues=queues)


def test_a_queue_whose_guarantee_was_scaled_down_says_so_and_weight_is_not_the_remedy():
    doc = explained(_scaled_queues_scenario())
    qs = doc["queue_state"]
    assert qs["held"] is True and qs["guarantee_scaled"] == {"cpu": 4 / 6}
    assert "its guarantee was scaled down (6 cpu to 4 cpu)" in qs["message"]
    assert "guarantees of all queues add up to more than the cluster has" in qs["message"]
    assert "lower the other queues' guarantees or add nodes" in doc["suggestion"]
    assert "raise its weight" not in doc["suggestion"]
    assert "raising its weight does not help" in doc["suggestion"]


def test_a_queue_at_its_capability_suggests_the_capability_not_the_weight():
    queues = [queue("a", capability={"cpu": "4"}, weight=1), queue("b", weight=1)]
    running = podgroup("a-run", min_member=4, queue="a", phase="Running")
    pods = [
        pod(f"a-run-{i}", cpu="1", memory="1Gi", group="a-run", node_name="n1", phase="Running")
        for i in range(4)
    ]
    job = podgroup("job", min_member=1, queue="a", phase="Inqueue")
    pods += [pod("job-0", cpu="1", memory="1Gi", group="job")]
    nodes = [node("n1", cpu="4", memory="64Gi"), node("n2", cpu="4", memory="64Gi")]
    doc = explained(cluster(nodes=nodes, pods=pods, podgroups=[running, job], queues=queues))
    qs = doc["queue_state"]
    assert qs["held"] is True and qs.get("at_capability") is True
    assert "that is its capability (4 cpu)" in qs["message"]
    assert doc["suggestion"].startswith("raise queue a's capability")
    assert "raise its weight" not in doc["suggestion"]


def test_a_missing_podgroup_renders_as_such_not_as_an_empty_gang():
    doc = {
        "namespace": "default",
        "name": "ghost",
        "problem": "PodGroupNotFound",
        "reason": "PodGroup default/ghost not found: 2 pods wait for it",
        "suggestion": "create PodGroup ghost in namespace default",
        "pods": ["ghost-0", "ghost-1"],
        "gang": {"min_member": 0, "ready": 0, "pipelined": 0, "pending": 2, "valid": 0},
        "cycle": 3,
    }
    text = render(doc)
    assert text.splitlines()[0] == "PodGroup default/ghost (does not exist)"
    assert "Pods:       ghost-0, ghost-1" in text and "To fix:     create PodGroup ghost" in text
    assert "minMember" not in text


def test_jobs_waiting_for_devices_each_get_the_summary_of_their_classes_with_this_cycles_placements():
    """The device summary is found once per session for a set of classes and shared by the jobs that
    ask for them: it counts the devices this cycle's placements took, and a job asking for another
    class gets that class's."""
    from caldera.hack.scenario import claim_pod_spec, device_class, resource_claim, resource_slice

    gpu, fpga = "gpu.example.com", "fpga.example.com"

    def claiming(name, claim, size):
        pg = podgroup(name, min_member=size)
        pods = [
            pod(f"{name}-{i}", group=name, spec_extra=claim_pod_spec(f"{claim}-{i}")) for i in range(size)
        ]
        return pg, pods

    jobs = [
        claiming("placed", "g", 2),
        claiming("big", "b", 3),
        claiming("big2", "b2", 3),
        claiming("f", "f", 1),
    ]
    claims = [resource_claim(f"{c}-{i}", gpu) for c, n in (("g", 2), ("b", 3), ("b2", 3)) for i in range(n)]
    snap = cluster(
        nodes=[node("n1")],
        pods=[p for _, pods in jobs for p in pods],
        podgroups=[pg for pg, _ in jobs],
        dra=[
            device_class(gpu),
            device_class(fpga),
            resource_slice("n1", gpu, ["gpu-0", "gpu-1", "gpu-2"]),
            *claims,
            resource_claim("f-0", fpga),
        ],
    )
    ssn, result = run_session(snap)
    assert {p.task.job for p in result.placements} == {"default/placed"}
    docs = explain_session(ssn)
    gpus = f"3 devices of class {gpu}, 2 allocated; driver {gpu}: 3 devices, 2 allocated"
    assert docs["default/big"]["devices"]["summary"] == gpus
    assert docs["default/big2"]["devices"]["summary"] == gpus
    assert docs["default/big"]["devices"] is not docs["default/big2"]["devices"]
    assert docs["default/f"]["devices"]["summary"] == f"0 devices of class {fpga}, 0 allocated"


CAPACITY_CONF = (
    'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
    "- plugins:\n  - name: predicates\n  - name: capacity\n"
)


def queue_held_in_a_cycle(conf_text):
    """Queue small (capability 4 cpu) runs a pod of 3 cpu; a job of 2 cpu waits. Explained by the
    scheduler's own cycle, which explains before the plugins close the session."""
    sim = InProcessCluster(
        conf_text,
        nodes=[node("n1", cpu="16")],
        queues=[queue("small", capability={"cpu": "4", "memory": "8Gi"})],
        podgroups=[
            podgroup("busy", queue="small", phase="Running"),
            podgroup("job", queue="small", phase="Pending", min_resources={"cpu": "2"}),
        ],
        pods=[
            pod("busy-0", cpu="3", group="busy", node_name="n1", phase="Running"),
            pod("job-0", cpu="2", group="job"),
        ],
    )
    return sim.cycle().report.explanations["default/job"]["queue_state"]


def test_a_job_its_queue_holds_is_told_what_the_queue_has_allocated_with_proportion():
    state = queue_held_in_a_cycle(None)
    assert state["held"] is True
    assert state["message"] == (
        "queue small cannot take the job's minimum (2 cpu): 3 cpu and 1Gi memory allocated and no"
        " resources inqueue, capability 4 cpu and 8Gi memory"
    )


def test_a_job_its_queue_holds_is_told_so_with_capacity():
    state = queue_held_in_a_cycle(CAPACITY_CONF)
    assert state["held"] is True
    assert state["message"].startswith(
        "queue small cannot take the job's minimum (2 cpu): 3 cpu and 1Gi memory allocated"
    )
