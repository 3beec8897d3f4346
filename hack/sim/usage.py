"""Nodes' load as the sim reports it, for the usage plugin's metrics sources (cache/usage.py).

- ``POST|GET /prometheus/api/v1/query``: a Prometheus HTTP API endpoint that answers the two instant
  queries Volcano's Prometheus client sends (cache/usage.py: ``node_cpu_seconds_total`` with
  ``mode="idle"`` and ``instance="NODE"`` for cpu, ``node_memory_MemAvailable_bytes`` with
  ``instance="NODE"`` for memory) with a one-sample vector holding the percentage set for the node,
  an empty vector for a node with none, and Prometheus's ``bad_data`` error for any other query. No
  PromQL is evaluated: the value set is the answer, whatever the window.
- ``GET /apis/metrics.k8s.io/v1beta1/nodes`` (and ``/nodes/NAME``): metrics-server's NodeMetrics,
  ``usage`` being the percentage set times the node's allocatable, ``timestamp`` the time of the
  request and ``window`` 30s; nodes with no percentage set are left out (metrics-server leaves out
  nodes it has no sample of).
- ``GET /apis/custom.metrics.k8s.io/{v1beta2,v1beta1}/nodes/*/METRIC`` (and ``/nodes/NAME/METRIC``), with
  discovery of the group: the two node metrics Volcano's ``prometheus_adaptor`` client asks for
  (``node_cpu_usage_avg``, ``node_memory_usage_avg``), as a prometheus-adapter configured with those
  rules answers: a ``MetricValueList``, each value the percentage set as a fraction (``"950m"``), timed
  now; nodes with no percentage set are left out; any other metric is 404.
- ``POST|GET /elasticsearch/INDEX/_search``: an Elasticsearch holding, in the index
  ``metricbeat-caldera-sim``, metricbeat documents of every node with a percentage set (``host.hostname``
  and ``host.name``, ``host.cpu.usage`` and ``system.memory.actual.used.pct`` as fractions, timed now). It answers the
  search Volcano's ``elasticsearch`` client sends (a ``bool`` ``must`` of a ``range`` on ``@timestamp``
  and one ``term``, ``avg`` aggregations) with the averages over the matching documents; ``GET
  /elasticsearch/`` is the cluster's info.

The percentages are set by ``POST /sim/node-usage`` (``{"NODE": {"cpu": 90, "memory": 20}}``; ``null``
forgets a node) or by :meth:`NodeLoad.set` in-process.
"""

from __future__ import annotations

import fnmatch
import re
import time
from datetime import UTC, datetime
from typing import Any

from .errors import status_dict
from .quantity import parse_quantity

PROMETHEUS_PATH = "/prometheus/api/v1/query"
ELASTICSEARCH_PREFIX = "/elasticsearch"
#: the one index the sim's Elasticsearch holds, and the fields of its documents (metricbeat's)
ES_INDEX = "metricbeat-caldera-sim"
ES_HOSTNAMES = ("host.hostname", "host.name")
ES_FIELDS = {"host.cpu.usage": 0, "system.memory.actual.used.pct": 1}
ES_INFO = {
    "name": "caldera-sim",
    "cluster_name": "caldera-sim",
    "version": {"number": "7.17.0", "build_flavor": "default"},
    "tagline": "You Know, for Search",
}
CUSTOM_METRICS = "/apis/custom.metrics.k8s.io"
CUSTOM_VERSIONS = ("v1beta2", "v1beta1")
#: the prometheus-adapter rules Volcano's docs configure: metric name -> index in (cpu, memory)
CUSTOM_NODE_METRICS = {"node_cpu_usage_avg": 0, "node_memory_usage_avg": 1}
_CPU = re.compile(r'node_cpu_seconds_total\{mode="idle",instance="([^"]*)"\}')
_MEMORY = re.compile(r'node_memory_MemAvailable_bytes\{instance="([^"]*)"\}')


