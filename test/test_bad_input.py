"""Bad input at the edges, property-based: whatever bytes a watch line holds, and whatever JSON value
any field of an object of any watched kind holds, the watch gives a clear error (a 410 or an ERROR
event) or skips the object with one log line, applies what it can, and goes on: no exception out of
it, no re-list forced by the cache choking on a decodable object, and the next good event applies.
The same for the scheduler conf: any text, or any value anywhere in a full conf, is a conf or a
ConfError that says what is wrong, and through the ConfigMap watch one error line at most."""

from __future__ import annotations

import asyncio
import copy
import logging
import math
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from caldera.cache.client import ApiClient, ApiError, ClusterConfig
from caldera.cache.informer import Informers
from caldera.cache.store import ClusterCache
from caldera.cache.watch import Expired, Reflector
from caldera.config.conf import ConfError, parse_conf
from caldera.framework.objects import (
    CSINode,
    HyperNode,
    PersistentVolume,
    PersistentVolumeClaim,
    PodDisruptionBudget,
    PriorityClass,
    StorageClass,
)
from caldera.hack.scenario import (
    cpu_detail,
    node_dict,
    numatopology_dict,
    pod_dict,
    podgroup_dict,
    queue_dict,
)
from caldera.scheduler.confsource import DEFAULT_KEY, ConfSource
from caldera.scheduler.registry import builtin_registry

# Short runs: the suite shares a busy 2-core machine.
QUICK = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _full(kind: type[msgspec.Struct], name: str, namespace: str = "") -> dict[str, Any]:
    """An object of ``kind`` with every field present (its defaults), named."""
    doc: dict[str, Any] = msgspec.to_builtins(kind())
    doc["metadata"] = {**doc.get("metadata", {}), "name": name, "uid": f"uid-{name}", "resourceVersion": "1"}
    if namespace:
        doc["metadata"]["namespace"] = namespace
    return doc


