"""rescheduling: every ``interval``, choose running pods to evict from the nodes whose measured load
is above the conf's target, so that the shuffle action evicts them and they are placed again.

Volcano's rescheduling plugin (pkg/scheduler/plugins/rescheduling/): ``OnSessionOpen`` in
rescheduling.go reads the arguments (``parseArguments``) and, only when ``interval`` (a Go duration;
5m when absent or unreadable) has passed since the last time it ran (rescheduling_util.go
``timeToRun``: strictly after; the first run one interval after the scheduler started), registers
the victim function of each configured strategy (``AddVictimTasksFns``). Volcano registers one
strategy, ``lowNodeUtilization`` (``init``: ``VictimFn``), which is the default strategy when the
conf names none.

lowNodeUtilization (low_node_utilization.go ``victimsFnForLnu``, node_utilization_util.go):

- a node's utilization is its **measured** load, not its pods' requests: cpu and memory in percent,
  averaged over ``metricsPeriod`` (default ``5m``), as the conf's metrics source reports it
  (``getNodeUtilization`` reads ``nodeInfo.ResourceUsage.CPUUsageAvg[MetricsPeriod]``). Volcano's
  sources store their averages under ``10m`` only (``source.NODE_METRICS_PERIOD``), so Volcano needs
  ``metricsPeriod: 10m`` to see any load; a node with no figures for the period reads 0 %. Here
  the figures are the conf's ``metrics:`` source's, as the usage plugin reads them
  (``Snapshot.node_usage``, a ``framework.usage.UsageView``: one average per node, over
  ``NODE_METRICS_PERIOD``; no ``metrics:`` section, no figures). Only cpu and memory are measured,
  so a ``pods`` threshold has no effect (as in Volcano);
- the nodes are the session's ready nodes; a node is *low* when it is schedulable and each of its
  cpu and memory use is below ``thresholds`` (``lowThresholdFilter``), else *high* when either is
  above ``targetThresholds`` (``highThresholdFilter``); nothing is chosen when no node is low,
  when every node is low, or when none is high;
- the room the low nodes have is the sum, per resource, of (target - use) % of each one's
  allocatable (its capacity when it has none) (``evictPodsFromSourceNodes``);
- high nodes are taken from the most loaded (cpu % + memory %, ``sortNodes``); on each, its pods
  from the lowest priority (a pod without one first), then BestEffort before Burstable before
  Guaranteed (``sortPods``); while the node is still at or above its target in cpu or memory and
  the low nodes have room left in both (``isContinueEvictPods``), the next pod is chosen if it is
  a candidate (a Running pod of a job), and its requests are taken from the room and, in percent
  of the node's capacity, from the node's use (``evict``).

Where Caldera differs, it chooses a subset of what Volcano would: the room counts as used up at
zero or below (Volcano stops only at exactly zero, ``amount.CmpInt64(0) == 0``, and so evicts on
past it), and a node's pod is matched to a candidate by uid (Volcano matches by pod name alone, in
any namespace). The interval's clock is the scheduler's standing state (``Session.standing``), not
the cross-cycle carry: it changes decisions, which a carried value must never do.

Arguments Volcano accepts without reading them are accepted here too, with a warning when the conf
is loaded saying they have no effect in either scheduler: the LowNodeUtilization parameters
``numberOfNodes``, ``thresholdPriority``, ``thresholdPriorityClassName`` and ``nodeFit``
(``LowNodeUtilizationConf.parse`` reads only the two threshold maps), and strategies other than
lowNodeUtilization (named in Volcano's design doc, never registered).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from caldera.config.arguments import ArgumentError, structured
from caldera.config.duration import parse_duration
from caldera.framework.model import NodeInfo, TaskInfo
from caldera.framework.objects import Pod
from caldera.framework.plugin import Plugin
from caldera.framework.quantity import parse_bytes, parse_cpu_millis
from caldera.framework.usage import NODE_METRICS_PERIOD

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.rescheduling")

#: Volcano's defaults (rescheduling.go: DefaultInterval, DefaultMetricsPeriod, DefaultStrategy)
DEFAULT_INTERVAL = 300.0
DEFAULT_METRICS_PERIOD = "5m"
LOW_NODE_UTILIZATION = "lowNodeUtilization"
#: DefaultLowNodeConf / NewLowNodeUtilizationConf (low_node_utilization.go)
DEFAULT_THRESHOLDS = {"cpu": 100.0, "memory": 100.0, "pods": 100.0}
#: the resources whose use is measured (getNodeUtilization)
MEASURED = ("cpu", "memory")
#: LowNodeUtilizationConf fields Volcano's parse never reads
UNREAD_PARAMS = frozenset({"numberOfNodes", "thresholdPriority", "thresholdPriorityClassName", "nodeFit"})
#: the keys parseThreshold reads ("pod": Volcano's spelling; no pod count is measured anyway)
THRESHOLD_KEYS = frozenset({"cpu", "memory", "pod", "pods"})


@dataclass(frozen=True)
class LowNodeUtilization:
    thresholds: dict[str, float]
    target_thresholds: dict[str, float]


def _thresholds(where: str, value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ArgumentError(f"{where} must be a mapping of resource to percent, got {value!r}")
    out = dict(DEFAULT_THRESHOLDS)
    for key, percent in value.items():
        if key not in THRESHOLD_KEYS:
            raise ArgumentError(f"{where} has an unknown resource {key!r} (cpu, memory, pods)")
        if isinstance(percent, bool) or not isinstance(percent, (int, float)) or not math.isfinite(percent):
            raise ArgumentError(f"{where}[{key!r}] must be a number (percent), got {percent!r}")
        out["pods" if key == "pod" else key] = float(percent)
    return out


def _strategies(key: str, value: list[Any]) -> list[tuple[str, Any]]:
    """The strategies as (name, parsed parameters), checked; Volcano's ``parseArguments`` decodes each
    entry into ``Strategy{Name, Params}``."""
    out: list[tuple[str, Any]] = []
    for i, entry in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ArgumentError(f"{where} must be a mapping with a 'name', got {entry!r}")
        unknown = set(entry) - {"name", "params"}
        if unknown:
            raise ArgumentError(f"{where} has unknown fields {sorted(unknown)} (name, params)")
        name, params = entry["name"], entry.get("params") or {}
        if name != LOW_NODE_UTILIZATION:
            log.warning(
                "rescheduling strategy %r has no effect: Volcano registers only %s "
                "(pkg/scheduler/plugins/rescheduling/rescheduling.go init)",
                name,
                LOW_NODE_UTILIZATION,
            )
            continue
        if not isinstance(params, dict):
            raise ArgumentError(f"{where}.params must be a mapping, got {params!r}")
        for p in sorted(set(params) - {"thresholds", "targetThresholds"}):
            if p not in UNREAD_PARAMS:
                raise ArgumentError(f"{where}.params has an unknown parameter {p!r}")
            log.warning(
                "rescheduling %s parameter %r has no effect: Volcano's LowNodeUtilizationConf.parse "
                "reads only thresholds and targetThresholds",
                name,
                p,
            )
        conf = LowNodeUtilization(
            _thresholds(f"{where}.params.thresholds", params.get("thresholds", {})),
            _thresholds(f"{where}.params.targetThresholds", params.get("targetThresholds", {})),
        )
        out.append((name, conf))
    if not out and value:
        log.warning(
            "rescheduling: none of the conf's strategies is one Volcano implements; nothing is evicted"
        )
    return out


def _interval(key: str, value: str) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ArgumentError(f"{key}: {exc}") from None
    if seconds < 0:
        raise ArgumentError(f"{key} must not be negative, got {value!r}")
    return seconds


@dataclass
class _LastRun:
    """When the plugin last ran (monotonic seconds): Volcano's ``lastRescheduleTime``."""

    at: float