class NodeLoad:
    """Per node, (cpu %, memory %) as the sim's metrics endpoints report it."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[float, float]] = {}
        self.queries = 0

    def set(self, node: str, cpu: float, memory: float) -> None:
        self.values[node] = (float(cpu), float(memory))

    def forget(self, node: str) -> None:
        self.values.pop(node, None)

    def update(self, changes: Any) -> dict[str, Any]:
        """``POST /sim/node-usage``'s body applied; ValueError names what is wrong."""
        if not isinstance(changes, dict):
            raise ValueError('a JSON object {"NODE": {"cpu": PERCENT, "memory": PERCENT}} is expected')
        for node, value in changes.items():
            if value is None:
                self.forget(node)
                continue
            if not isinstance(value, dict) or set(value) - {"cpu", "memory"}:
                raise ValueError(f"{node}: expected {{'cpu': PERCENT, 'memory': PERCENT}}, got {value!r}")
            cpu, memory = value.get("cpu", 0), value.get("memory", 0)
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (cpu, memory)):
                raise ValueError(f"{node}: percentages must be numbers, got {value!r}")
            self.set(node, cpu, memory)
        return {n: {"cpu": c, "memory": m} for n, (c, m) in self.values.items()}

    # -- Prometheus ----------------------------------------------------------------------------------
    def prometheus(self, query: str, at: str | None) -> tuple[int, dict[str, Any]]:
        """(status, body) of an instant query."""
        self.queries += 1
        stamp = float(at) if at else time.time()
        for pattern, index in ((_CPU, 0), (_MEMORY, 1)):
            m = pattern.search(query)
            if m is None:
                continue
            node = m.group(1)
            value = self.values.get(node)
            result = []
            if value is not None:
                result = [{"metric": {"instance": node}, "value": [stamp, repr(value[index])]}]
            return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}
        return 400, {
            "status": "error",
            "errorType": "bad_data",
            "error": "caldera-sim answers only Volcano's usage queries (node cpu and memory by instance)",
        }

    # -- metrics.k8s.io --------------------------------------------------------------------------------
    def node_metrics(self, node: dict[str, Any]) -> dict[str, Any] | None:
        """One NodeMetrics object for a Node object, or None when no load is set for it."""
        name = node["metadata"]["name"]
        value = self.values.get(name)
        if value is None:
            return None
        status = node.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        cpu_cores = float(parse_quantity(alloc.get("cpu", "0")))
        memory = float(parse_quantity(alloc.get("memory", "0")))
        now = _now()
        return {
            "kind": "NodeMetrics",
            "apiVersion": "metrics.k8s.io/v1beta1",
            "metadata": {"name": name, "creationTimestamp": now},
            "timestamp": now,
            "window": "30s",
            "usage": {
                "cpu": f"{round(cpu_cores * value[0] / 100.0 * 1e9)}n",
                "memory": f"{round(memory * value[1] / 100.0 / 1024)}Ki",
            },
        }

    # -- custom.metrics.k8s.io -------------------------------------------------------------------------
    def custom_metrics(
        self, nodes: list[str], name: str, metric: str, version: str
    ) -> tuple[int, dict[str, Any]]:
        """(status, body) of ``GET .../nodes/NAME/METRIC``; ``nodes``: the cluster's, ``name``: ``*`` for
        all of them. A metric not served, or one node without a value, is 404 (the adapter's message)."""
        index = CUSTOM_NODE_METRICS.get(metric)
        if name != "*":
            nodes = [n for n in nodes if n == name and n in self.values]
        if index is None or (name != "*" and not nodes):
            target = "nodes" if name == "*" else f"nodes {name}"
            return 404, status_dict(
                404, "NotFound", f"the server could not find the metric {metric} for {target}"
            )
        self.queries += 1
        now = _now()
        items = []
        for node in nodes:
            value = self.values.get(node)
            if value is None:
                continue
            item: dict[str, Any] = {
                "describedObject": {"kind": "Node", "name": node, "apiVersion": "/v1"},
                "timestamp": now,
                "value": f"{round(value[index] * 10)}m",  # percent / 100, in thousandths
            }
            if version == "v1beta1":
                item.update(metricName=metric, window=60)
            else:
                item.update(metric={"name": metric}, windowSeconds=60)
            items.append(item)
        return 200, {
            "kind": "MetricValueList",
            "apiVersion": f"custom.metrics.k8s.io/{version}",
            "metadata": {},
            "items": items,
        }

    # -- Elasticsearch -----------------------------------------------------------------------------------
    def elasticsearch(self, index: str, body: Any) -> tuple[int, dict[str, Any]]:
        """(status, body) of ``INDEX/_search`` for Volcano's query shape; a 400 ``parsing_exception`` for
        any other (the sim evaluates no other query)."""
        self.queries += 1
        patterns = index.split(",")
        if not any(fnmatch.fnmatchcase(ES_INDEX, p) for p in patterns):
            concrete = [p for p in patterns if "*" not in p]
            if concrete:
                return 404, _es_error(404, "index_not_found_exception", f"no such index [{concrete[0]}]")
            return 200, _es_answer(0, {})  # a pattern matching no index: no documents
        try:
            must = body["query"]["bool"]["must"]
            (term,) = [c["term"] for c in must if "term" in c]
            if not all(set(c) <= {"term", "range"} for c in must) or len(term) != 1:
                raise ValueError
            ((field, host),) = term.items()
            aggs = {name: spec["avg"]["field"] for name, spec in body["aggs"].items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            return 400, _es_error(
                400, "parsing_exception", "caldera-sim answers only Volcano's node usage search"
            )
        if isinstance(host, dict):
            host = host.get("value")
        value = self.values.get(host) if field in ES_HOSTNAMES else None
        averages = {
            name: (value[ES_FIELDS[f]] / 100.0 if value is not None and f in ES_FIELDS else None)
            for name, f in aggs.items()
        }
        return 200, _es_answer(0 if value is None else 1, averages)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _es_answer(hits: int, averages: dict[str, float | None]) -> dict[str, Any]:
    return {
        "took": 1,
        "timed_out": False,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {"total": {"value": hits, "relation": "eq"}, "max_score": None, "hits": []},
        "aggregations": {name: {"value": v} for name, v in averages.items()},
    }


def _es_error(status: int, kind: str, reason: str) -> dict[str, Any]:
    cause = {"type": kind, "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


def custom_metrics_discovery() -> dict[str, Any]:
    """Discovery documents of custom.metrics.k8s.io, by path, as the aggregator serves the adapter's."""
    versions = [{"groupVersion": f"custom.metrics.k8s.io/{v}", "version": v} for v in CUSTOM_VERSIONS]
    group = {"name": "custom.metrics.k8s.io", "versions": versions, "preferredVersion": versions[0]}
    docs: dict[str, Any] = {CUSTOM_METRICS: {"kind": "APIGroup", "apiVersion": "v1", **group}}
    for v in CUSTOM_VERSIONS:
        docs[f"{CUSTOM_METRICS}/{v}"] = {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"custom.metrics.k8s.io/{v}",
            "resources": [
                {
                    "name": f"nodes/{m}",
                    "singularName": "",
                    "namespaced": False,
                    "kind": "MetricValueList",
                    "verbs": ["get"],
                }
                for m in CUSTOM_NODE_METRICS
            ],
        }
    return {"group": group, "docs": docs}