def _pod() -> dict[str, Any]:
    pod = pod_dict("p", group="pg", node_name="n1", phase="Running", priority=5)
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}
            ]
        }
    }
    pod["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    return pod


def _node() -> dict[str, Any]:
    node = node_dict("n1", cpu="8")
    node["spec"]["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    return node


#: a valid object of every kind the scheduler watches, by the informer's names for them
SAMPLES: dict[str, dict[str, Any]] = {
    "pods": _pod(),
    "nodes": _node(),
    "podgroups": podgroup_dict("pg", min_member=2),
    "queues": queue_dict("q"),
    "priorityclasses": {**_full(PriorityClass, "high"), "value": 1000},
    "hypernodes": _full(HyperNode, "h1"),
    "poddisruptionbudgets": {
        **_full(PodDisruptionBudget, "pdb", "default"),
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "minAvailable": 1},
    },
    "persistentvolumeclaims": _full(PersistentVolumeClaim, "c", "default"),
    "persistentvolumes": _full(PersistentVolume, "v"),
    "storageclasses": _full(StorageClass, "s"),
    "csinodes": _full(CSINode, "n1"),
    "numatopologies": numatopology_dict("n1", cpu_detail(2, 2), res_reserved={"cpu": "1"}),
}

QUANTITIES = st.sampled_from(
    ["1", "100m", "1Gi", "-1", "1e400", "1e999999", "0.000000001", "9" * 40 + "Ei", "", "Ki", "1.5.3"]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | QUANTITIES
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


@st.composite
def replaced(draw: st.DrawFn, doc: Any, values: Any) -> Any:
    """A copy of ``doc`` with one to three of its parts (or itself) replaced by a value drawn from
    ``values(current)`` (``current``: what is there now)."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(doc))))
        parent = None
        current = doc
        for step in path:
            parent, current = current, current[step]
        value = draw(values(current))
        if parent is None:
            doc = value
        else:
            parent[path[-1]] = value
    return doc


def _like(value: Any) -> st.SearchStrategy[Any]:
    """A value of the same JSON type as ``value`` (it passes decoding more often, reaching the cache)."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(min_value=-(2**63), max_value=2**63 - 1)
    if isinstance(value, str):
        return QUANTITIES | st.text(max_size=20)
    return JSON


def mutated(kind: str) -> st.SearchStrategy[Any]:
    """The kind's sample with one to three of its fields (or itself) replaced by any JSON value, or
    by a value of the same type."""
    return replaced(SAMPLES[kind], lambda current: JSON | _like(current))


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def watched() -> Iterator[tuple[Informers, Lines]]:
    informers = Informers(ApiClient(ClusterConfig(host="http://127.0.0.1:9")), ClusterCache())
    lines = Lines()
    logger = logging.getLogger("caldera")
    logger.addHandler(lines)
    yield informers, lines
    logger.removeHandler(lines)


def _feed(reflector: Reflector[Any], line: bytes) -> None:
    """One watch line; what it may raise is what the watch loop reads as the server's word."""
    try:
        reflector._line(line)
    except Expired:
        assert b"ERROR" in line  # only an ERROR event (a 410) says so
    except ApiError:
        assert b"ERROR" in line


def _still_watching(informers: Informers, kind: str, n: int) -> None:
    """A good event after the bad ones applies: the watch did not stop, the cache is not broken."""
    good = copy.deepcopy(SAMPLES[kind])
    good["metadata"]["name"] = f"good-{n}"
    good["metadata"]["uid"] = f"good-uid-{n}"
    good["metadata"]["resourceVersion"] = str(1000 + n)
    informers.reflectors[kind]._line(msgspec.json.encode({"type": "ADDED", "object": good}))
    assert informers.reflectors[kind].resource_version == str(1000 + n)
    for node in informers.cache.nodes.values():  # no quantity summed in as infinite
        for amount in (node.allocatable, node.used, node.idle):
            assert math.isfinite(amount.cpu) and math.isfinite(amount.memory)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
@QUICK
@given(data=st.data())
def test_any_field_of_any_watched_kind_holding_any_json_value(watched, kind, data) -> None:
    informers, lines = watched
    reflector = informers.reflectors[kind]
    etype = data.draw(st.sampled_from(["ADDED", "MODIFIED", "DELETED"]))
    obj = data.draw(mutated(kind))
    lines.records.clear()
    skipped = reflector.stats.skipped
    _feed(reflector, msgspec.json.encode({"type": etype, "object": obj}))
    said = [r for r in lines.records if r.levelno >= logging.WARNING]
    assert not any(r.exc_info for r in said), [r.getMessage() for r in said]  # nothing raised inside
    assert len(said) <= 1, [r.getMessage() for r in said]  # a skip is one line
    if reflector.stats.skipped > skipped:
        assert len(said) == 1
    _still_watching(informers, kind, data.draw(st.integers(0, 10**6)))


@pytest.mark.parametrize("kind", ["pods", "nodes", "podgroups", "queues"])
@QUICK
@given(line=st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
@example(line=b"[" * 100_000)  # deeper than msgspec decodes: RecursionError, which stopped the watch
@example(line=b'{"type":"ADDED","object":' + b"[" * 100_000 + b"]" * 100_000 + b"}")
def test_any_bytes_on_a_watch_line(watched, kind, line) -> None:
    informers, lines = watched
    reflector = informers.reflectors[kind]
    lines.records.clear()
    _feed(reflector, line)
    assert not any(r.exc_info for r in lines.records)
    assert len([r for r in lines.records if r.levelno >= logging.WARNING]) <= 1
    _still_watching(informers, kind, 0)


@pytest.mark.parametrize("kind", ["pods", "nodes"])
@QUICK
@given(page=st.binary(max_size=200) | JSON.map(msgspec.json.encode))
def test_any_list_page_is_applied_or_a_clear_error(kind, page) -> None:
    class Answer:
        async def request(self, *args: Any, **kwargs: Any) -> bytes:
            return page

    cache = ClusterCache()
    informers = Informers(Answer(), cache)  # type: ignore[arg-type]
    try:
        asyncio.run(informers.reflectors[kind].list())
    except ApiError as exc:
        assert exc.reason == "BadList" and "undecodable list" in exc.message
    else:
        assert informers.reflectors[kind].synced.is_set()


@pytest.mark.parametrize("cpu", ["1e999999", "1e400"])
def test_a_quantity_beyond_range_is_a_skipped_object_not_an_exception_or_infinity(watched, cpu) -> None:
    """A quantity whose exponent overflows Decimal (1e999999) raised decimal.Overflow out of the
    cache; one beyond a float's range (1e400) was summed into the node as infinity."""
    informers, lines = watched
    node = _node()
    node["status"]["allocatable"]["cpu"] = cpu
    pod = _pod()
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    for kind, obj in (("nodes", node), ("pods", pod)):
        lines.records.clear()
        informers.reflectors[kind]._line(msgspec.json.encode({"type": "ADDED", "object": obj}))
        said = [r for r in lines.records if r.levelno >= logging.WARNING]
        assert len(said) == 1 and not said[0].exc_info and "out of range" in said[0].getMessage()
        _still_watching(informers, kind, 1)
    assert "n1" not in informers.cache.nodes
    assert informers.cache.unreadable  # the pod is reported as unreadable (an Event says why)


# -- the scheduler conf ----------------------------------------------------------------------------
REGISTRY = builtin_registry()

#: a conf with arguments in several places (the shapes Volcano's own confs use)
FULL_CONF = {
    "actions": "enqueue, allocate, preempt, reclaim, backfill",
    "tiers": [
        {
            "plugins": [
                {"name": "priority"},
                {"name": "gang", "enablePreemptable": False},
                {"name": "conformance"},
            ]
        },
        {
            "plugins": [
                {"name": "overcommit", "arguments": {"overcommit-factor": 1.5}},
                {"name": "drf", "enableHierarchy": True},
                {"name": "predicates", "arguments": {"predicate.NodeAffinityEnable": True}},
                {"name": "proportion"},
                {
                    "name": "nodeorder",
                    "arguments": {"leastrequested.weight": 1, "balancedresource.weight": 2},
                },
                {
                    "name": "binpack",
                    "arguments": {"binpack.weight": 10, "binpack.resources": "nvidia.com/gpu"},
                },
            ]
        },
    ],
    "configurations": [{"name": "allocate", "arguments": {"predicateErrorCacheEnable": True}}],
}
#: conf texts: any text, or the full conf with any value (floats NaN and infinite too) anywhere
CONF_TEXTS = st.text(max_size=300) | replaced(FULL_CONF, lambda _: JSON | st.floats()).map(yaml.safe_dump)


def test_the_full_conf_parses() -> None:
    assert parse_conf(yaml.safe_dump(FULL_CONF), REGISTRY).actions[0] == "enqueue"


@QUICK
@given(text=CONF_TEXTS)
def test_any_conf_text_is_a_conf_or_a_clear_error(text: str) -> None:
    try:
        parse_conf(text, REGISTRY)
    except ConfError as exc:
        message = str(exc)
        # One line that says what is wrong, but for YAML's own report of where the text breaks
        assert message and ("\n" not in message or message.startswith("scheduler conf is not valid YAML"))


@QUICK
@given(text=CONF_TEXTS, n=st.integers(0, 10**6))
def test_a_conf_configmap_holding_any_conf_is_one_line_at_most_and_the_watch_goes_on(
    watched, text: str, n: int
) -> None:
    _, lines = watched
    source = ConfSource("configmap:kube-system/caldera", REGISTRY)
    reflector = source.reflector_for(ApiClient(ClusterConfig(host="http://127.0.0.1:9")))
    meta = {"name": "caldera", "namespace": "kube-system", "resourceVersion": str(n)}
    lines.records.clear()
    reflector._line(
        msgspec.json.encode({"type": "MODIFIED", "object": {"metadata": meta, "data": {DEFAULT_KEY: text}}})
    )
    said = [r for r in lines.records if r.levelno >= logging.WARNING]
    assert len(said) <= 1 and not any(r.exc_info for r in said)
    assert reflector.resource_version == str(n)
