"""/metrics after scripted cycles: Volcano's names and labels, values from the scenario, and the
series of deleted queues and jobs gone."""

import aiohttp
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from caldera.config.conf import parse_conf
from caldera.framework.result import SessionReport, SessionResult
from caldera.hack.scenario import cluster, gang, node, pod, podgroup, queue
from caldera.metrics.cycle import CycleMetrics, bind_failure_kind
from caldera.scheduler.debug import DebugApi, Observatory
from caldera.scheduler.http import HttpServer
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


class _Fixed:
    def __init__(self, snap):
        self.snap = snap

    def snapshot(self):
        return self.snap

    def apply(self, result):
        return None


def cycle(snap):
    """One cycle as the binary runs it (timings and explanations included)."""
    registry = builtin_registry()
    conf = parse_conf(CONF, registry)
    result, error = SchedulerLoop(_Fixed(snap), lambda: conf, registry, RecordingBinder()).decide()
    assert error is None
    return result


async def scrape(server: HttpServer) -> dict[tuple[str, tuple], float]:
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{server.port}/metrics") as resp:
            text = await resp.text()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def series(samples, name):
    """This test's series of a metric (other tests in the process export their own jobs and queues)."""
    return {
        labels: v
        for (n, labels), v in samples.items()
        if n == name and not any(k in ("job_id", "queue_name") and "mq-" not in v for k, v in labels)
    }


async def test_queue_job_and_unschedulable_series_follow_the_cluster():
    obs = Observatory()
    server = HttpServer("127.0.0.1:0", lambda: (True, "ok"), debug_api=DebugApi(obs))
    await server.start()
    try:
        qa = queue("mq-a", weight=3, capability={"cpu": "10", "memory": "64Gi"})
        qb = queue("mq-b", weight=1)
        run_pg, run_pods = gang("mq-run", 2, cpu="2", queue="mq-a")
        stuck_pg, stuck_pods = gang("mq-stuck", 3, cpu="6", queue="mq-b")
        nodes = [node("n1", cpu="8", memory="32Gi"), node("n2", cpu="8", memory="32Gi")]
        snap = cluster(nodes=nodes, pods=run_pods + stuck_pods, podgroups=[run_pg, stuck_pg], queues=[qa, qb])
        obs.on_cycle(cycle(snap), 0.01, None)
        got = await scrape(server)

        assert series(got, "volcano_queue_weight")[(("queue_name", "mq-a"),)] == 3
        assert series(got, "volcano_queue_weight")[(("queue_name", "mq-b"),)] == 1
        # mq-run's two 2-cpu pods were allocated this cycle
        assert series(got, "volcano_queue_allocated_milli_cpu")[(("queue_name", "mq-a"),)] == 4000
        assert series(got, "volcano_queue_capacity_milli_cpu")[(("queue_name", "mq-a"),)] == 10000
        assert series(got, "volcano_queue_capacity_memory_bytes")[(("queue_name", "mq-a"),)] == 64 * 2**30
        assert (("queue_name", "mq-b"),) not in series(got, "volcano_queue_capacity_milli_cpu")
        assert series(got, "volcano_queue_request_milli_cpu")[(("queue_name", "mq-b"),)] == 18000
        assert set(series(got, "volcano_queue_share")) >= {
            (("queue_name", "mq-a"),),
            (("queue_name", "mq-b"),),
        }
        assert series(got, "volcano_unschedule_task_count") == {(("job_id", "default/mq-stuck"),): 3}
        assert got[("volcano_unschedule_job_count", ())] == 1
        # dominant share of mq-run: 4 of 16 cpu
        assert series(got, "volcano_job_share")[(("job_id", "mq-run"), ("job_ns", "default"))] == 0.25
        assert series(got, "volcano_namespace_share")[(("namespace_name", "default"),)] == 0.25
        assert got[("volcano_schedule_attempts_total", (("result", "scheduled"),))] >= 2
        assert ("volcano_action_scheduling_latency_milliseconds_count", (("action", "allocate"),)) in got
        assert (
            "volcano_plugin_scheduling_latency_milliseconds_count",
            (("OnSession", "OnSessionOpen"), ("plugin", "gang")),
        ) in got
        assert got[("volcano_open_session_duration_milliseconds_count", ())] >= 1

        # the debug API sees the same cycle
        queues = {q["name"]: q for q in server.debug_api.queues()["queues"]}
        assert queues["mq-a"]["weight"] == 3 and queues["mq-a"]["allocated"]["cpu"] == 4.0
        assert queues["mq-a"]["capability"] == {"cpu": 10.0, "memory": 64 * 2**30}
        jobs = server.debug_api.jobs(state="pending", queue="mq-b")
        assert jobs["total"] == 1 and "Insufficient cpu" in jobs["jobs"][0]["reason"]

        # queue mq-b and its job are deleted: their series go, mq-a's stay
        snap = cluster(nodes=nodes, pods=run_pods, podgroups=[run_pg], queues=[qa])
        obs.on_cycle(cycle(snap), 0.01, None)
        got = await scrape(server)
        for name in (
            "volcano_queue_weight",
            "volcano_queue_share",
            "volcano_queue_overused",
            "volcano_queue_allocated_milli_cpu",
            "volcano_queue_request_milli_cpu",
            "volcano_queue_deserved_memory_bytes",
            "volcano_queue_inqueue_milli_cpu",
        ):
            assert (("queue_name", "mq-b"),) not in series(got, name), name
            assert (("queue_name", "mq-a"),) in series(got, name), name
        assert series(got, "volcano_unschedule_task_count") == {}
        assert got[("volcano_unschedule_job_count", ())] == 0

        # and mq-run is deleted too
        obs.on_cycle(cycle(cluster(nodes=nodes, queues=[qa])), 0.01, None)
        got = await scrape(server)
        assert not any(dict(k).get("job_id") == "mq-run" for k in series(got, "volcano_job_share"))
        assert (("namespace_name", "default"),) not in series(got, "volcano_namespace_share")
    finally:
        await server.stop()