def time_to_run(last: _LastRun, interval: float, now: float) -> bool:
    """rescheduling_util.go ``timeToRun``: true (and the run recorded) once ``interval`` has passed."""
    if last.at + interval < now:
        last.at = now
        return True
    return False


def qos_rank(pod: Pod) -> int:
    """A pod's QoS class as 0 BestEffort, 1 Burstable, 2 Guaranteed (Kubernetes' ``GetPodQOS``,
    pkg/apis/core/v1/helper/qos/qos.go: over every container and init container, the positive cpu
    and memory requests and limits; none: BestEffort; limits on both in every container, equal to
    the requests: Guaranteed)."""
    requests: dict[str, float] = {}
    limits: dict[str, float] = {}
    guaranteed = True
    for c in [*pod.spec.init_containers, *pod.spec.containers]:
        for name in MEASURED:
            parse = parse_cpu_millis if name == "cpu" else parse_bytes
            req = c.resources.requests.get(name)
            if req is not None and parse(req) > 0:
                requests[name] = requests.get(name, 0.0) + parse(req)
            lim = c.resources.limits.get(name)
            if lim is not None and parse(lim) > 0:
                limits[name] = limits.get(name, 0.0) + parse(lim)
        if not all(name in c.resources.limits for name in MEASURED):
            guaranteed = False
    if not requests and not limits:
        return 0
    if guaranteed and requests.keys() == limits.keys() and all(limits[k] == v for k, v in requests.items()):
        return 2
    return 1


def eviction_order(task: TaskInfo) -> tuple[int, int, int]:
    """``sortPods``: pods without a priority first, then lower priority, then lower QoS class."""
    priority = task.pod.spec.priority
    return (0 if priority is None else 1, priority or 0, qos_rank(task.pod))


@dataclass
class _Node:
    info: NodeInfo
    use: dict[str, float]


def _amount(name: str, percent: float, of: dict[str, float]) -> int:
    """``convertPercentToQuan``: ``percent`` of a node's cpu (millicores) or memory (bytes), truncated."""
    return int(percent * of.get(name, 0.0) * 0.01)


