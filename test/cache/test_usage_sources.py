"""The ``prometheus_adaptor`` and ``elasticsearch`` metrics sources (cache/usage.py): what each asks,
how each answer is read, and that an answer a source cannot read fails the poll like no answer (one
log line, the poll counted failed, the nodes keep their last values).

The servers here are caldera-sim's answers (hack/sim/usage.py) behind a small aiohttp app or a stand-in
API client, so that what is sent can be looked at; the e2e tests (test/e2e/test_usage.py) run the
same sources through the simulator's HTTP API."""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import REGISTRY

from caldera.cache.client import ApiError
from caldera.cache.store import ClusterCache
from caldera.cache.usage import (
    CustomMetricsSource,
    ElasticsearchSource,
    SourceError,
    UsagePoller,
    UsageSource,
)
from caldera.config.conf import ConfError, parse_conf
from caldera.config.metrics import MetricsConf, check_metrics
from caldera.framework.objects import Node, convert, parse_timestamp
from caldera.framework.usage import NodeUsage
from caldera.hack.scenario import node_dict
from caldera.hack.sim.usage import NodeLoad, custom_metrics_discovery
from caldera.scheduler.registry import builtin_registry

T = 1_800_000_000.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def cache_with(*names: str) -> ClusterCache:
    cache = ClusterCache()
    for name in names:
        cache.upsert_node(convert(Node, node_dict(name, cpu="8", memory="32Gi")))
    return cache


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """An HTTP server answering every request with ``handler``; its base URL."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


def failed_polls(source: str) -> float:
    value = REGISTRY.get_sample_value(
        "caldera_node_usage_polls_total", {"source": source, "result": "failed"}
    )
    return value or 0.0


async def assert_unreadable_answer_fails_the_poll(
    conf: MetricsConf, source: UsageSource, caplog: pytest.LogCaptureFixture
) -> None:
    """A poll on ``source`` fails: one warning, one failed poll counted, the node's last values kept."""
    cache = cache_with("a")
    cache.publish_usage({"a": NodeUsage(95, 20, T)}, 30.0, T)
    poller = UsagePoller(cache, None)
    before = failed_polls(conf.type)
    with caplog.at_level(logging.WARNING, logger="caldera.cache.usage"):
        assert await poller.poll_once(conf, source) is False
    await source.close()
    warnings = [r for r in caplog.records if r.name == "caldera.cache.usage"]
    assert len(warnings) == 1 and "failed" in warnings[0].message, [r.message for r in warnings]
    assert failed_polls(conf.type) == before + 1
    assert cache.node_usage == {"a": NodeUsage(95, 20, T)}


# -- elasticsearch ---------------------------------------------------------------------------------------
def es_conf(address: str, **settings: str) -> MetricsConf:
    conf = check_metrics({"type": "elasticsearch", "address": address, **settings})
    assert conf is not None
    return conf


async def test_elasticsearch_searches_each_node_as_volcano_does_and_reads_the_averages_in_percent():
    """The default index is metricbeat-* (metrics_client_elasticsearch_test.go,
    TestElasticsearchMetricsClientDefaultIndexName); the body is ``NodeMetricsAvg``'s query."""
    load = NodeLoad()
    load.set("a", 42.5, 61.0)
    asked: list[tuple[str, str, Any, str | None]] = []

    async def search(request: web.Request) -> web.Response:
        body = await request.json()
        asked.append((request.method, request.path, body, request.headers.get("Authorization")))
        status, answer = load.elasticsearch(request.path.split("/")[2], body)
        return web.json_response(answer, status=status)

    async with serving(search) as url:
        source = ElasticsearchSource(es_conf(url + "/es"))
        try:
            got = await source.fetch(["a", "unknown"])
        finally:
            await source.close()
    # "unknown" has no documents (averages null): it keeps what it had rather than looking idle
    assert set(got) == {"a"}
    assert (got["a"].cpu, got["a"].memory) == pytest.approx((42.5, 61.0))
    method, path, body, auth = next(
        a for a in asked if a[2]["query"]["bool"]["must"][1]["term"] == {"host.hostname": "a"}
    )
    assert (method, path, auth) == ("POST", "/es/metricbeat-*/_search", None)
    # NodeMetricsAvg's query (metrics_client_elasticsearch.go), as its JSON encoder writes it
    assert body == {
        "size": 0,
        "query": {
            "bool": {
                "must": [
                    {"range": {"@timestamp": {"gte": "now-10m", "lt": "now"}}},
                    {"term": {"host.hostname": "a"}},
                ]
            }
        },
        "aggs": {
            "cpu": {"avg": {"field": "host.cpu.usage"}},
            "mem": {"avg": {"field": "system.memory.actual.used.pct"}},
        },
    }


