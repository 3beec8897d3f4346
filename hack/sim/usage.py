"""Nodes' load as the sim reports it, for the usage plugin's two metrics sources.

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

The percentages are set by ``POST /sim/node-usage`` (``{"NODE": {"cpu": 90, "memory": 20}}``; ``null``
forgets a node) or by :meth:`NodeLoad.set` in-process.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

from .quantity import parse_quantity

PROMETHEUS_PATH = "/prometheus/api/v1/query"
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
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
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
