"""Nodes' real load from the conf's ``metrics:`` source, polled off the cycle's path.

Volcano's cache starts ``GetMetricsData`` every ``metrics.interval`` (pkg/scheduler/cache/cache.go):
it builds a client for the conf's type (``source.NewMetricsClient``), asks it for every node's cpu and
memory usage averaged over ``NODE_METRICS_PERIOD`` (``NodesMetricsAvg``, 60 s at most) and stores one
``NodeUsage`` per node (``setMetricsData``); when the client fails, the nodes keep what they had, and
the usage plugin stops using a node's data once it is older than ``MetricsActiveTime`` (5 minutes).

Here :class:`UsagePoller` is that loop, an asyncio task that exists only while the running conf has a
``metrics:`` section (the default conf has none: nothing is polled and no task runs). Each poll asks
the source with a time limit; a failed poll is one log line (when the source starts failing, and
when it recovers) and a count in ``caldera_node_usage_polls_total{result="failed"}``, and the next is
tried after a back-off (the interval doubled per failure, at most 5 minutes). What a poll brings is
published into the cache as a new immutable mapping (``UsageCache.publish_usage``): the cache's
revision moves (so the loop runs a cycle) only when a node's cpu or memory changed, or when a node's
data went stale since the last poll.

The sources, one per ``type`` of pkg/scheduler/metrics/source/metrics_client.go (``NewMetricsClient``)
and Caldera's own for metrics.k8s.io; those that ask node by node share :func:`each_node`, those with a
server of their own :class:`HttpSource` (one aiohttp session; answers of at most 1 MiB, the
``maxBodySize`` of metrics_client_elasticsearch.go):

- :class:`PrometheusSource` (``metrics_client_prometheus.go``, ``PrometheusMetricsClient``): Volcano's
  two instant queries per node on ``/api/v1/query`` (POST, form encoded, as client_golang's ``Query``
  sends them; GET when the server answers 405), cpu ``avg_over_time(clamp_min(100 - (avg by
  (instance) (rate(node_cpu_seconds_total{mode="idle", instance="NODE"}[5m])) * 100), 0)[10m:30s])``
  and memory ``100*avg_over_time(((1-node_memory_MemAvailable_bytes{instance="NODE"}/node_memory_
  MemTotal_bytes{instance="NODE"}))[10m:30s])``; the first sample of a vector answer is the value.
  Unlike Volcano, which stores 0 % with a fresh time when a query fails or has no data (so a node
  Prometheus does not know looks idle), a node without an answer keeps what it had here, and goes
  stale;
- :class:`CustomMetricsSource` (``metrics_client_prometheus_adapt.go``, ``KMetricsClient``): type
  ``prometheus_adaptor``, the metrics ``node_cpu_usage_avg`` and ``node_memory_usage_avg`` (rules the
  prometheus-adapter is configured with) for every node at once, ``GET /apis/custom.metrics.k8s.io/
  VERSION/nodes/*/METRIC`` through the API server (k8s.io/metrics ``rootScopedMetrics.GetForObjects``;
  VERSION found through discovery, v1beta2 or v1beta1), each ``MetricValue``'s ``value`` (a fraction)
  times 100 for the node its ``describedObject`` names, timed by its ``timestamp``. Either metric's
  failure fails the poll, as in Volcano; a node the adapter leaves out keeps what it had (Volcano
  stores a zero time for it: its data is not used);
- :class:`ElasticsearchSource` (``metrics_client_elasticsearch.go``, ``ElasticsearchMetricsClient``):
  per node one search, ``POST ADDRESS/INDEX/_search`` (``elasticsearch.index``, default
  ``metricbeat-*``; basic auth from ``elasticsearch.username`` and ``elasticsearch.password``, or from
  the address) of the documents of the last 10 minutes whose ``elasticsearch.hostnameFieldName``
  (default ``host.hostname``) is the node, averaging metricbeat's ``host.cpu.usage`` and
  ``system.memory.actual.used.pct`` (fractions, times 100). Unlike Volcano, which decodes whatever
  comes back (an error status or an average over no document reads as 0 %), an error status fails the
  poll and a node without documents keeps what it had;
- :class:`MetricsServerSource` (Caldera's ``metrics_server``): ``GET /apis/metrics.k8s.io/v1beta1/nodes``
  through the API server (metrics-server's NodeMetrics): usage over allocatable in percent, as
  ``kubectl top node`` shows it, averaged over the samples of the last 10 minutes this poller saw
  (metrics-server reports only its last window), timed by the sample's ``timestamp``.

An answer a source cannot read fails the poll like no answer: one log line, a failed poll counted, the
nodes keep their last values.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import time
import urllib.parse
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp
from prometheus_client import Counter, Gauge

from caldera.cache.state import CacheState
from caldera.cache.supervise import stop_workers, supervise
from caldera.config.metrics import ELASTICSEARCH, METRICS_SERVER, PROMETHEUS, PROMETHEUS_ADAPTOR, MetricsConf
from caldera.framework.quantity import QuantityError, parse_bytes, parse_cpu_millis, parse_quantity
from caldera.framework.usage import NODE_METRICS_PERIOD, NODE_METRICS_PERIOD_SECONDS, NodeUsage, UsageView

if TYPE_CHECKING:
    from caldera.cache.client import ApiClient

log = logging.getLogger("caldera.cache.usage")

POLLS = Counter(
    "caldera_node_usage_polls",
    "Polls of the conf's metrics source for nodes' load, by source type and result (ok, failed).",
    ["source", "result"],
)
STALE_NODES = Gauge(
    "caldera_node_usage_stale_nodes",
    "Nodes whose load data is older than 5 minutes (or missing) at the last poll: the usage plugin "
    "does not use it.",
)
#: ``NodesMetricsAvg``'s context (cache.go ``GetMetricsData``: 60 s)
POLL_TIMEOUT = 60.0
REQUEST_TIMEOUT = 10.0
MAX_BACKOFF = 300.0
#: queries in flight at once (Volcano asks node after node)
CONCURRENCY = 8
#: ``maxBodySize`` (metrics_client_elasticsearch.go): a longer answer is an error
MAX_ANSWER = 1 << 20

#: metrics_client_elasticsearch.go: ``esHostNameField``, ``esCPUUsageField``, ``esMemUsageField``, and
#: ``NewElasticsearchMetricsClient``'s default index
ES_HOSTNAME_FIELD = "host.hostname"
ES_CPU_FIELD = "host.cpu.usage"
ES_MEMORY_FIELD = "system.memory.actual.used.pct"
ES_DEFAULT_INDEX = "metricbeat-*"
#: metrics_client_prometheus_adapt.go: ``CustomNodeCPUUsageAvg``, ``CustomNodeMemUsageAvg``
CUSTOM_CPU_METRIC = "node_cpu_usage_avg"
CUSTOM_MEMORY_METRIC = "node_memory_usage_avg"
CUSTOM_METRICS_GROUP = "custom.metrics.k8s.io"
#: ``MetricVersions`` of k8s.io/metrics' custom_metrics client, in its order
CUSTOM_METRICS_VERSIONS = ("v1beta2", "v1beta1")

CPU_QUERY = (
    "avg_over_time(clamp_min(100 - (avg by (instance) "
    '(rate(node_cpu_seconds_total{{mode="idle",instance="{node}"}}[5m])) * 100), 0)[{period}:30s])'
)
MEMORY_QUERY = (
    '100*avg_over_time(((1-node_memory_MemAvailable_bytes{{instance="{node}"}}'
    '/node_memory_MemTotal_bytes{{instance="{node}"}}))[{period}:30s])'
)


def cpu_query(node: str) -> str:
    """``NodeMetricsAvg``'s ``cpuQueryStr`` for one node."""
    return CPU_QUERY.format(node=node, period=NODE_METRICS_PERIOD)


