"""vGPU device metrics as a pure function of the cache's current truth.

Volcano wrote these gauges from scheduling events (added on allocate, never cleaned when a pod ended),
so dashboards showed busy GPUs that were free and drifted above card capacity under churn. Here every
series is *set* from the usage recomputed from the pods the cache holds on each node (never added to or
subtracted from), a device's usage series disappear with its last sharer, every series of a node or
device disappears with it, a pod's series disappear with the pod, and a periodic reconciliation
compares what is exported with the truth, repairs every difference and counts it. The series are set
again at each scrape when the cache changed since (``refresh``, called by the scheduler's /metrics
before it answers): a pod the cache has seen finish or go is in no series a scrape returns, whenever
the periodic loop last ran and however busy the process is.

Names and labels are Volcano's (subsystem ``volcano``) so existing dashboards keep working:
``volcano_vgpu_device_shared_number``, ``volcano_vgpu_device_allocated_memory``,
``volcano_vgpu_device_allocated_cores``, ``volcano_vgpu_device_memory_limit`` (labels ``devID``,
``NodeName``) and ``volcano_vgpu_device_memory_allocation_for_a_certain_pod``,
``volcano_vgpu_device_core_allocation_for_a_certain_pod`` (plus ``podName`` and ``podNamespace``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from caldera.framework.devices import NodeDevices, holds_devices, node_devices, pod_assignment
from caldera.framework.model import NodeInfo

log = logging.getLogger("caldera.metrics.devices")

DEVICE_LABELS = ("devID", "NodeName")
POD_LABELS = ("devID", "NodeName", "podName", "podNamespace")

SHARED = "volcano_vgpu_device_shared_number"
MEMORY = "volcano_vgpu_device_allocated_memory"
CORES = "volcano_vgpu_device_allocated_cores"
LIMIT = "volcano_vgpu_device_memory_limit"
POD_MEMORY = "volcano_vgpu_device_memory_allocation_for_a_certain_pod"
POD_CORES = "volcano_vgpu_device_core_allocation_for_a_certain_pod"


class ClusterCache(Protocol):
    """What the device metrics read of the cache (``cache.store.ClusterCache``'s read API): its nodes
    (with their tasks), held still while read, and a change counter."""

    def locked(self) -> contextlib.AbstractContextManager[object]: ...

    def node_infos(self) -> Mapping[str, NodeInfo]: ...

    @property
    def revision(self) -> int: ...


#: metric name → label values → value
Series = dict[str, dict[tuple[str, ...], float]]


def node_usage(cache: ClusterCache) -> dict[str, NodeDevices]:
    """Per vGPU node, its devices' usage recomputed from the pods the cache holds there now."""
    out: dict[str, NodeDevices] = {}
    with cache.locked():
        for name, info in cache.node_infos().items():
            devices = node_devices(info.node)
            if not devices:
                continue
            state = NodeDevices(devices)
            for task in info.tasks.values():
                # The API's truth only: a placement the scheduler has assumed but not yet bound
                # (a bind retried through a 429 storm, say) holds no device a dashboard should show.
                if not holds_devices(task) or not task.pod.spec.node_name:
                    continue
                assignment = pod_assignment(task.pod)
                if assignment is not None:
                    state.add_pod(f"{task.namespace}/{task.name}", assignment)
            out[name] = state
    return out


def desired_series(usage: dict[str, NodeDevices]) -> Series:
    """Every series that should exist, and its value."""
    series: Series = {name: {} for name in (SHARED, MEMORY, CORES, LIMIT, POD_MEMORY, POD_CORES)}
    for node, state in usage.items():
        for device in state.devices:
            key = (device.uuid, node)
            series[LIMIT][key] = float(device.memory)
            used = state.usage[device.uuid]
            if not used.pods:
                continue  # no sharer: no usage series
            series[SHARED][key] = float(len(used.pods))
            series[MEMORY][key] = float(used.memory)
            series[CORES][key] = float(used.cores)
            for pod_key, share in used.pods.items():
                namespace, _, pod_name = pod_key.partition("/")
                pod_labels = (device.uuid, node, pod_name, namespace)
                series[POD_MEMORY][pod_labels] = float(share.memory)
                series[POD_CORES][pod_labels] = float(share.cores)
    return series


class DeviceMetrics:
    """The six vGPU gauges and the repair counter, on ``registry`` (one instance per registry)."""

    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        def gauge(name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
            return Gauge(name, doc, list(labels), registry=registry)

        self.gauges: dict[str, Gauge] = {
            SHARED: gauge(SHARED, "The number of vGPU pods sharing this card.", DEVICE_LABELS),
            MEMORY: gauge(MEMORY, "The vGPU memory (MiB) allocated on this card.", DEVICE_LABELS),
            CORES: gauge(CORES, "The percentage of this card's compute cores allocated.", DEVICE_LABELS),
            LIMIT: gauge(LIMIT, "The total memory (MiB) of this card.", DEVICE_LABELS),
            POD_MEMORY: gauge(
                POD_MEMORY, "The vGPU memory (MiB) allocated to a pod on this card.", POD_LABELS
            ),
            POD_CORES: gauge(
                POD_CORES, "The percentage of this card's cores allocated to a pod.", POD_LABELS
            ),
        }
        #: (the cache, its revision) the series were last set from
        self._seen: tuple[int, int] | None = None
        self.repairs = Counter(
            "caldera_device_metrics_repairs_total",
            "vGPU metric series the reconciliation found different from the cache's truth and repaired.",
            registry=registry,
        )

    # -- reading what is exported ------------------------------------------------------------------------
    def exported(self) -> Series:
        """Every series currently exported by the six gauges, read back from the gauges themselves."""
        out: Series = {}
        for name, gauge in self.gauges.items():
            values: dict[tuple[str, ...], float] = {}
            labelnames = DEVICE_LABELS if name in (SHARED, MEMORY, CORES, LIMIT) else POD_LABELS
            for family in gauge.collect():
                for sample in family.samples:
                    values[tuple(sample.labels[label] for label in labelnames)] = sample.value
            out[name] = values
        return out

    # -- writing the truth -----------------------------------------------------------------------------
    def _apply(self, desired: Series, nodes: Iterable[str] | None = None) -> int:
        """Make the exported series equal ``desired`` (restricted to ``nodes`` when given); returns how
        many series were set to a different value, created or removed."""
        only = None if nodes is None else set(nodes)
        changed = 0
        current = self.exported()
        for name, gauge in self.gauges.items():
            want = desired.get(name, {})
            have = current.get(name, {})
            for labels in have:
                if only is not None and labels[1] not in only:
                    continue
                if labels not in want:
                    with contextlib.suppress(KeyError):
                        gauge.remove(*labels)
                    changed += 1
            for labels, value in want.items():
                if only is not None and labels[1] not in only:
                    continue
                if have.get(labels) != value:
                    changed += 1
                gauge.labels(*labels).set(value)
        return changed

    def update(self, cache: ClusterCache, nodes: Iterable[str] | None = None) -> int:
        """Set the series of ``nodes`` (default: every node, including vanished ones) from the cache's truth.
        The path to call after the cache changed (a cycle's hand-over, watch events); not counted."""
        seen = (id(cache), cache.revision)
        changed = self._apply(desired_series(node_usage(cache)), nodes)
        if nodes is None:
            self._seen = seen
        return changed

    def refresh(self, cache: ClusterCache) -> int:
        """``update`` every series if the cache changed since they were last set from it (else nothing:
        a scrape of an unchanged cache costs a comparison). What /metrics calls before it answers."""
        if self._seen == (id(cache), cache.revision):
            return 0
        return self.update(cache)

    def reconcile(self, cache: ClusterCache) -> int:
        """Recompute every series from the cache, repair each exported series that differs, is missing or
        should not exist, count the repairs in ``caldera_device_metrics_repairs_total`` and return them."""
        seen = (id(cache), cache.revision)
        repaired = self._apply(desired_series(node_usage(cache)))
        self._seen = seen
        if repaired:
            self.repairs.inc(repaired)
            log.info("vGPU metrics: %d series repaired from the cache's truth", repaired)
        return repaired

    async def run(
        self, cache: ClusterCache, stop: asyncio.Event, period: float = 30.0, refresh: float = 1.0
    ) -> None:
        """Until ``stop`` is set: every ``refresh`` seconds, ``refresh`` the series; every ``period``
        seconds, ``refresh`` then ``reconcile`` (so what it repairs and counts is only what differs from
        the truth the series were set from, never the cache's changes since the last refresh). Runs on
        the event loop, like the watches that feed the cache, so it never sees the cache half-way
        through an event."""
        loop = asyncio.get_running_loop()
        next_reconcile = loop.time() + period
        while not stop.is_set():
            try:
                self.refresh(cache)
                if loop.time() >= next_reconcile:
                    next_reconcile = loop.time() + period
                    self.reconcile(cache)
            except Exception:  # the metrics must never take the scheduler down
                log.exception("vGPU metrics refresh failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.01, min(refresh, period))):
                    await stop.wait()


_shared: DeviceMetrics | None = None


def shared() -> DeviceMetrics:
    """The process's device metrics on the global registry (created once: one set of series per process,
    however many scheduler instances a test runs in it)."""
    global _shared
    if _shared is None:
        _shared = DeviceMetrics()
    return _shared
