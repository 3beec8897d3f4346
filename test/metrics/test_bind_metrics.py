"""The series a scrape shows after binds: the binder and the cycle observer count every bound and
failed pod, and time each bound one, in the metrics Volcano's dashboards and ours read. Read through
prometheus_client's public exposition (``generate_latest``), as /metrics serves it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.cache.store import ClusterCache
from caldera.framework.result import Placement, SessionResult
from caldera.hack.scenario import gang, load, node
from caldera.scheduler.binder import Binder
from caldera.scheduler.debug import Observatory

BIND_DURATION = "caldera_bind_duration_seconds"
TASK_LATENCY = "volcano_task_scheduling_latency_milliseconds"
BINDS = "caldera_binds"


def scrape() -> dict[str, tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]]:
    """Each family of the exposition: (help, {(sample name, labels): value})."""
    text = generate_latest(REGISTRY).decode()
    return {
        family.name: (
            family.documentation,
            {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples},
        )
        for family in text_string_to_metric_families(text)
    }


def value(families, family: str, sample: str, **labels: str) -> float:  # type: ignore[no-untyped-def]
    return families[family][1].get((sample, tuple(sorted(labels.items()))), 0.0)


def bucket_bounds(families, family: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [dict(labels)["le"] for (name, labels) in families[family][1] if name == f"{family}_bucket"]


@pytest.fixture
async def api() -> AsyncIterator[ApiClient]:
    """Binds every pod but ``g-2``, which is not found."""

    async def bind(request: web.Request) -> web.Response:
        if request.match_info["name"] == "g-2":
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)
        return web.json_response({"kind": "Status", "code": 201}, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", bind)
    async with TestServer(app, host="127.0.0.1") as server:
        client = ApiClient(ClusterConfig(host=str(server.make_url("")).rstrip("/")))
        yield client
        await client.close()


async def test_a_scrape_after_binds_counts_and_times_each_bound_pod(api: ApiClient) -> None:
    cache = ClusterCache()
    pg, pods = gang("g", 3)
    load(cache, nodes=[node("n1", cpu="64")], podgroups=[pg], pods=pods)
    placements = [Placement(cache.tasks[p.metadata.uid], "n1") for p in pods]
    for p in placements:
        p.task.creation = time.time() - 3.0  # created three seconds before it is bound
    result = SessionResult(placements=placements)
    cache.apply(result)
    observatory = Observatory()
    before = scrape()

    observatory.on_cycle(result, 0.01, None)  # the cycle hands its placements over
    binder = Binder(api, cache, observer=observatory.bind_observer(None))
    binder.start()
    binder.bind(placements)
    await binder.drain(10)
    after = scrape()

    def grew(family: str, sample: str, **labels: str) -> float:
        return value(after, family, sample, **labels) - value(before, family, sample, **labels)

    assert grew(BINDS, "caldera_binds_total", result="bound") == 2
    assert grew(BINDS, "caldera_binds_total", result="failed") == 1
    # Both histograms time the two bound pods only.
    assert grew(BIND_DURATION, f"{BIND_DURATION}_count") == 2
    assert 0 < grew(BIND_DURATION, f"{BIND_DURATION}_sum") < 10
    assert grew(BIND_DURATION, f"{BIND_DURATION}_bucket", le="10.0") == 2
    assert grew(TASK_LATENCY, f"{TASK_LATENCY}_count") == 2
    assert 2 * 3000 <= grew(TASK_LATENCY, f"{TASK_LATENCY}_sum") < 2 * 13000
    # About 3,000 ms: above Volcano's 2,560 ms bucket, within the 5,120 ms one (or, on a very slow
    # machine, a later one).
    assert grew(TASK_LATENCY, f"{TASK_LATENCY}_bucket", le="2560.0") == 0
    assert grew(TASK_LATENCY, f"{TASK_LATENCY}_bucket", le="20480.0") == 2


def test_the_per_bind_series_keep_their_names_help_and_buckets() -> None:
    """What dashboards query: Volcano's task latency with its ExponentialBuckets(5, 2, 15)
    (pkg/scheduler/metrics/metrics.go, taskSchedulingLatency), and Caldera's own bind series."""
    families = scrape()
    assert families[TASK_LATENCY][0] == (
        "Task scheduling latency in milliseconds (task created to task bound to a node)."
    )
    assert bucket_bounds(families, TASK_LATENCY) == [f"{5.0 * 2**i}" for i in range(15)] + ["+Inf"]
    assert families[BIND_DURATION][0] == "From a placement's hand-over to the binder to its pod being bound."
    assert bucket_bounds(families, BIND_DURATION) == [
        "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
        "1.0", "2.5", "5.0", "10.0", "30.0", "+Inf",
    ]  # fmt: skip
    assert families[BINDS][0] == "Bind requests finished, by result (bound, failed)."
