"""extender: the scheduler asks an HTTP extender (Volcano's protocol) and follows its answers; an
extender that fails or does not answer in time is skipped when ignorable, else fails that callback
for the cycle, never the scheduler."""

from __future__ import annotations

import logging
import socket
import time

import pytest

from caldera.config.conf import parse_conf
from caldera.hack.extender import extender
from caldera.hack.scenario import InProcessCluster, cluster, node, pod, podgroup, queue, run_session
from caldera.scheduler.registry import builtin_registry


def conf(
    url: str,
    ignorable: bool = False,
    timeout: str = "1s",
    actions: str = "enqueue, allocate, preempt",
    alone: bool = False,
    **verbs: str,
) -> str:
    """A conf with the extender beside gang (or, ``alone``, in a first tier of its own)."""
    lines = [f"      extender.urlPrefix: {url}", f"      extender.httpTimeout: {timeout}"]
    lines.append(f"      extender.ignorable: {str(ignorable).lower()}")
    lines += [f"      extender.{verb}: {name}" for verb, name in verbs.items()]
    args = "\n".join(lines)
    extender = f"""  - name: extender
    arguments:
{args}
"""
    first = f"- plugins:\n{extender}" if alone else ""
    beside = "" if alone else extender
    return f"""
actions: "{actions}"
tiers:
{first}- plugins:
  - name: priority
  - name: gang
  - name: conformance
{beside}- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def two_nodes_one_pod(**pod_kw):
    return cluster(
        nodes=[node("n1", cpu="4"), node("n2", cpu="4")],
        podgroups=[podgroup("job", min_member=1)],
        pods=[pod("job-0", cpu="1", group="job", **pod_kw)],
    )


def placed(result) -> dict[str, str]:
    return {p.task.name: p.node for p in result.placements}


def test_without_an_extender_the_pod_goes_to_n1():
    # the baseline the cases below move away from: equal nodes, ties to the first name
    assert placed(run_session(two_nodes_one_pod())[1]) == {"job-0": "n1"}


def test_the_extender_predicate_keeps_the_pod_off_the_node_it_refuses():
    answers = {
        "predicate": lambda body: (200, {"status": "disk busy" if body["node"]["Name"] == "n1" else ""})
    }
    with extender(answers) as ext:
        _, result = run_session(two_nodes_one_pod(), conf(ext.url, predicateVerb="predicate"))
    assert placed(result) == {"job-0": "n2"}
    body = dict(ext.calls)["predicate"]
    assert body["task"]["Name"] == "job-0" and body["task"]["Pod"]["metadata"]["name"] == "job-0"
    assert body["task"]["Resreq"]["MilliCPU"] == 1000.0
    assert body["node"]["Node"]["metadata"]["name"] in ("n1", "n2")


def test_the_reason_of_the_extender_predicate_explains_a_pod_that_fits_nowhere():
    with extender({"predicate": {"status": "disk busy", "code": 2}}) as ext:
        ssn, result = run_session(two_nodes_one_pod(), conf(ext.url, predicateVerb="predicate"))
    assert placed(result) == {}
    assert "disk busy" in " ".join(ssn.jobs["default/job"].fit_errors.values())


def test_the_extender_scores_move_the_pod_to_the_node_it_prefers():
    with extender({"prioritize": {"nodeScore": {"n1": 0, "n2": 100}}}) as ext:
        _, result = run_session(two_nodes_one_pod(), conf(ext.url, prioritizeVerb="prioritize"))
    assert placed(result) == {"job-0": "n2"}
    assert sorted(n["Name"] for n in dict(ext.calls)["prioritize"]["nodes"]) == ["n1", "n2"]


def test_a_job_the_extender_refuses_to_enqueue_stays_pending():
    answers = {"enqueueable": lambda body: (200, {"status": -1 if body["job"]["Name"] == "held" else 1})}
    snap = cluster(
        nodes=[node("n1", cpu="8")],
        podgroups=[
            podgroup(n, min_member=1, phase="Pending", min_resources={"cpu": "1"}) for n in ("held", "free")
        ],
        pods=[pod(f"{n}-0", cpu="1", group=n) for n in ("held", "free")],
    )
    with extender(answers) as ext:
        _, result = run_session(
            snap, conf(ext.url, jobEnqueueableVerb="enqueueable", jobEnqueuedVerb="enqueued")
        )
    assert {uid: j.phase for uid, j in result.jobs.items()} == {
        "default/held": "Pending",
        "default/free": "Inqueue",
    }
    assert placed(result) == {"free-0": "n1"}
    assert [body["job"]["Name"] for verb, body in ext.calls if verb == "enqueued"] == ["free"]


def test_an_overused_queue_gets_nothing_placed():
    with extender({"overused": {"overused": True}}) as ext:
        _, result = run_session(two_nodes_one_pod(), conf(ext.url, queueOverusedVerb="overused"))
    assert placed(result) == {}
    assert dict(ext.calls)["overused"]["queue"]["Name"] == "default"


def urgent_among_low(text: str, nodes: dict[str, str], low_on: list[str]) -> InProcessCluster:
    """Nodes (name → cpu) full of the pods of a low-priority job of minimum one (one pod of 1 cpu on
    each node of ``low_on``, named low-0, low-1, ...), then a high-priority pod urgent-0 of 1 cpu."""
    from caldera.hack.scenario import priority_class

    sim = InProcessCluster(
        text,
        nodes=[node(name, cpu=cpu) for name, cpu in nodes.items()],
        pods=[
            pod(
                f"low-{i}",
                cpu="1",
                group="low",
                node_name=on,
                phase="Running",
                priority_class="low",
                annotations={"volcano.sh/preemptable": "true"},
            )
            for i, on in enumerate(low_on)
        ],
        podgroups=[podgroup("low", min_member=1, phase="Running", priority_class="low")],
        priority_classes=[priority_class("high", 1000), priority_class("low", 1)],
    )
    sim.add(
        podgroups=[podgroup("urgent", min_member=1, priority_class="high")],
        pods=[pod("urgent-0", cpu="1", group="urgent", priority_class="high")],
    )
    return sim


def test_the_extender_chooses_the_victims_of_a_preemption():
    """A low-priority gang of three (minimum one) fills the node; gang lets two of them go, and of
    those the extender offers only low-0 (without it, low-1 would go)."""

    def choose(body):
        return 200, {"status": 1, "victims": [t for t in body["evictees"] if t["Name"] == "low-0"]}

    with extender({"preemptable": choose}) as ext:
        sim = urgent_among_low(conf(ext.url, preemptableVerb="preemptable"), {"n1": "3"}, ["n1"] * 3)
        evicted = [e.task.name for e in sim.cycle().evictions]
    assert evicted == ["low-0"]
    assert {t["Name"] for t in dict(ext.calls)["preemptable"]["evictees"]} == {"low-0", "low-1", "low-2"}


def test_the_extender_chooses_the_victims_of_a_reclaim():
    """Queue a's job holds both nodes; queue b's one-pod job needs room. Reclaim alone evicts one
    pod; with an extender (in a tier of its own) that offers only another pod, that one goes."""
    preemptable = {"volcano.sh/preemptable": "true"}

    def reclaimed(text):
        hog = [
            pod(
                f"hog-{i}",
                cpu="1",
                group="hog",
                node_name=f"n{1 + i % 2}",
                phase="Running",
                annotations=preemptable,
            )
            for i in range(8)
        ]
        sim = InProcessCluster(
            text,
            nodes=[node("n1", cpu="4"), node("n2", cpu="4")],
            queues=[queue("a"), queue("b")],
            podgroups=[podgroup("hog", min_member=1, queue="a", phase="Running")],
            pods=hog,
        )
        sim.add(
            podgroups=[podgroup("new", min_member=1, queue="b")], pods=[pod("new-0", cpu="1", group="new")]
        )
        return [e.task.name for e in sim.cycle().evictions]

    [usual] = reclaimed(conf("http://127.0.0.1:1", actions="enqueue, allocate, reclaim"))
    other = "hog-2" if usual != "hog-2" else "hog-4"

    def offer(body):
        return 200, {"status": 1, "victims": [t for t in body["evictees"] if t["Name"] == other]}

    with extender({"reclaimable": offer}) as ext:
        text = conf(ext.url, actions="enqueue, allocate, reclaim", alone=True, reclaimableVerb="reclaimable")
        assert reclaimed(text) == [other]
    assert dict(ext.calls)["reclaimable"]["evictor"]["Name"] == "new-0"


def test_a_job_the_extender_says_is_not_ready_is_not_placed():
    with extender({"ready": {"status": False}}) as ext:
        _, result = run_session(two_nodes_one_pod(), conf(ext.url, jobReadyVerb="ready"))
    assert placed(result) == {}
    assert dict(ext.calls)["ready"]["job"]["Name"] == "job"


def test_session_open_and_close_are_sent_with_the_cluster():
    with extender({}) as ext:
        run_session(two_nodes_one_pod(), conf(ext.url, onSessionOpenVerb="open", onSessionCloseVerb="close"))
    assert ext.verbs() == ["open", "close"]
    opened = ext.calls[0][1]
    assert sorted(opened["Nodes"]) == ["n1", "n2"] and "default/job" in opened["Jobs"]
    assert opened["Queues"]["default"]["Name"] == "default"


def test_a_pod_without_a_managed_resource_is_not_sent():
    text = conf("http://127.0.0.1:9", predicateVerb="predicate").replace(
        "      extender.ignorable: false",
        "      extender.ignorable: false\n      extender.managedResources: [nvidia.com/gpu]",
    )
    # nothing listens on port 9: a call would fail the node; none is made
    assert placed(run_session(two_nodes_one_pod(), text)[1]) == {"job-0": "n1"}


# -- failures --------------------------------------------------------------------------------------------
def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_an_ignorable_extender_that_is_down_is_skipped(caplog):
    text = conf(closed_port(), ignorable=True, predicateVerb="predicate", prioritizeVerb="prioritize")
    with caplog.at_level(logging.WARNING, "caldera.plugins.extender"):
        assert placed(run_session(two_nodes_one_pod(), text)[1]) == {"job-0": "n1"}
    assert len(caplog.records) == 2  # one line per verb for the cycle
    assert "ignored" in caplog.records[0].getMessage()


def test_an_extender_that_is_down_and_not_ignorable_fails_its_predicate_for_the_cycle(caplog):
    text = conf(closed_port(), predicateVerb="predicate")
    with caplog.at_level(logging.WARNING, "caldera.plugins.extender"):
        ssn, result = run_session(two_nodes_one_pod(), text)
    assert placed(result) == {}
    assert "predicate with extender at URL" in " ".join(ssn.jobs["default/job"].fit_errors.values())
    assert len(caplog.records) == 1


def test_a_slow_extender_times_out_once_per_cycle_not_once_per_node(caplog):
    nodes = [node(f"n{i}", cpu="4") for i in range(8)]
    snap = cluster(
        nodes=nodes, podgroups=[podgroup("job", min_member=1)], pods=[pod("job-0", cpu="1", group="job")]
    )
    with extender({"predicate": {"status": ""}}, delay=2.0) as ext:
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, "caldera.plugins.extender"):
            _, result = run_session(
                snap, conf(ext.url, ignorable=True, timeout="200ms", predicateVerb="predicate")
            )
        elapsed = time.monotonic() - started
    assert placed(result) == {"job-0": "n0"}
    assert elapsed < 1.5, elapsed  # one timeout of 0.2 s, then the session stops waiting on it
    assert len(caplog.records) == 1 and "timed out" in caplog.records[0].getMessage()


def test_an_answer_that_is_not_200_or_does_not_decode_fails_the_call(caplog):
    answers = {
        "enqueueable": (lambda body: (500, {"oops": 1})),
        "overused": (lambda body: (200, b"not json")),
    }
    snap = cluster(
        nodes=[node("n1", cpu="8")],
        podgroups=[podgroup("job", min_member=1, phase="Pending", min_resources={"cpu": "1"})],
        pods=[pod("job-0", cpu="1", group="job")],
    )
    with extender(answers) as ext:
        _, result = run_session(
            snap, conf(ext.url, jobEnqueueableVerb="enqueueable", queueOverusedVerb="overused")
        )
    assert result.jobs["default/job"].phase == "Pending"
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "code 500" in messages


def test_a_failed_session_open_that_is_not_ignorable_registers_nothing_else():
    with extender({"open": lambda body: (503, {}), "predicate": {"status": "never asked"}}) as ext:
        _, result = run_session(
            two_nodes_one_pod(), conf(ext.url, onSessionOpenVerb="open", predicateVerb="predicate")
        )
    assert placed(result) == {"job-0": "n1"}
    assert ext.verbs() == ["open"]


# -- allocate and deallocate events ------------------------------------------------------------------
def gang_of(n: int, cpu: str = "1"):
    return cluster(
        nodes=[node("n1", cpu="4"), node("n2", cpu="4")],
        podgroups=[podgroup("job", min_member=n)],
        pods=[pod(f"job-{i}", cpu=cpu, group="job") for i in range(n)],
    )


def events(ext) -> list[str]:
    return [f"{verb} {body['task']['Name']}" for verb, body in ext.calls if verb in ("alloc", "dealloc")]


def refusing(*names: str, message: str = "no licence left"):
    return lambda body: (200, {"errorMessage": message if body["task"]["Name"] in names else ""})


def test_each_placed_pod_is_sent_to_allocate_with_its_node():
    with extender({}) as ext:
        _, result = run_session(
            gang_of(2), conf(ext.url, allocateFuncVerb="alloc", deallocateFuncVerb="dealloc")
        )
    assert sorted(placed(result)) == ["job-0", "job-1"]
    assert events(ext) == ["alloc job-0", "alloc job-1"]
    sent = {body["task"]["Name"]: body["task"] for verb, body in ext.calls}
    assert {name: (t["NodeName"], t["Status"]) for name, t in sent.items()} == {
        name: (node, "Allocated") for name, node in placed(result).items()
    }


def test_a_pod_the_extender_refuses_stays_pending_with_its_message_and_the_job_goes_on():
    """Volcano's allocate goes on with the job's next task after a failed Statement.Allocate."""
    snap = cluster(
        nodes=[node("n1", cpu="4"), node("n2", cpu="4")],
        podgroups=[podgroup("job", min_member=1)],
        pods=[pod(f"job-{i}", cpu="1", group="job") for i in range(3)],
    )
    with extender({"alloc": refusing("job-1")}) as ext:
        ssn, result = run_session(snap, conf(ext.url, allocateFuncVerb="alloc", deallocateFuncVerb="dealloc"))
    assert sorted(placed(result)) == ["job-0", "job-2"]
    # the refused allocation is undone: the extender hears its deallocate at once
    assert events(ext) == ["alloc job-0", "alloc job-1", "dealloc job-1", "alloc job-2"]
    job = ssn.jobs["default/job"]
    [message] = [m for uid, m in job.fit_errors.items() if job.tasks[uid].name == "job-1"]
    assert message.endswith("refused by extender: no licence left")


def test_a_gang_one_pod_short_is_discarded_and_its_pods_deallocated():
    verbs = {"allocateFuncVerb": "alloc", "deallocateFuncVerb": "dealloc"}
    with extender({"alloc": refusing("job-2")}) as ext:
        ssn, result = run_session(gang_of(3), conf(ext.url, actions="enqueue, allocate", **verbs))
    assert placed(result) == {}
    assert events(ext) == [
        "alloc job-0",
        "alloc job-1",
        "alloc job-2",
        "dealloc job-2",  # the refusal undone
        "dealloc job-1",  # the gang's statement discarded, newest first
        "dealloc job-0",
    ]
    assert "no licence left" in " ".join(ssn.jobs["default/job"].fit_errors.values())


def test_an_error_message_refuses_even_when_the_extender_is_ignorable():
    """As in Volcano's addEventHandler: only a failed call is ignorable, not an answer."""
    with extender({"alloc": refusing("job-0")}) as ext:
        _, result = run_session(gang_of(1), conf(ext.url, ignorable=True, allocateFuncVerb="alloc"))
    assert placed(result) == {}