async def test_failed_cycles_and_bind_failures_are_counted():
    metrics = CycleMetrics()
    before_failed = _value("caldera_cycles_failed_total")
    metrics.observe(None, 0.01, RuntimeError("boom"))
    assert _value("caldera_cycles_failed_total") == before_failed + 1
    pg, pods = gang("bf", 1)
    result = cycle(cluster(nodes=[node("n1")], pods=pods, podgroups=[pg]))
    metrics.observe(result, 0.01, None)
    task = result.placements[0].task
    before = _value("caldera_bind_failures_total", reason="conflict")
    metrics.bind_failed(task, "409 Conflict: pod already bound")
    assert _value("caldera_bind_failures_total", reason="conflict") == before + 1
    assert task.uid not in metrics.handed
    assert bind_failure_kind("no answer from the API server (timeout: x)") == "unreachable"
    assert bind_failure_kind("could not annotate the pod before binding: 404") == "annotate"
    assert bind_failure_kind("503 Service Unavailable: busy") == "server_error"


def _value(name, **labels):
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_preemption_victims_and_attempts():
    from caldera.framework.result import Eviction, SessionReport, SessionResult

    metrics = CycleMetrics()
    result = SessionResult(report=SessionReport(preempt_attempts=2))
    pg, pods = gang("pv", 2)
    snap = cluster(nodes=[node("n1")], pods=pods, podgroups=[pg])
    tasks = list(next(iter(snap.jobs.values())).tasks.values())
    result.evictions = [Eviction(tasks[0], "preempt"), Eviction(tasks[1], "reclaim")]
    before = _value("volcano_total_preemption_attempts")
    metrics.preemption_attempts = int(before)
    metrics.observe(result, 0.01, None)
    assert _value("volcano_pod_preemption_victims") == 1
    assert _value("volcano_total_preemption_attempts") == before + 2


def test_pod_and_podgroup_helpers_still_import():
    assert podgroup("x").metadata.name == "x" and pod("y").metadata.name == "y"


def test_a_jobs_share_gauge_follows_its_share_and_goes_with_the_job():
    """Cycle by cycle: a share that moves is set again, one that stays keeps its value, a job that
    leaves the shares takes its series with it."""
    pg_a, pods_a = gang("share-a", 1)
    pg_b, pods_b = gang("share-b", 1)
    jobs = cluster(nodes=[node("n1")], pods=pods_a + pods_b, podgroups=[pg_a, pg_b]).jobs
    metrics = CycleMetrics()

    def observe(shares):
        metrics.observe(SessionResult(jobs=jobs, report=SessionReport(job_shares=shares)), 0.01, None)

    def share(name):
        return _value("volcano_job_share", job_id=name, job_ns="default")

    observe({"default/share-a": 0.25, "default/share-b": 0.5})
    assert (share("share-a"), share("share-b")) == (0.25, 0.5)
    observe({"default/share-a": 0.25, "default/share-b": 0.75})
    assert (share("share-a"), share("share-b")) == (0.25, 0.75)
    observe({"default/share-b": 0.75, "default/not-a-job": 0.5})
    assert REGISTRY.get_sample_value("volcano_job_share", {"job_id": "share-a", "job_ns": "default"}) is None
    assert (
        REGISTRY.get_sample_value("volcano_job_share", {"job_id": "not-a-job", "job_ns": "default"}) is None
    )
    assert share("share-b") == 0.75