def memory_query(node: str) -> str:
    """``NodeMetricsAvg``'s ``memQueryStr`` for one node."""
    return MEMORY_QUERY.format(node=node, period=NODE_METRICS_PERIOD)


class SourceError(Exception):
    """The source did not answer usably (no connection, an error status, an unreadable answer)."""


class UsageSource(Protocol):
    async def fetch(self, nodes: Collection[str]) -> dict[str, NodeUsage]:
        """Usage of the nodes named, those the source knows; :class:`SourceError` when it fails."""
        ...

    async def close(self) -> None: ...


# -- the cache's side ------------------------------------------------------------------------------------
class UsageCache(CacheState):
    """The nodes' usage as the cache holds it (``node_usage``: a mapping never changed once made)."""

    def publish_usage(self, fetched: Mapping[str, NodeUsage], interval: float, now: float) -> None:
        """``setMetricsData``: the nodes fetched take their new values, the others keep theirs."""
        with self._lock:
            old = self.node_usage or {}
            changed = self.node_usage is None or self._usage_interval != interval
            merged = dict(old)
            for name, usage in fetched.items():
                before = old.get(name)
                if before is None or (before.cpu, before.memory) != (usage.cpu, usage.memory):
                    changed = True
                merged[name] = usage
            self.node_usage = merged
            self._usage_interval = interval
            if changed:
                self._usage_revision += 1
                self.revision += 1
            self._note_staleness(now, changed)

    def refresh_usage_staleness(self, now: float) -> None:
        """After a poll that brought nothing: nodes whose data aged past 5 minutes change decisions."""
        with self._lock:
            if self.node_usage is not None:
                self._note_staleness(now, False)

    def _note_staleness(self, now: float, changed: bool) -> None:
        view = UsageView(self.node_usage or {}, now, self._usage_revision, self._usage_interval)
        fresh = view.token()[1]
        STALE_NODES.set(len(self.nodes) - fresh)
        if fresh != self._usage_fresh and not changed:
            self.revision += 1
        self._usage_fresh = fresh

    def clear_usage(self) -> None:
        """The conf no longer names a metrics source: sessions see no usage at all."""
        with self._lock:
            if self.node_usage is not None:
                self.node_usage = None
                self._usage_revision += 1
                self._usage_fresh = -1
                self.revision += 1
                STALE_NODES.set(0)

    def usage_view(self, now: float) -> UsageView | None:
        """What a snapshot taken at ``now`` carries (None: no metrics source configured)."""
        usage = self.node_usage
        if usage is None:
            return None
        return UsageView(usage, now, self._usage_revision, self._usage_interval)

    def node_allocatable(self) -> dict[str, tuple[float, float]]:
        """Every node's allocatable (cpu millicores, memory bytes), for sources that give absolute usage."""
        with self._lock:
            return {name: (n.allocatable.cpu, n.allocatable.memory) for name, n in self.nodes.items()}