def test_an_allocate_verb_that_is_down_refuses_unless_ignorable(caplog):
    with caplog.at_level(logging.WARNING, "caldera.plugins.extender"):
        ssn, result = run_session(gang_of(2), conf(closed_port(), allocateFuncVerb="alloc"))
        assert placed(result) == {}
        assert "refused by extender: alloc with extender at URL" in " ".join(
            ssn.jobs["default/job"].fit_errors.values()
        )
        _, result = run_session(gang_of(2), conf(closed_port(), ignorable=True, allocateFuncVerb="alloc"))
        assert sorted(placed(result)) == ["job-0", "job-1"]
    assert len(caplog.records) == 2  # one line per session


def test_a_failing_deallocate_changes_nothing():
    """Volcano reads no error of a deallocate event: the session goes on the same."""

    def run(dealloc_code: int):
        answers = {"alloc": refusing("job-2"), "dealloc": lambda body: (dealloc_code, {})}
        verbs = {"allocateFuncVerb": "alloc", "deallocateFuncVerb": "dealloc"}
        with extender(answers) as ext:
            _, result = run_session(gang_of(3), conf(ext.url, **verbs))
        return placed(result), events(ext)

    failing, ok = run(500), run(200)
    assert failing == ok
    assert ok[1].count("dealloc job-0") >= 1


