"""usage: nodes filtered and scored by their real load, from the conf's ``metrics:`` source.
Volcano's ``usage`` plugin (pkg/scheduler/plugins/usage/: usage.go, estimator.go, shadow_cache.go).

The load is the snapshot's ``node_usage`` (``framework.usage.UsageView``, polled by
cache/usage.py): per node, cpu and memory in percent averaged over 10 minutes, and when it was
measured. A node whose data is missing or older than 5 minutes is left alone: it passes the
predicate and scores 0 (``isMetricsAvailable``, ``MetricsActiveTime``).

Predicate (``predicateFn``): a node whose cpu usage is above ``thresholds.cpu`` fails with "the CPU
load of the node exceeds the upper limit.", else one whose memory usage is above ``thresholds.mem``
with "the memory load of the node exceeds the upper limit." (``NodeUsageCPUExtend``,
``NodeUsageMemoryExtend``; Volcano's UnschedulableAndUnresolvable: evicting pods does not help, so
preempt and reclaim do not try it).

Score (``nodeOrderFn``, ``calcNodeScore``): per resource the composite utilisation
``(real % / 100 * capacity + shadow estimate) / capacity`` clamped to [0, 1]
(``CalcCompositeUtilization``), then ``((1 - cpu) * cpu.weight + (1 - memory) * memory.weight) /
(cpu.weight + memory.weight) * 100 * usage.weight`` (``CalcNodeScore``; 0 when both weights are 0).

The shadow estimate (``ShadowLoadCache``) is the load of pods the metrics cannot show yet: at session
open every pod on a node that is Allocated, Binding or Bound, or Running and started less than
``metrics.interval`` ago (or with no start time) (``shouldAddToShadowCache``, ``warmUpShadowCache``),
and every pod the session places (``handleAllocate``; a placement undone subtracts exactly what it
added, ``SubEstimateBySnapshot``). A pod's estimate per resource (``EstimatePodResource``) is
``(request * request_ratio + (limit - request) * burst_ratio) * risk``, clamped to [0, limit] (limit:
the request when missing or smaller); a BestEffort pod's is ``be_cpu`` / ``be_mem`` times ``risk``
(``EstimateBestEffortResource``). ``risk`` is ``risk_factor`` once the node's composite load
(``(cpu * cpu.weight + memory * memory.weight) / (cpu.weight + memory.weight)``,
``CalcLoadCompositePercentage``) reaches ``risk_threshold``, else 1 (``CalcAppliedRiskFactor``).
Requests and limits are those of ``GetPodResourceRequest`` / ``GetPodResourceLimit``: the containers
summed, each init container's taken as a maximum with the sidecars (init containers with
``restartPolicy: Always``) before it added, the sidecars added to the total, the overhead added (to a
limit only where the limit is set). The shadow estimates are only read for nodes with fresh data, so
only those nodes' pods are looked at.

Arguments, as Volcano's ``New`` reads them (``parseThresholdArgs``, ``parseEstimatorArgs``):
``usage.weight`` (5), ``cpu.weight`` (1), ``memory.weight`` (1): a negative one keeps its default;
``thresholds: {cpu: 80, mem: 80}``: integers 0-100, another keeps the default; ``estimator:
{request_ratio: 0.7, burst_ratio: 0, risk_threshold: 0.6, risk_factor: 1.2, be_cpu: 250m, be_mem:
200Mi}``: the ratios and threshold in [0, 1], ``risk_factor`` at least 1, ``be_cpu`` a quantity or an
integer number of millicores, ``be_mem`` a quantity or an integer number of MiB; a value out of range
or not a quantity keeps its default (with one log line). As everywhere in Caldera, a number given as a
string (``usage.weight: "7"``) is read as that number, where Volcano's ``GetInt`` would keep the
default; a setting Volcano does not read is refused.

Both callbacks are node-local bulk functions: the score reads nothing of the task, and a placement
changes only its own node's shadow estimate (and the statement logs that node's row).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from caldera.framework.callbacks import EventHandler
from caldera.framework.model import NodeInfo, TaskInfo, TaskStatus
from caldera.framework.objects import Pod, parse_timestamp
from caldera.framework.plugin import ArgumentError, Plugin, structured
from caldera.framework.quantity import QuantityError, parse_bytes, parse_cpu_millis
from caldera.framework.result import Event

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.usage")

NAME = "usage"
MAX_NODE_SCORE = 100.0
#: ``NodeUsageCPUExtend``, ``NodeUsageMemoryExtend``
CPU_REASON = "the CPU load of the node exceeds the upper limit."
MEMORY_REASON = "the memory load of the node exceeds the upper limit."
MIB = 1024.0 * 1024.0

#: ``New``'s defaults
DEFAULTS: dict[str, float] = {
    "usage.weight": 5,
    "cpu.weight": 1,
    "memory.weight": 1,
    "cpu": 80.0,
    "mem": 80.0,
    "request_ratio": 0.7,
    "burst_ratio": 0.0,
    "risk_threshold": 0.6,
    "risk_factor": 1.2,
    "be_cpu": 250.0,
    "be_mem": 200 * MIB,
}

_warned: set[tuple[str, str]] = set()


def _keep_default(key: str, value: object, why: str) -> None:
    """One log line per setting and value (plugins are built every session)."""
    if (key, repr(value)) not in _warned:
        _warned.add((key, repr(value)))
        log.warning(
            "usage: %s %r %s; the default %r is used (as Volcano does)", key, value, why, DEFAULTS[key]
        )


# -- arguments ----------------------------------------------------------------------------------------
def _number(kind: type) -> Callable[[str, Any], Any]:
    def read(where: str, value: Any) -> Any:
        if isinstance(value, bool):
            raise ArgumentError(f"{where} must be a number, got {value!r}")
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise ArgumentError(f"{where} must be a number, got {value!r}") from None
        if kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise ArgumentError(f"{where} must be an integer, got {value!r}")
            if isinstance(value, (int, float)):
                return int(value)
        elif isinstance(value, (int, float)):
            return float(value)
        raise ArgumentError(f"{where} must be a number, got {value!r}")

    return read


def _quantity(where: str, value: Any) -> int | str:
    """``be_cpu`` / ``be_mem``: an integer or a quantity string (judged when read, as Volcano does)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value
    raise ArgumentError(f"{where} must be an integer or a quantity such as 250m or 200Mi, got {value!r}")