# -- the sources -----------------------------------------------------------------------------------------
async def each_node(
    nodes: Collection[str], ask: Callable[[str], Awaitable[tuple[float | None, float | None]]]
) -> dict[str, NodeUsage]:
    """The sources that ask about one node at a time (Volcano asks node after node; here at most
    :data:`CONCURRENCY` at once): each node's (cpu %, memory %); a node the source knows nothing of
    (both None) keeps what it had, one value missing is 0 % as in Volcano. Any node's failure fails
    the poll, as one error ends Volcano's ``NodesMetricsAvg``."""
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(name: str) -> tuple[str, float | None, float | None]:
        async with limit:
            return name, *await ask(name)

    answers = await asyncio.gather(*(one(n) for n in nodes))
    now = time.time()  # ``nodeMetrics.MetricsTime = time.Now()`` once the node's answers are in
    return {
        name: NodeUsage(cpu or 0.0, memory or 0.0, now)
        for name, cpu, memory in answers
        if cpu is not None or memory is not None
    }


class HttpSource:
    """What the sources asking a server of their own share (Prometheus, Elasticsearch): one aiohttp
    session, :data:`REQUEST_TIMEOUT` per request, the server's certificate checked unless
    ``tls.insecureSkipVerify`` is ``"true"``, answers read as JSON up to :data:`MAX_ANSWER` bytes."""

    def __init__(self, conf: MetricsConf, headers: Mapping[str, str] | None = None) -> None:
        self.ssl = not conf.insecure_skip_verify  # aiohttp: True checks the certificate
        self.headers = dict(headers or {})
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT), headers=self.headers
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _json(resp: aiohttp.ClientResponse, json_errors: Collection[int] = ()) -> Any:
    """The answer's JSON; :class:`SourceError` for an error status (but those in ``json_errors``,
    whose JSON says the error), an answer over :data:`MAX_ANSWER` bytes or one that is not JSON."""
    raw = bytearray()
    async for chunk in resp.content.iter_chunked(1 << 16):
        raw += chunk
        if len(raw) > MAX_ANSWER:
            raise SourceError(f"HTTP {resp.status}: an answer over the body size limit ({MAX_ANSWER} bytes)")
    if resp.status >= 300 and resp.status not in json_errors:
        raise SourceError(f"HTTP {resp.status}: {bytes(raw[:200])!r}")
    try:
        return json.loads(raw)
    except ValueError:
        raise SourceError(f"HTTP {resp.status}: not JSON: {bytes(raw[:200])!r}") from None