def _resources(node: NodeInfo, capacity_only: bool) -> dict[str, float]:
    """A node's cpu (millicores) and memory (bytes): its capacity, or (``getNodeCapacity``) its
    allocatable when it lists one; a node listing neither (built by hand) by its allocatable."""
    status = node.node.status
    listed = status.capacity if capacity_only else (status.allocatable or status.capacity)
    listed = listed or status.allocatable or status.capacity
    if not listed:
        return {"cpu": node.allocatable.cpu, "memory": node.allocatable.memory}
    cpu, memory = listed.get("cpu"), listed.get("memory")
    return {
        "cpu": parse_cpu_millis(cpu) if cpu is not None else 0.0,
        "memory": parse_bytes(memory) if memory is not None else 0.0,
    }


def low_node_utilization(
    ssn: Session, conf: LowNodeUtilization, period: str, candidates: list[TaskInfo]
) -> list[TaskInfo]:
    """``victimsFnForLnu``: the victims on the over-target nodes, as the module docstring says."""
    view = ssn.snapshot.node_usage
    # the sources keep one average per node, over NODE_METRICS_PERIOD: another period reads 0 %
    measured = view.nodes if view is not None and period == NODE_METRICS_PERIOD else {}
    nodes = []
    for info in ssn.node_list:
        if not info.ready:
            continue  # Volcano's snapshot holds only ready nodes
        figures = measured.get(info.name)
        use = {"cpu": figures.cpu, "memory": figures.memory} if figures else {"cpu": 0.0, "memory": 0.0}
        nodes.append(_Node(info, use))
    low, high = [], []
    for n in nodes:
        if not n.info.unschedulable and all(n.use[r] < conf.thresholds[r] for r in MEASURED):
            low.append(n)
        elif any(n.use[r] > conf.target_thresholds[r] for r in MEASURED):
            high.append(n)
    if not low or len(low) == len(nodes) or not high:
        log.debug(
            "rescheduling: %d low and %d high of %d nodes: nothing to move", len(low), len(high), len(nodes)
        )
        return []
    room = {r: 0 for r in MEASURED}
    for n in low:
        size = _resources(n.info, capacity_only=False)
        for r in MEASURED:
            room[r] += _amount(r, conf.target_thresholds[r], size) - _amount(r, n.use[r], size)
    by_uid = {t.uid: t for t in candidates}
    victims: list[TaskInfo] = []
    high.sort(key=lambda n: n.use["cpu"] + n.use["memory"], reverse=True)  # sort.Slice: stable here
    for n in high:
        capacity = _resources(n.info, capacity_only=True)
        for pod in sorted(n.info.tasks.values(), key=eviction_order):
            over = [r for r in MEASURED if n.use[r] >= conf.target_thresholds[r]]
            if not over or any(room[r] <= 0 for r in MEASURED):
                break
            task = by_uid.get(pod.uid)
            if task is None:
                continue
            ssn.victim_reasons[task.uid] = (
                f"rescheduling ({LOW_NODE_UTILIZATION}): node {n.info.name} is at or above its target "
                + ", ".join(f"{r} {n.use[r]:.0f}% >= {conf.target_thresholds[r]:.0f}%" for r in over)
            )
            room["cpu"] -= int(task.resreq.cpu)
            room["memory"] -= int(task.resreq.memory)
            for r, used in (("cpu", task.resreq.cpu), ("memory", task.resreq.memory)):
                if capacity[r] > 0:
                    n.use[r] -= used * 100 / capacity[r]
            victims.append(task)
    return victims


class ReschedulingPlugin(Plugin):
    name: ClassVar[str] = "rescheduling"
    arguments_schema: ClassVar[dict[str, type]] = {
        "interval": structured(str, _interval),
        "metricsPeriod": str,
        "strategies": structured(list, _strategies),
    }

    def on_session_open(self, ssn: Session) -> None:
        interval = self.arguments.get("interval")
        last = ssn.standing(_LastRun, lambda: _LastRun(time.monotonic()))
        if not time_to_run(last, DEFAULT_INTERVAL if interval is None else interval, time.monotonic()):
            return
        period = self.arguments.get("metricsPeriod") or DEFAULT_METRICS_PERIOD
        strategies = self.arguments.get("strategies")
        if strategies is None:
            strategies = [
                (LOW_NODE_UTILIZATION, LowNodeUtilization(dict(DEFAULT_THRESHOLDS), dict(DEFAULT_THRESHOLDS)))
            ]
        chosen = dict(strategies)  # a strategy named twice: its last parameters (RegisteredStrategyConfigs)
        conf = chosen.get(LOW_NODE_UTILIZATION)
        if conf is None:
            return
        ssn.add_victim_tasks_fns(self.name, [lambda tasks: low_node_utilization(ssn, conf, period, tasks)])