def _section(fields: dict[str, Callable[[str, Any], Any]]) -> Callable[[str, Any], dict[str, Any]]:
    def read(where: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ArgumentError(f"{where} must be a mapping, got {value!r}")
        out: dict[str, Any] = {}
        for key, item in value.items():
            check = fields.get(str(key))
            if check is None:
                raise ArgumentError(f"{where} has no setting {key!r} (its settings: {', '.join(fields)})")
            if item is not None:
                out[str(key)] = check(f"{where}.{key}", item)
        return out

    return read


_THRESHOLDS = _section({"cpu": _number(int), "mem": _number(int)})
_ESTIMATOR = _section(
    {
        "request_ratio": _number(float),
        "burst_ratio": _number(float),
        "risk_threshold": _number(float),
        "risk_factor": _number(float),
        "be_cpu": _quantity,
        "be_mem": _quantity,
    }
)


def best_effort_cpu(value: int | str | None) -> float:
    """``parseBestEffortCPU``: an integer is millicores, a string a quantity; negative or unreadable:
    the default."""
    default = DEFAULTS["be_cpu"]
    if value is None:
        return default
    if isinstance(value, int):
        if value < 0:
            _keep_default("be_cpu", value, "is negative")
            return default
        return float(value)
    try:
        millis = parse_cpu_millis(value)
    except QuantityError:
        _keep_default("be_cpu", value, "is not a quantity")
        return default
    if millis < 0:
        _keep_default("be_cpu", value, "is negative")
        return default
    return millis


def best_effort_memory(value: int | str | None) -> float:
    """``parseBestEffortMemory``: an integer is MiB, a string a quantity (bytes); negative or
    unreadable: the default."""
    default = DEFAULTS["be_mem"]
    if value is None:
        return default
    if isinstance(value, int):
        if value < 0:
            _keep_default("be_mem", value, "is negative")
            return default
        return value * MIB
    try:
        size = parse_bytes(value)
    except QuantityError:
        _keep_default("be_mem", value, "is not a quantity")
        return default
    if size < 0:
        _keep_default("be_mem", value, "is negative")
        return default
    return size


def _within(key: str, value: float | None, ok: Callable[[float], bool], why: str) -> float:
    if value is None:
        return DEFAULTS[key]
    if not ok(value):
        _keep_default(key, value, why)
        return DEFAULTS[key]
    return value


# -- estimator.go ---------------------------------------------------------------------------------------
def load_composite(cpu: float, memory: float, cpu_weight: int, memory_weight: int) -> float:
    """``CalcLoadCompositePercentage``."""
    total = cpu_weight + memory_weight
    if total == 0:
        return 0.0
    return (cpu * cpu_weight + memory * memory_weight) / total


def applied_risk_factor(load: float, risk_threshold: float, risk_factor: float) -> float:
    """``CalcAppliedRiskFactor``."""
    if risk_factor < 1.0:
        return 1.0
    return risk_factor if load >= risk_threshold else 1.0


def estimate_pod_resource(
    request: float, limit: float, request_weight: float, burst_weight: float, risk: float
) -> float:
    """``EstimatePodResource``."""
    request = max(request, 0.0)
    effective = request if limit <= 0 or limit < request else limit
    burst = max(effective - request, 0.0)
    return min(max((request * request_weight + burst * burst_weight) * risk, 0.0), effective)


def estimate_best_effort(configured: float, risk: float) -> float:
    """``EstimateBestEffortResource``."""
    return max(configured, 0.0) * risk


def composite_utilization(real_percent: Any, shadow: Any, capacity: Any) -> Any:
    """``CalcCompositeUtilization``, over scalars or arrays alike."""
    capacity = np.asarray(capacity, dtype=float)
    has = capacity > 0
    safe = np.where(has, capacity, 1.0)
    comp = (np.asarray(real_percent) / 100.0 * capacity + shadow) / safe
    return np.where(has, np.clip(comp, 0.0, 1.0), 0.0)


def node_score(
    cpu_comp: Any, memory_comp: Any, cpu_weight: int, memory_weight: int, usage_weight: int
) -> Any:
    """``CalcNodeScore``, over scalars or arrays alike."""
    total = cpu_weight + memory_weight
    if total == 0:
        return np.zeros_like(np.asarray(cpu_comp, dtype=float))
    score = (
        (1.0 - np.asarray(cpu_comp)) * cpu_weight + (1.0 - np.asarray(memory_comp)) * memory_weight
    ) / total
    return score * MAX_NODE_SCORE * usage_weight


def _cpu_memory(items: dict[str, Any] | None) -> tuple[float, float]:
    if not items:
        return 0.0, 0.0
    try:
        cpu = parse_cpu_millis(items["cpu"]) if "cpu" in items else 0.0
        memory = parse_bytes(items["memory"]) if "memory" in items else 0.0
    except QuantityError:
        return 0.0, 0.0  # the pod's own bad quantity is reported where its requests are read
    return cpu, memory


def _aggregate(pod: Pod, limits: bool) -> tuple[float, float]:
    """``aggregateAllContainerResourceRequests`` / ``...Limits`` for cpu and memory."""

    def of(container: Any) -> tuple[float, float]:
        res = container.resources
        return _cpu_memory(res.limits if limits else res.requests)

    cpu = memory = 0.0
    for c in pod.spec.containers:
        a, b = of(c)
        cpu, memory = cpu + a, memory + b
    side_cpu = side_memory = 0.0
    init_cpu = init_memory = 0.0
    for c in pod.spec.init_containers:
        a, b = of(c)
        if c.restart_policy == "Always":
            cpu, memory = cpu + a, memory + b
            side_cpu, side_memory = side_cpu + a, side_memory + b
            a, b = side_cpu, side_memory
        else:
            a, b = a + side_cpu, b + side_memory
        init_cpu, init_memory = max(init_cpu, a), max(init_memory, b)
    return max(cpu, init_cpu), max(memory, init_memory)


def pod_request_limit(pod: Pod) -> tuple[float, float, float, float]:
    """``getPodResourceRequestLimit``: (cpu request, cpu limit, memory request, memory limit), cpu
    in millicores, memory in bytes (``GetPodResourceRequest``, ``GetPodResourceLimit``: the overhead
    is added to the requests, and to a limit only where it is set)."""
    cpu_req, memory_req = _aggregate(pod, limits=False)
    cpu_lim, memory_lim = _aggregate(pod, limits=True)
    over_cpu, over_memory = _cpu_memory(pod.spec.overhead)
    cpu_req, memory_req = cpu_req + over_cpu, memory_req + over_memory
    if cpu_lim:
        cpu_lim += over_cpu
    if memory_lim:
        memory_lim += over_memory
    return cpu_req, cpu_lim, memory_req, memory_lim


def in_metrics_blind_spot(task: TaskInfo, interval: float, now: float) -> bool:
    """``shouldAddToShadowCache``: a pod on a node whose load the metrics do not show yet."""
    if not task.node_name:
        return False
    status = task.status
    if status in (TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND):
        return True
    if status == TaskStatus.RUNNING:
        started = parse_timestamp(task.pod.status.start_time)
        return started <= 0 or now - started < interval
    return False


# -- shadow_cache.go -----------------------------------------------------------------------------------
class ShadowLoad:
    """``ShadowLoadCache`` for one session, by node row: the estimates of pods the metrics do not show
    yet, and per pod what was added, so that undoing it subtracts exactly that."""

    def __init__(self, rows: int) -> None:
        self.cpu = np.zeros(rows)
        self.memory = np.zeros(rows)
        self.added: dict[str, tuple[int, float, float]] = {}

    def add(self, uid: str, row: int, cpu: float, memory: float) -> None:
        """``AddEstimate``: a pod added again first loses its earlier estimate."""
        if uid in self.added:
            self.subtract(uid)
        self.cpu[row] += cpu
        self.memory[row] += memory
        self.added[uid] = (row, cpu, memory)

    def subtract(self, uid: str) -> None:
        """``SubEstimateBySnapshot``: nothing for a pod never added; never below zero."""
        got = self.added.pop(uid, None)
        if got is None:
            return
        row, cpu, memory = got
        self.cpu[row] = max(self.cpu[row] - cpu, 0.0)
        self.memory[row] = max(self.memory[row] - memory, 0.0)


class _Capacity:
    """``ssn.node_memo`` key: every row's capacity (cpu millicores, memory bytes)."""


def _capacities(nodes: list[NodeInfo]) -> tuple[np.ndarray, np.ndarray]:
    cpu = np.zeros(len(nodes))
    memory = np.zeros(len(nodes))
    for node in nodes:
        given = node.node.status.capacity
        if given:
            cpu[node.row], memory[node.row] = _cpu_memory(given)
        else:  # a node without capacity (built by hand): its allocatable
            cpu[node.row], memory[node.row] = node.allocatable.cpu, node.allocatable.memory
    return cpu, memory


class UsagePlugin(Plugin):
    name: ClassVar[str] = NAME
    arguments_schema: ClassVar[dict[str, type]] = {
        "usage.weight": int,
        "cpu.weight": int,
        "memory.weight": int,
        "thresholds": structured(dict, _THRESHOLDS),
        "estimator": structured(dict, _ESTIMATOR),
    }

    def read_arguments(self) -> None:
        """``New``: the arguments with Volcano's defaults and ranges."""
        a = self.arguments
        weights = {}
        for key in ("usage.weight", "cpu.weight", "memory.weight"):
            weights[key] = int(_within(key, a.get_typed(key, int, None), lambda v: v >= 0, "is negative"))
        self.usage_weight = weights["usage.weight"]
        self.cpu_weight = weights["cpu.weight"]
        self.memory_weight = weights["memory.weight"]
        thresholds = a.get_typed("thresholds", dict, {})
        percent = "is not within 0-100"
        self.cpu_threshold = _within("cpu", thresholds.get("cpu"), lambda v: 0 <= v <= 100, percent)
        self.memory_threshold = _within("mem", thresholds.get("mem"), lambda v: 0 <= v <= 100, percent)
        est = a.get_typed("estimator", dict, {})
        unit = "is not within [0, 1]"
        self.request_ratio = _within("request_ratio", est.get("request_ratio"), lambda v: 0 <= v <= 1, unit)
        self.burst_ratio = _within("burst_ratio", est.get("burst_ratio"), lambda v: 0 <= v <= 1, unit)
        self.risk_threshold = _within(
            "risk_threshold", est.get("risk_threshold"), lambda v: 0 <= v <= 1, unit
        )
        self.risk_factor = _within("risk_factor", est.get("risk_factor"), lambda v: v >= 1, "is below 1")
        self.be_cpu = best_effort_cpu(est.get("be_cpu"))
        self.be_memory = best_effort_memory(est.get("be_mem"))

    def on_session_open(self, ssn: Session) -> None:
        self.read_arguments()
        view = ssn.snapshot.node_usage
        nodes = ssn.node_list
        rows = len(nodes)
        self.fresh = np.zeros(rows, dtype=bool)
        self.cpu = np.zeros(rows)
        self.memory = np.zeros(rows)
        if view is not None:
            for node in nodes:
                usage = view.fresh(node.name)
                if usage is not None:
                    self.fresh[node.row] = True
                    self.cpu[node.row] = usage.cpu
                    self.memory[node.row] = usage.memory
        if not self.fresh.any():
            # no node has fresh data: every node passes and scores 0 (Volcano's degraded mode), so
            # there is nothing to register and no pod to look at
            return
        self.ssn = ssn
        self.capacity_cpu, self.capacity_memory = ssn.node_memo(_Capacity, lambda: _capacities(nodes))
        self.shadow = ShadowLoad(rows)
        interval = view.interval if view is not None else 0.0
        now = view.at if view is not None else 0.0
        for node in nodes:
            if self.fresh[node.row]:
                for task in node.tasks.values():
                    if in_metrics_blind_spot(task, interval, now):
                        self.add_estimate(task, node.row)
        ssn.add_event_handler(EventHandler(allocate=self.on_allocate, deallocate=self.on_deallocate))
        ssn.add_bulk_predicate_fn(self.name, self.passes, self.explain, local=True)
        ssn.add_bulk_node_order_fn(self.name, self.score, local=True)

    # -- shadow estimates ----------------------------------------------------------------------------
    def composites(self, rows: Any) -> tuple[Any, Any]:
        cpu = composite_utilization(self.cpu[rows], self.shadow.cpu[rows], self.capacity_cpu[rows])
        memory = composite_utilization(
            self.memory[rows], self.shadow.memory[rows], self.capacity_memory[rows]
        )
        return cpu, memory

    def estimate(self, task: TaskInfo, row: int) -> tuple[float, float]:
        """``estimateTaskResource`` with the node's ``calcAppliedRiskFactor``."""
        cpu, memory = self.composites(row)
        load = load_composite(float(cpu), float(memory), self.cpu_weight, self.memory_weight)
        risk = applied_risk_factor(load, self.risk_threshold, self.risk_factor)
        if task.best_effort:
            return estimate_best_effort(self.be_cpu, risk), estimate_best_effort(self.be_memory, risk)
        cpu_req, cpu_lim, memory_req, memory_lim = pod_request_limit(task.pod)
        return (
            estimate_pod_resource(cpu_req, cpu_lim, self.request_ratio, self.burst_ratio, risk),
            estimate_pod_resource(memory_req, memory_lim, self.request_ratio, self.burst_ratio, risk),
        )

    def add_estimate(self, task: TaskInfo, row: int) -> None:
        cpu, memory = self.estimate(task, row)
        self.shadow.add(task.uid, row, cpu, memory)

    def on_allocate(self, event: Event) -> None:
        """``handleAllocate``."""
        node = self.ssn.nodes.get(event.task.node_name)
        if node is not None:
            self.add_estimate(event.task, node.row)

    def on_deallocate(self, event: Event) -> None:
        """``handleDeallocate``."""
        self.shadow.subtract(event.task.uid)

    # -- callbacks -----------------------------------------------------------------------------------
    def _failing(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fresh = self.fresh[rows]
        cpu = fresh & (self.cpu[rows] > self.cpu_threshold)
        memory = fresh & ~cpu & (self.memory[rows] > self.memory_threshold)
        return cpu, memory

    def passes(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """``predicateFn`` over rows."""
        cpu, memory = self._failing(rows)
        return ~(cpu | memory)

    def explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        cpu, memory = self._failing(rows)
        return {CPU_REASON: cpu, MEMORY_REASON: memory}

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """``nodeOrderFn`` over rows: ``calcNodeScore`` where the data is fresh, else 0."""
        cpu, memory = self.composites(rows)
        score = node_score(cpu, memory, self.cpu_weight, self.memory_weight, self.usage_weight)
        return np.where(self.fresh[rows], score, 0.0)  # type: ignore[no-any-return]
