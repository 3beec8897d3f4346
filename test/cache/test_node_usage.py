"""Nodes' load in the cache (cache/usage.py): what a poll publishes, what a failing source leaves, when
the cycle loop is woken, and that nothing runs while the conf has no metrics section; the conf's
``metrics:`` section as config/metrics.py reads it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

import pytest
from prometheus_client import REGISTRY

from caldera.cache.store import ClusterCache
from caldera.cache.usage import PrometheusSource, SourceError, UsagePoller, cpu_query, memory_query
from caldera.config.conf import ConfError, parse_conf
from caldera.config.metrics import MetricsConf, check_metrics
from caldera.framework.objects import Node, convert
from caldera.framework.usage import NodeUsage
from caldera.hack.scenario import node_dict
from caldera.hack.sim.usage import NodeLoad
from caldera.scheduler.registry import builtin_registry

T = 1_800_000_000.0


def cache_with(*names: str) -> ClusterCache:
    cache = ClusterCache()
    for name in names:
        cache.upsert_node(convert(Node, node_dict(name, cpu="8", memory="32Gi")))
    return cache


def test_a_poll_publishes_and_moves_the_revision_only_when_a_value_changes():
    cache = cache_with("a", "b")
    assert cache.usage_view(T) is None and cache.snapshot().node_usage is None
    start = cache.revision
    cache.publish_usage({"a": NodeUsage(10, 20, T)}, 30.0, T)
    first = cache.revision
    assert first > start
    view = cache.usage_view(T)
    assert view is not None and view.fresh("a") == NodeUsage(10, 20, T) and view.fresh("b") is None
    # the same values measured again: no new decision to make
    cache.publish_usage({"a": NodeUsage(10, 20, T + 30)}, 30.0, T + 30)
    assert cache.revision == first
    cache.publish_usage({"a": NodeUsage(90, 20, T + 60)}, 30.0, T + 60)
    assert cache.revision > first
    # a node the source did not answer for keeps what it had
    cache.publish_usage({"b": NodeUsage(5, 5, T + 90)}, 30.0, T + 90)
    assert cache.usage_view(T + 90).fresh("a") == NodeUsage(90, 20, T + 60)  # type: ignore[union-attr]


def test_data_that_ages_past_five_minutes_is_not_used_and_wakes_the_loop():
    cache = cache_with("a")
    cache.publish_usage({"a": NodeUsage(95, 20, T)}, 30.0, T)
    assert cache.usage_view(T + 300).fresh("a") is not None  # type: ignore[union-attr]
    assert cache.usage_view(T + 301).fresh("a") is None  # type: ignore[union-attr]
    before = cache.revision
    cache.refresh_usage_staleness(T + 200)
    assert cache.revision == before
    cache.refresh_usage_staleness(T + 301)
    assert cache.revision == before + 1


class Failing:
    def __init__(self) -> None:
        self.calls = 0

    async def fetch(self, nodes: Collection[str]) -> dict[str, NodeUsage]:
        self.calls += 1
        raise SourceError("connection refused")

    async def close(self) -> None:
        return None


async def test_a_failing_source_is_one_log_line_and_a_count_and_nodes_keep_their_values(caplog):
    cache = cache_with("a")
    cache.publish_usage({"a": NodeUsage(95, 20, T)}, 30.0, T)
    conf = MetricsConf(type="prometheus", address="http://127.0.0.1:9")
    poller = UsagePoller(cache, None)
    before = (
        REGISTRY.get_sample_value(
            "caldera_node_usage_polls_total", {"source": "prometheus", "result": "failed"}
        )
        or 0.0
    )
    source = Failing()
    with caplog.at_level(logging.WARNING, logger="caldera.cache.usage"):
        assert await poller.poll_once(conf, source) is False
        assert await poller.poll_once(conf, source) is False
    assert [r.message for r in caplog.records if "failed" in r.message][:1] and len(caplog.records) == 1
    after = REGISTRY.get_sample_value(
        "caldera_node_usage_polls_total", {"source": "prometheus", "result": "failed"}
    )
    assert after == before + 2
    assert cache.node_usage == {"a": NodeUsage(95, 20, T)}


async def test_no_task_runs_while_the_conf_has_no_metrics_section_and_one_follows_a_reload():
    cache = cache_with("a")
    poller = UsagePoller(cache, None)
    default = parse_conf('actions: "allocate"\ntiers:\n- plugins:\n  - name: usage\n', builtin_registry())
    poller.configure(default.metrics)
    assert default.metrics is None and poller.task is None
    poller.configure(MetricsConf(type="prometheus", address="http://127.0.0.1:1", interval=0.05))
    assert poller.task is not None
    poller.configure(None)  # the metrics section removed again: polling stops, the data goes
    await asyncio.sleep(0)
    assert poller.task is None and cache.usage_view(T) is None
    await poller.stop()


async def test_the_prometheus_source_asks_volcanos_queries_and_reads_the_first_sample():
    from aiohttp import web

    load = NodeLoad()
    load.set("a", 42.5, 61.0)
    asked: list[str] = []

    async def query(request: web.Request) -> web.Response:
        form = await request.post()
        asked.append(str(form["query"]))
        status, body = load.prometheus(str(form["query"]), str(form.get("time")))
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_post("/prom/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    source = PrometheusSource(MetricsConf(type="prometheus", address=f"http://127.0.0.1:{port}/prom"))
    try:
        got = await source.fetch(["a", "unknown"])
    finally:
        await source.close()
        await runner.cleanup()
    assert set(got) == {"a"}  # Prometheus knows nothing of "unknown": it keeps what it had
    assert (got["a"].cpu, got["a"].memory) == (42.5, 61.0)
    assert cpu_query("a") in asked and memory_query("a") in asked
    assert cpu_query("a") == (
        'avg_over_time(clamp_min(100 - (avg by (instance) (rate(node_cpu_seconds_total{mode="idle",'
        'instance="a"}[5m])) * 100), 0)[10m:30s])'
    )


# -- the conf's metrics: section ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("section", "error"),
    [
        ({"address": "http://p"}, "'type' is missing"),
        ({"type": "graphite"}, "unknown type 'graphite'"),
        ({"type": "prometheus"}, "needs an 'address'"),
        ({"type": "prometheus", "address": "http://p", "interval": "soon"}, "'interval' not a duration"),
        ({"type": "prometheus", "address": "http://p", "interval": "0s"}, "must be positive"),
        ({"type": "prometheus", "address": "http://p", "elasticsearch.index": "x"}, "unknown key"),
        ({"type": "metrics_server", "address": "http://p"}, "reads no 'address'"),
        ({"type": "prometheus", "address": {"nested": 1}}, "must be a string"),
    ],
)
def test_an_unusable_metrics_section_is_refused_saying_why(section, error):
    import yaml

    text = yaml.safe_dump({"actions": "allocate", "tiers": [], "metrics": section})
    with pytest.raises(ConfError, match=error):
        parse_conf(text, builtin_registry())


def test_metrics_values_are_read_as_volcano_reads_them():
    conf = check_metrics(
        {
            "type": "prometheus",
            "address": "https://p:9090",
            "interval": "1m30s",
            "tls.insecureSkipVerify": True,
        }
    )
    assert conf == MetricsConf(
        type="prometheus",
        address="https://p:9090",
        interval=90.0,
        insecure_skip_verify=True,
        values={
            "type": "prometheus",
            "address": "https://p:9090",
            "interval": "1m30s",
            "tls.insecureSkipVerify": "true",
        },
    )
    assert check_metrics({"type": "metrics_server"}) == MetricsConf(
        type="metrics_server", values={"type": "metrics_server"}
    )
    assert check_metrics(None) is None and check_metrics({}) is None
