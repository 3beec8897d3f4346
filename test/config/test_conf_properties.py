"""The conf parser, property-based: any text, and any value in any place of a full conf, gives a
conf or a :class:`ConfError` that says what is wrong; through the ConfigMap watch, a rejected conf is
one error line and the watch goes on."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caldera.cache.client import ApiClient, ClusterConfig
from caldera.config.conf import ConfError, parse_conf
from caldera.scheduler.confsource import DEFAULT_KEY, ConfSource
from caldera.scheduler.registry import builtin_registry

QUICK = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
REGISTRY = builtin_registry()

#: a conf with arguments in several places (the shapes Volcano's own confs use)
FULL = {
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

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=10,
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
def mutated_conf(draw: st.DrawFn) -> str:
    doc: Any = copy.deepcopy(FULL)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(doc))))
        value = draw(VALUES)
        if not path:
            doc = value
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = value
    return yaml.safe_dump(doc)


def test_the_full_conf_parses() -> None:
    assert parse_conf(yaml.safe_dump(FULL), REGISTRY).actions[0] == "enqueue"


def _parsed_or_clear(text: str) -> None:
    try:
        parse_conf(text, REGISTRY)
    except ConfError as exc:
        message = str(exc)
        assert message
        # One line, but for YAML's own report of where the text breaks
        assert "\n" not in message or message.startswith("scheduler conf is not valid YAML")


@QUICK
@given(text=st.text(max_size=300))
def test_any_text(text: str) -> None:
    _parsed_or_clear(text)


@QUICK
@given(text=mutated_conf())
def test_any_value_anywhere_in_a_full_conf(text: str) -> None:
    _parsed_or_clear(text)


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def conf_watch() -> Iterator[tuple[ConfSource, Lines]]:
    source = ConfSource("configmap:kube-system/caldera", REGISTRY)
    source.reflector_for(ApiClient(ClusterConfig(host="http://127.0.0.1:9")))
    lines = Lines()
    logger = logging.getLogger("caldera")
    logger.addHandler(lines)
    yield source, lines
    logger.removeHandler(lines)


@QUICK
@given(text=mutated_conf() | st.text(max_size=200), n=st.integers(0, 10**6))
def test_a_conf_configmap_with_any_conf_is_one_line_at_most_and_the_watch_goes_on(
    conf_watch, text: str, n: int
) -> None:
    source, lines = conf_watch
    reflector = source.reflector
    cm = {
        "metadata": {"name": "caldera", "namespace": "kube-system", "resourceVersion": str(n)},
        "data": {DEFAULT_KEY: text},
    }
    lines.records.clear()
    reflector._line(msgspec.json.encode({"type": "MODIFIED", "object": cm}))
    said = [r for r in lines.records if r.levelno >= logging.WARNING]
    assert len(said) <= 1 and not any(r.exc_info for r in said)
    assert reflector.resource_version == str(n)
