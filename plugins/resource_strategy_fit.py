"""resource-strategy-fit: per-resource LeastAllocated / MostAllocated scoring with weights, scarce
resource avoidance (sra) and a proportional reservation of cpu and memory beside scarce resources.
Volcano's ``resource-strategy-fit`` plugin (pkg/scheduler/plugins/resource-strategy-fit/).

Arguments, exactly as Volcano's ``New`` reads them (``calculateWeight``, ``applySraPolicy``,
``applyProportionalPolicy``; the nested settings as mapstructure decodes them into Volcano's structs,
field names matched without regard to case):

- ``resourceStrategyFitWeight`` (int; missing or negative: 10; 0 turns the strategy score off);
- ``resources``: resource name → ``{type: LeastAllocated|MostAllocated, weight: int}``; missing or
  empty: cpu and memory, LeastAllocated, weight 1. A weight of 0 or less counts as 1, another type as
  LeastAllocated; a name may end in one ``*`` (``nvidia.com/*``): a resource without a setting of its
  own takes the longest such prefix's (``findResourceConfigWithPrefix``); ``*`` alone and other
  patterns are dropped, as Volcano drops them (with a log line);
- ``sra``: ``{enable, resources: "a, b", weight, resourceWeight: {name: int}}``;
- ``proportional``: ``{enable, resources: "a, b", resourceProportion: {"a.cpu": float, "a.memory": float}}``.

Score (``Score``): over the resources the pod requests that have a setting (or, when the pod has the
annotation ``volcano.sh/resource-strategy-scoring-type``, those named in its
``volcano.sh/resource-strategy-weight`` JSON map, with that type), LeastAllocated scores
(allocatable - used - request) / allocatable and MostAllocated (used + request) / allocatable, times
the resource's weight; the sum over the sum of weights times 100 and ``resourceStrategyFitWeight``.
A node where a scored resource would go over allocatable scores 0 (so does a pod whose annotation has
no weights or weights that do not parse); a node without the resource scores 0 for it, its weight
still counted. sra (``sraScore``): 0 on a node lacking a resource the pod requests; else (1 - the
weights of the sra resources the node has / their sum) * 100 * ``sra.weight``: a pod that does not
need a scarce resource is steered away from nodes that have it. The two add up.

Predicate (``checkNodeResourceIsProportional``, only with ``proportional.enable``): a pod that
requests none of the proportional resources may not leave a node less idle cpu than ``a.cpu`` cores
or less idle memory than ``a.memory`` GB (10^9 bytes) per idle unit of each resource ``a`` the node has
("proportional of resource a check failed").

Both are node-local bulk functions; the pod's two annotations are what besides its template they read
(``add_template_qualifier``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from caldera.framework.model import TaskInfo
from caldera.framework.plugin import ArgumentError, Plugin, structured
from caldera.framework.resource import MIN_RESOURCE

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.resource-strategy-fit")

DEFAULT_WEIGHT = 10
MAX_NODE_SCORE = 100.0
LEAST, MOST = "LeastAllocated", "MostAllocated"
#: ResourceStrategyAnnotationKey, ResourceStrategyWeightAnnotationKey
SCORING_TYPE_ANNOTATION = "volcano.sh/resource-strategy-scoring-type"
SCORING_WEIGHT_ANNOTATION = "volcano.sh/resource-strategy-weight"


# -- arguments, as mapstructure decodes them into Volcano's structs ------------------------------------
def _int(where: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ArgumentError(f"{where} must be an integer, got {value!r}")


def _float(where: str, value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ArgumentError(f"{where} must be a number, got {value!r}")


def _bool(where: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ArgumentError(f"{where} must be true or false, got {value!r}")


def _str(where: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise ArgumentError(f"{where} must be a string, got {value!r}")


def _map_of(check: Callable[[str, Any], Any]) -> Callable[[str, Any], dict[str, Any]]:
    def read(where: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ArgumentError(f"{where} must be a mapping, got {value!r}")
        return {str(k): check(f"{where}[{k!r}]", v) for k, v in value.items()}

    return read


def _struct(fields: dict[str, Callable[[str, Any], Any]]) -> Callable[[str, Any], dict[str, Any]]:
    """A mapping read like mapstructure into a struct: keys match field names without regard to
    case; a key that names no field is refused (Volcano would ignore it: no setting is accepted and
    ignored here)."""
    by_fold = {name.casefold(): name for name in fields}

    def read(where: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ArgumentError(f"{where} must be a mapping, got {value!r}")
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = by_fold.get(str(key).casefold())
            if name is None:
                raise ArgumentError(f"{where} has no setting {key!r} (its settings: {', '.join(fields)})")
            if item is not None:
                out[name] = fields[name](f"{where}.{name}", item)
        return out

    return read


_RESOURCES = _map_of(_struct({"type": _str, "weight": _int}))
_SRA = _struct({"enable": _bool, "resources": _str, "weight": _int, "resourceWeight": _map_of(_int)})
_PROPORTIONAL = _struct({"enable": _bool, "resources": _str, "resourceProportion": _map_of(_float)})


def valid_pattern(name: str) -> bool:
    """``isValidWildcardPattern``: no ``*``, or exactly one, at the end, after something."""
    if "*" not in name:
        return True
    return name != "*" and name.endswith("*") and name.count("*") == 1


def strategy_resources(settings: dict[str, dict[str, Any]] | None) -> dict[str, tuple[str, int]]:
    """``calculateWeight``'s resources: name → (type, weight), with Volcano's defaults and fixes."""
    if not settings:
        return {"cpu": (LEAST, 1), "memory": (LEAST, 1)}
    out: dict[str, tuple[str, int]] = {}
    for name, item in settings.items():
        if not valid_pattern(name):
            log.warning(
                "resource-strategy-fit: resource pattern %r ignored (only one trailing '*' is supported)",
                name,
            )
            continue
        weight = item.get("weight", 0)
        kind = item.get("type", "")
        out[name] = (kind if kind in (LEAST, MOST) else LEAST, weight if weight > 0 else 1)
    return out


def find_setting(name: str, resources: dict[str, tuple[str, int]]) -> tuple[str, int] | None:
    """``findResourceConfigWithPrefix``: the exact name's setting, else the longest matching prefix's."""
    got = resources.get(name)
    if got is not None:
        return got
    best, best_len = None, 0
    for pattern, setting in resources.items():
        if pattern.endswith("*"):
            prefix = pattern[:-1]
            if name.startswith(prefix) and len(prefix) > best_len:
                best, best_len = setting, len(prefix)
    return best


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def sra_weights(settings: dict[str, Any]) -> tuple[int, dict[str, int]]:
    """``calculateSraWeight``: (sra weight, resource → weight; a negative weight counts as 1)."""
    if not settings.get("enable", False):
        return 0, {}
    given = settings.get("resourceWeight", {})
    weights = {}
    for name in _names(settings.get("resources", "")):
        w = given.get(name, 1)
        weights[name] = w if w >= 0 else 1
    return settings.get("weight", 0), weights


def proportions(settings: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """``calculateProportionalResources``: resource → (cpu cores, memory GB) reserved per unit."""
    if not settings.get("enable", False):
        return {}
    given = settings.get("resourceProportion", {})
    out = {}
    for name in _names(settings.get("resources", "")):
        cpu = given.get(f"{name}.cpu", 1.0)
        memory = given.get(f"{name}.memory", 1.0)
        out[name] = (cpu if cpu >= 0 else 1.0, memory if memory >= 0 else 1.0)
    return out


def requested_names(task: TaskInfo) -> list[str]:
    """``Resource.ResourceNames``: cpu, memory and the scalars the pod requests (at least 0.1)."""
    req = task.resreq
    return [name for name, value in req.items() if value >= MIN_RESOURCE]


class ResourceStrategyFitPlugin(Plugin):
    name: ClassVar[str] = "resource-strategy-fit"
    arguments_schema: ClassVar[dict[str, type]] = {
        "resourceStrategyFitWeight": int,
        "resources": structured(dict, _RESOURCES),
        "sra": structured(dict, _SRA),
        "proportional": structured(dict, _PROPORTIONAL),
    }

    def on_session_open(self, ssn: Session) -> None:
        a = self.arguments
        weight = a.int("resourceStrategyFitWeight", DEFAULT_WEIGHT)
        self.weight = DEFAULT_WEIGHT if weight < 0 else weight
        self.resources = strategy_resources(a.get_typed("resources", dict, None))
        self.sra_weight, self.sra = sra_weights(a.get_typed("sra", dict, {}))
        self.sra_sum = sum(self.sra.values())
        self.proportional = proportions(a.get_typed("proportional", dict, {}))
        self.ssn = ssn
        if self.proportional:
            ssn.add_bulk_predicate_fn(self.name, self.proportional_fit, self.explain, local=True)
        if self.weight > 0 or self.sra_weight > 0:
            ssn.add_bulk_node_order_fn(self.name, self.score, local=True)
            ssn.add_template_qualifier(self.name, _annotations_key)

    # -- score -----------------------------------------------------------------------------------
    def _pod_settings(self, task: TaskInfo) -> dict[str, tuple[str, int]] | None:
        """The pod's own scoring (its two annotations), {} when they are unusable (score 0), None
        when it has none."""
        annotations = task.pod.metadata.annotations
        kind = annotations.get(SCORING_TYPE_ANNOTATION, "")
        if not kind:
            return None
        raw = annotations.get(SCORING_WEIGHT_ANNOTATION, "")
        try:
            weights = json.loads(raw) if raw else None
        except ValueError:
            weights = None
        if not isinstance(weights, dict) or not all(
            isinstance(w, int) and not isinstance(w, bool) for w in weights.values()
        ):
            log.debug(
                "pod %s/%s: unusable %s annotation: %r",
                task.namespace,
                task.name,
                SCORING_WEIGHT_ANNOTATION,
                raw,
            )
            return {}
        return {str(name): (kind, w) for name, w in weights.items()}

    def strategy_score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """``Score`` over ``rows``."""
        t = self.ssn.table
        total = np.zeros(len(rows))
        pod = self._pod_settings(task)
        if pod == {}:
            return total
        ok = np.ones(len(rows), dtype=bool)
        weight_sum = 0
        for name in requested_names(task):
            setting = pod.get(name) if pod is not None else find_setting(name, self.resources)
            if setting is None:
                continue
            kind, weight = setting
            weight_sum += weight
            col = t.dims.get(name)
            if weight == 0 or col is None or kind not in (LEAST, MOST):
                continue
            alloc = t.allocatable[rows, col]
            final = t.used[rows, col] + task.resreq.get(name)
            has = alloc != 0
            ok &= ~has | (final <= alloc)
            safe = np.where(has, alloc, 1.0)
            part = final / safe if kind == MOST else (alloc - final) / safe
            total += np.where(has, part * weight, 0.0)
        if weight_sum > 0:
            total /= weight_sum
        return np.where(ok, total * MAX_NODE_SCORE * self.weight, 0.0)  # type: ignore[no-any-return]

    def sra_score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """``sraScore`` over ``rows``."""
        t = self.ssn.table
        lacks = np.zeros(len(rows), dtype=bool)
        for name in requested_names(task):
            col = t.dims.get(name)
            lacks |= True if col is None else t.allocatable[rows, col] == 0
        score = np.zeros(len(rows))
        for name, w in self.sra.items():
            col = t.dims.get(name)
            if col is not None:
                score += np.where(t.allocatable[rows, col] > 0, float(w), 0.0)
        if self.sra_sum > 0:
            score = 1.0 - score / self.sra_sum
        return np.where(lacks, 0.0, score * MAX_NODE_SCORE * self.sra_weight)  # type: ignore[no-any-return]

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        total = self.strategy_score(task, rows) if self.weight > 0 else np.zeros(len(rows))
        if self.sra_weight > 0:
            total = total + self.sra_score(task, rows)
        return total

    # -- proportional predicate ------------------------------------------------------------------
    def _failing(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Per proportional resource: the rows whose idle cpu or memory, less the pod's request,
        falls below what that resource's idle units reserve. Empty when the pod requests one."""
        req = task.resreq
        if any(req.get(name) > 0 for name in self.proportional):
            return {}
        t = self.ssn.table
        out: dict[str, np.ndarray] = {}
        cpu_left = t.idle[rows, 0] - req.cpu
        memory_left = t.idle[rows, 1] - req.memory
        decided = np.zeros(len(rows), dtype=bool)
        for name, (cpu_rate, memory_rate) in self.proportional.items():
            col = t.dims.get(name)
            if col is None:
                continue
            idle = t.idle[rows, col]
            found = t.allocatable[rows, col] > 0
            fails = (
                found & ~decided & ((cpu_left < idle * cpu_rate) | (memory_left < idle * memory_rate * 1e6))
            )
            decided |= fails
            if fails.any():
                out[f"proportional of resource {name} check failed"] = fails
        return out

    def proportional_fit(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        ok = np.ones(len(rows), dtype=bool)
        for fails in self._failing(task, rows).values():
            ok &= ~fails
        return ok

    def explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        return self._failing(task, rows)


def _annotations_key(task: TaskInfo) -> bytes:
    annotations = task.pod.metadata.annotations
    kind = annotations.get(SCORING_TYPE_ANNOTATION)
    if kind is None:
        return b""
    return f"{kind}\0{annotations.get(SCORING_WEIGHT_ANNOTATION, '')}".encode()