async def test_elasticsearch_index_hostname_field_and_credentials_come_from_the_conf():
    """TestElasticsearchMetricsClientCustomIndexName (metrics_client_elasticsearch_test.go), with the
    hostname field and credentials beside it."""
    load = NodeLoad()
    load.set("a", 10, 20)
    asked: list[tuple[str, Any, str | None]] = []

    async def search(request: web.Request) -> web.Response:
        body = await request.json()
        asked.append(
            (request.path, body["query"]["bool"]["must"][1]["term"], request.headers.get("Authorization"))
        )
        status, answer = load.elasticsearch(request.path.split("/")[1], body)
        return web.json_response(answer, status=status)

    async with serving(search) as url:
        source = ElasticsearchSource(
            es_conf(
                url,
                **{
                    "elasticsearch.index": "metricbeat-caldera-*",
                    "elasticsearch.hostnameFieldName": "host.name",
                    "elasticsearch.username": "volcano",
                    "elasticsearch.password": "s3cret",
                },
            )
        )
        try:
            got = await source.fetch(["a"])
        finally:
            await source.close()
    assert (got["a"].cpu, got["a"].memory) == pytest.approx((10.0, 20.0))
    basic = "Basic " + base64.b64encode(b"volcano:s3cret").decode()
    assert asked == [("/metricbeat-caldera-*/_search", {"host.name": "a"}, basic)]


async def test_elasticsearch_credentials_in_the_address_are_sent_as_basic_auth():
    seen: list[tuple[str, str | None]] = []

    async def search(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get("Authorization")))
        return web.json_response({"aggregations": {"cpu": {"value": 0.5}, "mem": {"value": None}}})

    async with serving(search) as url:
        source = ElasticsearchSource(es_conf(url.replace("http://", "http://volcano:p%40ss@") + "/es/"))
        try:
            got = await source.fetch(["a"])
        finally:
            await source.close()
    assert seen == [("/es/metricbeat-*/_search", "Basic " + base64.b64encode(b"volcano:p@ss").decode())]
    # an average over no document (null) is 0 % beside one that has a value, as Volcano decodes it
    assert (got["a"].cpu, got["a"].memory) == (50.0, 0.0)


@pytest.mark.parametrize(
    ("status", "answer"),
    [
        (200, b"<html>proxy error</html>"),
        (200, b'{"took": 1, "hits": {"total": {"value": 0}}}'),  # no aggregations
        (200, b'{"aggregations": {"cpu": {"value": "high"}, "mem": {"value": 0.2}}}'),
        (200, b'{"aggregations": {"cpu": {"value": 0.3}}}'),  # the mem average missing
        (404, b'{"error": {"type": "index_not_found_exception"}, "status": 404}'),
        (502, b'{"aggregations": {"cpu": {"value": 0.3}, "mem": {"value": 0.2}}}'),  # the status decides
        (
            200,
            b'{"aggregations": {"cpu": {"value": 0.3}, "mem": {"value": 0.2}}, "x": "'
            + b"a" * (1 << 20)
            + b'"}',
        ),
    ],
    ids=[
        "not-json",
        "no-aggregations",
        "not-a-number",
        "mem-missing",
        "error-status",
        "error-status-readable",
        "over-1MiB",
    ],
)
async def test_an_unreadable_elasticsearch_answer_fails_the_poll_and_keeps_the_last_values(
    status, answer, caplog
):
    """over-1MiB is TestElasticsearchMetricsClientNodeMetricsAvg_MaxBodySizeExceeded
    (metrics_client_elasticsearch_test.go): an answer over ``maxBodySize`` is an error."""

    async def search(request: web.Request) -> web.Response:
        return web.Response(body=answer, status=status, content_type="application/json")

    async with serving(search) as url:
        conf = es_conf(url)
        await assert_unreadable_answer_fails_the_poll(conf, ElasticsearchSource(conf), caplog)


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ({"elasticsearch.username": "volcano"}, "go together"),
        ({"elasticsearch.password": "s3cret"}, "go together"),
        (
            {"address": "http://u:p@es:9200", "elasticsearch.username": "v", "elasticsearch.password": "p"},
            "carries credentials",
        ),
    ],
)
def test_elasticsearch_credentials_that_would_not_be_sent_are_refused(section, error):
    import yaml

    metrics = {"type": "elasticsearch", "address": "http://es:9200", **section}
    text = yaml.safe_dump({"actions": "allocate", "tiers": [], "metrics": metrics})
    with pytest.raises(ConfError, match=error):
        parse_conf(text, builtin_registry())