def test_a_preemptor_refused_on_the_first_node_tried_takes_the_next():
    """Volcano's preempt: a failed Pipeline discards that node's evictions and tries the next node.
    A low-priority job (minimum one) runs two pods on each node; the extender refuses the urgent pod
    on whichever node preempt tries first: the victim is taken on the other."""
    tried: list[str] = []

    def alloc(body):
        if body["task"]["Name"] != "urgent-0":
            return 200, {}
        tried.append(body["task"]["NodeName"])
        return 200, {"errorMessage": "not there" if len(tried) == 1 else ""}

    with extender({"alloc": alloc}) as ext:
        text = conf(ext.url, allocateFuncVerb="alloc")
        sim = urgent_among_low(text, {"n1": "2", "n2": "2"}, ["n1", "n2", "n1", "n2"])
        evicted = [e.task.node_name for e in sim.cycle().evictions]
    assert len(tried) == 2 and tried[0] != tried[1]
    assert evicted == [tried[1]]
    # the eviction undone on the refused node is an allocate event of its victim (Volcano's unevict)
    sent = [(b["task"]["Name"][:-2], b["task"]["NodeName"], b["task"]["Status"]) for _, b in ext.calls]
    assert sent == [
        ("urgent", tried[0], "Pipelined"),
        ("low", tried[0], "Running"),
        ("urgent", tried[1], "Pipelined"),
    ]