def first_vector_value(answer: Any) -> float | None:
    """The value of the first sample of a Prometheus ``vector`` answer; None for another result
    type or an empty vector (Volcano reads only vectors: ``res.Type() != pmodel.ValVector``)."""
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise SourceError(f"prometheus answered {str(answer)[:200]}")
    data = answer.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        return None
    result = data.get("result")
    if not isinstance(result, list) or not result:
        return None
    try:
        return float(result[0]["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        raise SourceError(f"prometheus answered an unreadable sample: {str(result[0])[:200]}") from None


class PrometheusSource(HttpSource):
    """``PrometheusMetricsClient`` (module docstring)."""

    def __init__(self, conf: MetricsConf) -> None:
        super().__init__(conf)
        self.url = conf.address.rstrip("/") + "/api/v1/query"
        self._use_get = False

    async def query(self, promql: str, at: float) -> float | None:
        form = {"query": promql, "time": f"{at:.3f}"}
        session = self._client()
        errors = (400, 422)  # Prometheus's errors come as JSON
        try:
            if not self._use_get:
                async with session.post(self.url, data=form, ssl=self.ssl) as resp:
                    if resp.status not in (405, 501):
                        return first_vector_value(await _json(resp, errors))
                self._use_get = True  # client_golang's DoGetFallback
            async with session.get(self.url, params=form, ssl=self.ssl) as resp:
                return first_vector_value(await _json(resp, errors))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SourceError(f"{self.url}: {type(exc).__name__}: {exc}") from None

    async def fetch(self, nodes: Collection[str]) -> dict[str, NodeUsage]:
        at = time.time()

        async def ask(name: str) -> tuple[float | None, float | None]:
            return await self.query(cpu_query(name), at), await self.query(memory_query(name), at)

        return await each_node(nodes, ask)


def elasticsearch_query(hostname_field: str, node: str) -> dict[str, Any]:
    """``ElasticsearchMetricsClient.NodeMetricsAvg``'s search body: no hits, the documents of the last
    ``NODE_METRICS_PERIOD`` whose hostname field is the node, averaged per field."""
    return {
        "size": 0,
        "query": {
            "bool": {
                "must": [
                    {"range": {"@timestamp": {"gte": f"now-{NODE_METRICS_PERIOD}", "lt": "now"}}},
                    {"term": {hostname_field: node}},
                ]
            }
        },
        "aggs": {
            "cpu": {"avg": {"field": ES_CPU_FIELD}},
            "mem": {"avg": {"field": ES_MEMORY_FIELD}},
        },
    }


def elasticsearch_averages(answer: Any) -> tuple[float | None, float | None]:
    """(cpu %, memory %) from a search answer's ``aggregations.cpu.value`` and ``.mem.value``
    (fractions, times 100 as ``NodeMetricsAvg`` does); None for an average over no document (Elasticsearch
    answers ``null``, which Volcano's decoder reads as 0 %). An answer without both aggregations, or with
    a value that is not a number, is unreadable: :class:`SourceError`."""
    try:
        aggregations = answer["aggregations"]
        values = [aggregations[key]["value"] for key in ("cpu", "mem")]
    except (KeyError, TypeError):
        raise SourceError(
            f"elasticsearch answered without the cpu and mem averages: {str(answer)[:200]}"
        ) from None
    out: list[float | None] = []
    for value in values:
        if value is None:
            out.append(None)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(float(value) * 100.0)
        else:
            raise SourceError(f"elasticsearch answered an unreadable average: {str(answer)[:200]}")
    return out[0], out[1]


class ElasticsearchSource(HttpSource):
    """``ElasticsearchMetricsClient`` (module docstring)."""

    def __init__(self, conf: MetricsConf) -> None:
        values = conf.values
        user = values.get("elasticsearch.username", "")
        password = values.get("elasticsearch.password", "")
        # go-elasticsearch's ``Client.setReqAuth`` (estransport): basic auth from the address's user
        # info first, else from username and password when both are given
        address = urllib.parse.urlsplit(conf.address.rstrip("/"))
        credentials = (user, password) if user and password else None
        if address.username is not None:
            credentials = (
                urllib.parse.unquote(address.username),
                urllib.parse.unquote(address.password or ""),
            )
            address = address._replace(netloc=address.netloc.rpartition("@")[2])
        headers = {}
        if credentials is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(":".join(credentials).encode()).decode()
        super().__init__(conf, headers)
        index = values.get("elasticsearch.index") or ES_DEFAULT_INDEX
        self.url = f"{urllib.parse.urlunsplit(address)}/{index}/_search"
        self.hostname_field = values.get("elasticsearch.hostnameFieldName") or ES_HOSTNAME_FIELD

    async def ask(self, node: str) -> tuple[float | None, float | None]:
        body = elasticsearch_query(self.hostname_field, node)
        try:
            async with self._client().post(self.url, json=body, ssl=self.ssl) as resp:
                return elasticsearch_averages(await _json(resp))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SourceError(f"{self.url}: {type(exc).__name__}: {exc}") from None

    async def fetch(self, nodes: Collection[str]) -> dict[str, NodeUsage]:
        return await each_node(nodes, self.ask)


async def _api_json(client: ApiClient, path: str) -> Any:
    """A GET through the API server, as JSON; :class:`SourceError` when it fails or is not JSON."""
    from caldera.cache.client import ApiError

    try:
        raw = await client.request("GET", path, timeout=REQUEST_TIMEOUT)
    except ApiError as exc:
        raise SourceError(f"GET {path}: {exc}") from None
    try:
        return json.loads(raw)
    except ValueError:
        raise SourceError(f"GET {path}: not JSON: {raw[:200]!r}") from None


def list_items(answer: Any, what: str) -> list[Any]:
    """A Kubernetes list's ``items`` (``null`` for none); :class:`SourceError` saying ``what`` when the
    answer is not a list."""
    items = answer.get("items", ()) if isinstance(answer, dict) else ()
    if items is None:
        return []
    if not isinstance(items, list):
        raise SourceError(f"{what}: {str(answer)[:200]}")
    return items


def metric_values(answer: Any, metric: str) -> dict[str, tuple[float, float]]:
    """A ``MetricValueList`` (custom.metrics.k8s.io v1beta1 or v1beta2) read as ``KMetricsClient``
    reads it: per described object's name, (value times 100, the value's ``timestamp``). Volcano's typed
    decoder fails on any unreadable item; so does this (:class:`SourceError`), and on a missing
    timestamp too (Volcano would store a zero time, a value never used)."""
    from caldera.framework.objects import parse_timestamp

    out: dict[str, tuple[float, float]] = {}
    for item in list_items(answer, f"{metric}: not a MetricValueList"):
        try:
            name = item["describedObject"]["name"]
            value = float(parse_quantity(item["value"]))
            stamp = parse_timestamp(item["timestamp"])
        except (KeyError, TypeError, ValueError, QuantityError):
            name, stamp = None, 0.0
        if not isinstance(name, str) or not stamp:
            raise SourceError(f"{metric}: an unreadable MetricValue: {str(item)[:200]}")
        out[name] = (value * 100.0, stamp)
    return out


class CustomMetricsSource:
    """``KMetricsClient`` (module docstring): Volcano's two node metrics from custom.metrics.k8s.io."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        #: the group version asked, found through discovery at the first poll and after a failed one
        self.version: str | None = None

    async def discover(self) -> str:
        """``apiVersionsFromDiscovery.PreferredVersion`` (k8s.io/metrics custom_metrics/discovery.go): the
        group's preferred version when the client knows it, else the first of its versions it knows."""
        path = f"/apis/{CUSTOM_METRICS_GROUP}"
        group = await _api_json(self.client, path)
        try:
            preferred = group.get("preferredVersion") or {}
            offered = [preferred.get("version")] + [v.get("version") for v in group.get("versions") or ()]
        except AttributeError:
            raise SourceError(f"GET {path}: not an APIGroup: {str(group)[:200]}") from None
        for version in offered:
            if version in CUSTOM_METRICS_VERSIONS:
                return str(version)
        raise SourceError(f"GET {path}: no known version of the custom metrics API in {offered[1:]}")

    async def fetch(self, nodes: Collection[str]) -> dict[str, NodeUsage]:
        try:
            version = self.version or await self.discover()
            self.version = version
            base = f"/apis/{CUSTOM_METRICS_GROUP}/{version}/nodes/*"
            cpu = metric_values(
                await _api_json(self.client, f"{base}/{CUSTOM_CPU_METRIC}"), CUSTOM_CPU_METRIC
            )
            memory = metric_values(
                await _api_json(self.client, f"{base}/{CUSTOM_MEMORY_METRIC}"), CUSTOM_MEMORY_METRIC
            )
        except SourceError:
            self.version = None  # the adapter may have changed: ask discovery again
            raise
        out: dict[str, NodeUsage] = {}
        for name in (set(cpu) | set(memory)) & set(nodes):
            cpu_value, cpu_stamp = cpu.get(name, (0.0, 0.0))
            memory_value, memory_stamp = memory.get(name, (0.0, 0.0))
            # the memory metric is read last and its timestamp stays, as in ``NodesMetricsAvg``
            out[name] = NodeUsage(cpu_value, memory_value, memory_stamp or cpu_stamp)
        return out

    async def close(self) -> None:
        return None


class MetricsServerSource:
    """``metrics.k8s.io/v1beta1`` NodeMetrics through the API server (module docstring)."""

    PATH = "/apis/metrics.k8s.io/v1beta1/nodes"

    def __init__(self, client: ApiClient, allocatable: Callable[[], dict[str, tuple[float, float]]]) -> None:
        self.client = client
        self.allocatable = allocatable
        #: per node, the samples of the last 10 minutes: (timestamp, cpu %, memory %)
        self.samples: dict[str, deque[tuple[float, float, float]]] = {}

    async def fetch(self, nodes: Collection[str]) -> dict[str, NodeUsage]:
        answer = await _api_json(self.client, self.PATH)
        items = list_items(answer, f"GET {self.PATH}: not a NodeMetricsList")
        sizes = self.allocatable()
        out: dict[str, NodeUsage] = {}
        for item in items:
            got = self._sample(item, sizes)
            if got is None:
                continue
            name, stamp, cpu, memory = got
            if name not in nodes:
                continue
            window = self.samples.setdefault(name, deque())
            if not window or window[-1][0] < stamp:
                window.append((stamp, cpu, memory))
            while window and window[0][0] <= stamp - NODE_METRICS_PERIOD_SECONDS:
                window.popleft()
            count = len(window)
            out[name] = NodeUsage(
                sum(s[1] for s in window) / count, sum(s[2] for s in window) / count, window[-1][0]
            )
        for gone in set(self.samples) - set(nodes):
            del self.samples[gone]
        return out

    @staticmethod
    def _sample(
        item: Any, sizes: Mapping[str, tuple[float, float]]
    ) -> tuple[str, float, float, float] | None:
        from caldera.framework.objects import parse_timestamp

        try:
            name = item["metadata"]["name"]
            usage = item["usage"]
            cpu = parse_cpu_millis(usage["cpu"])
            memory = parse_bytes(usage["memory"])
            stamp = parse_timestamp(item.get("timestamp"))
        except (KeyError, TypeError, ValueError, QuantityError):
            log.debug("unreadable NodeMetrics item skipped: %s", str(item)[:200])
            return None
        size = sizes.get(name)
        if size is None or stamp <= 0:
            return None
        alloc_cpu, alloc_memory = size
        return (
            name,
            stamp,
            cpu / alloc_cpu * 100.0 if alloc_cpu > 0 else 0.0,
            memory / alloc_memory * 100.0 if alloc_memory > 0 else 0.0,
        )

    async def close(self) -> None:
        return None


# -- the poller ------------------------------------------------------------------------------------------
class UsagePoller:
    """Polls the conf's metrics source into the cache while the conf names one (module docstring)."""

    def __init__(self, cache: UsageCache, client: ApiClient | None) -> None:
        self.cache = cache
        self.client = client
        self.conf: MetricsConf | None = None
        self.task: asyncio.Task[None] | None = None
        self.failing = False

    def configure(self, conf: MetricsConf | None) -> None:
        """The running conf's ``metrics:`` (at start and on every reload); on the event loop."""
        if conf == self.conf:
            return
        old, self.task = self.task, None
        if old is not None:
            old.cancel()
        self.conf = conf
        if conf is None:
            self.cache.clear_usage()
            return
        log.info("node usage from %s every %gs", conf.type, conf.interval)
        self.task = supervise("node-usage", functools.partial(self._run, conf))

    def source(self, conf: MetricsConf) -> UsageSource:
        if conf.type == PROMETHEUS:
            return PrometheusSource(conf)
        if conf.type == ELASTICSEARCH:
            return ElasticsearchSource(conf)
        client = self.client
        if client is None:
            raise SourceError(f"{conf.type} needs the API server's client")
        if conf.type == METRICS_SERVER:
            return MetricsServerSource(client, self.cache.node_allocatable)
        if conf.type == PROMETHEUS_ADAPTOR:
            return CustomMetricsSource(client)
        raise SourceError(f"metrics type {conf.type} is unknown")  # the conf parser refuses it

    async def poll_once(self, conf: MetricsConf, source: UsageSource) -> bool:
        """One poll; True when the source answered."""
        nodes = list(self.cache.nodes)  # on the event loop, where the watches write the cache
        try:
            async with asyncio.timeout(POLL_TIMEOUT):
                fetched = await source.fetch(nodes)
        except (SourceError, TimeoutError) as exc:
            POLLS.labels(conf.type, "failed").inc()
            if not self.failing:
                log.warning(
                    "node usage: the %s source failed (%s); nodes keep their last values and are not "
                    "used once older than 5 minutes",
                    conf.type,
                    exc or "no answer in time",
                )
            self.failing = True
            self.cache.refresh_usage_staleness(time.time())
            return False
        POLLS.labels(conf.type, "ok").inc()
        if self.failing:
            log.info("node usage: the %s source answers again", conf.type)
        self.failing = False
        self.cache.publish_usage(fetched, conf.interval, time.time())
        return True

    async def _run(self, conf: MetricsConf) -> None:
        source = self.source(conf)
        failures = 0
        try:
            while True:
                if await self.poll_once(conf, source):
                    failures = 0
                else:
                    failures += 1
                await asyncio.sleep(min(MAX_BACKOFF, conf.interval * 2**failures))
        finally:
            await source.close()

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            await stop_workers([task])