# -- prometheus_adaptor ------------------------------------------------------------------------------------
class FakeApi:
    """The API server as the custom metrics source sees it: discovery of the group, then the two metrics
    (answered by caldera-sim's :class:`NodeLoad` unless ``answers`` overrides a path)."""

    def __init__(self, load: NodeLoad, nodes: list[str], versions: tuple[str, ...] = ("v1beta2", "v1beta1")):
        self.load = load
        self.nodes = nodes
        group = custom_metrics_discovery()["group"]
        offered = [v for v in group["versions"] if v["version"] in versions] or [
            {"groupVersion": "custom.metrics.k8s.io/v9", "version": v} for v in versions
        ]
        self.group = {**group, "versions": offered, "preferredVersion": offered[0]}
        self.answers: dict[str, bytes | ApiError] = {}
        self.asked: list[str] = []

    async def request(self, method: str, path: str, *, timeout: float = 30.0, **_: Any) -> bytes:
        assert method == "GET"
        self.asked.append(path)
        answer = self.answers.get(path)
        if isinstance(answer, ApiError):
            raise answer
        if answer is not None:
            return answer
        if path == "/apis/custom.metrics.k8s.io":
            return orjson.dumps(self.group)
        _, _, _, version, _, name, metric = path.split("/")
        status, body = self.load.custom_metrics(self.nodes, name, metric, version)
        if status != 200:
            raise ApiError(status, body.get("reason", ""), body.get("message", ""))
        return orjson.dumps(body)


def adaptor_source(api: FakeApi) -> CustomMetricsSource:
    return CustomMetricsSource(api)  # type: ignore[arg-type]


ADAPTOR = MetricsConf(type="prometheus_adaptor")


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
async def test_prometheus_adaptor_reads_volcanos_two_node_metrics_in_percent_with_their_timestamp(version):
    load = NodeLoad()
    load.set("a", 35, 45.5)
    load.set("not-in-the-cache", 99, 99)
    api = FakeApi(load, ["a", "b", "not-in-the-cache"], versions=(version,))
    got = await adaptor_source(api).fetch(["a", "b"])
    # "b" has no value: it keeps what it had; a node the cache does not hold is not taken
    assert set(got) == {"a"}
    assert (got["a"].cpu, got["a"].memory) == pytest.approx((35.0, 45.5))
    assert (
        abs(
            got["a"].time
            - parse_timestamp(
                load.custom_metrics(["a"], "a", "node_cpu_usage_avg", version)[1]["items"][0]["timestamp"]
            )
        )
        <= 1
    )
    assert api.asked == [
        "/apis/custom.metrics.k8s.io",
        f"/apis/custom.metrics.k8s.io/{version}/nodes/*/node_cpu_usage_avg",
        f"/apis/custom.metrics.k8s.io/{version}/nodes/*/node_memory_usage_avg",
    ]


async def test_prometheus_adaptor_discovers_the_version_again_only_after_a_failed_poll():
    load = NodeLoad()
    load.set("a", 10, 10)
    api = FakeApi(load, ["a"])
    source = adaptor_source(api)
    await source.fetch(["a"])
    await source.fetch(["a"])
    assert api.asked.count("/apis/custom.metrics.k8s.io") == 1
    api.answers["/apis/custom.metrics.k8s.io/v1beta2/nodes/*/node_memory_usage_avg"] = ApiError(
        503, "ServiceUnavailable"
    )
    with pytest.raises(SourceError, match="503"):
        await source.fetch(["a"])
    del api.answers["/apis/custom.metrics.k8s.io/v1beta2/nodes/*/node_memory_usage_avg"]
    await source.fetch(["a"])
    assert api.asked.count("/apis/custom.metrics.k8s.io") == 2


async def test_prometheus_adaptor_without_a_version_it_knows_fails_saying_so():
    api = FakeApi(NodeLoad(), ["a"], versions=("v2",))
    with pytest.raises(SourceError, match="no known version"):
        await adaptor_source(api).fetch(["a"])


CPU_PATH = "/apis/custom.metrics.k8s.io/v1beta2/nodes/*/node_cpu_usage_avg"


@pytest.mark.parametrize(
    "answer",
    [
        b"<html>bad gateway</html>",
        b'{"kind": "Status", "status": "Failure"}',  # no items
        b'{"items": [{"describedObject": {"name": "a"}, "value": "lots", "timestamp": "2026-01-01T00:00:00Z"}]}',
        b'{"items": [{"describedObject": {"name": "a"}, "value": "500m"}]}',  # no timestamp
        b'{"items": [{"value": "500m", "timestamp": "2026-01-01T00:00:00Z"}]}',  # no object
        ApiError(404, "NotFound", "the server could not find the metric node_cpu_usage_avg for nodes"),
    ],
    ids=["not-json", "no-items", "bad-quantity", "no-timestamp", "no-object", "metric-not-served"],
)
async def test_an_unreadable_custom_metrics_answer_fails_the_poll_and_keeps_the_last_values(answer, caplog):
    load = NodeLoad()
    load.set("a", 10, 10)
    api = FakeApi(load, ["a"])
    api.answers[CPU_PATH] = answer
    await assert_unreadable_answer_fails_the_poll(ADAPTOR, adaptor_source(api), caplog)


async def test_an_empty_metric_list_is_no_news_for_any_node():
    api = FakeApi(NodeLoad(), ["a"])
    api.answers[CPU_PATH] = b'{"kind": "MetricValueList", "items": null}'
    assert await adaptor_source(api).fetch(["a"]) == {}