# -- arguments -------------------------------------------------------------------------------------------
def test_the_allocate_and_deallocate_verbs_are_read_from_the_conf():
    text = conf("http://127.0.0.1:1", allocateFuncVerb="alloc", deallocateFuncVerb="dealloc")
    parsed = parse_conf(text, builtin_registry())
    args = next(p for t in parsed.tiers for p in t.plugins if p.name == "extender").arguments
    from caldera.plugins.extender import ExtenderPlugin

    verbs = ExtenderPlugin(args).verbs
    assert (verbs["allocateFunc"], verbs["deallocateFunc"]) == ("alloc", "dealloc")


def test_a_timeout_that_does_not_parse_leaves_volcanos_default(caplog):
    """Logged once, however many sessions build the plugin."""
    from caldera.plugins.extender import DEFAULT_TIMEOUT, ExtenderPlugin

    parsed = parse_conf(conf("http://127.0.0.1:1", timeout="soon"), builtin_registry())
    args = next(p for t in parsed.tiers for p in t.plugins if p.name == "extender").arguments
    with caplog.at_level(logging.WARNING, "caldera.plugins.extender"):
        plugin = ExtenderPlugin(args)
        ExtenderPlugin(args)
    assert plugin.client.timeout == DEFAULT_TIMEOUT
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("extender.httpTimeout 'soon' does not parse") and line.endswith("1.0s used")
    parsed = parse_conf(conf("http://127.0.0.1:1", timeout="100ms"), builtin_registry())
    args = next(p for t in parsed.tiers for p in t.plugins if p.name == "extender").arguments
    assert ExtenderPlugin(args).client.timeout == pytest.approx(0.1)
