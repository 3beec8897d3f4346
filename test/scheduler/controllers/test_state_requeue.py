"""The controllers' state asks for a PodGroup to be looked at again only when a pod changed in a way
a reconciler reads: not for the binding and status updates that make up most pod events."""

from __future__ import annotations

import msgspec
import pytest

from caldera.hack.scenario import pod
from caldera.scheduler.controllers.state import ControllerState

R = msgspec.structs.replace


def _state(reads_phase: bool) -> tuple[ControllerState, list[tuple[str, str]]]:
    touched: list[tuple[str, str]] = []
    return ControllerState(
        ("caldera",), "default", touched.append, lambda q: None, reads_phase=reads_phase
    ), touched


@pytest.mark.parametrize("reads_phase", [False, True])
def test_binding_and_condition_updates_do_not_requeue_the_group(reads_phase: bool) -> None:
    state, touched = _state(reads_phase)
    p = pod("web-0", group="web")
    state.pods_handler.upsert(p)
    assert touched == [("default", "web")]
    touched.clear()
    bound = R(p, spec=R(p.spec, node_name="n1"), metadata=R(p.metadata, resource_version="7"))
    state.pods_handler.upsert(bound)
    assert touched == []
    assert state.pods[p.metadata.uid] is bound  # the state holds the newest pod all the same
    running = R(bound, status=R(bound.status, phase="Running"))
    state.pods_handler.upsert(running)
    # the phase matters only where the PodGroup controller writes status counts
    assert touched == ([("default", "web")] if reads_phase else [])


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            lambda p: R(p, metadata=R(p.metadata, annotations={**p.metadata.annotations, "x": "y"})),
            id="annotations",
        ),
        pytest.param(lambda p: R(p, metadata=R(p.metadata, labels={"app": "web"})), id="labels"),
        pytest.param(
            lambda p: R(p, metadata=R(p.metadata, deletion_timestamp="2026-01-01T00:00:00Z")), id="deleting"
        ),
        pytest.param(lambda p: R(p, spec=R(p.spec, priority_class_name="high")), id="priority class"),
    ],
)
def test_a_change_a_reconciler_reads_requeues_the_group(change) -> None:
    state, touched = _state(reads_phase=False)
    p = pod("web-0", group="web")
    state.pods_handler.upsert(p)
    touched.clear()
    state.pods_handler.upsert(change(p))
    assert touched == [("default", "web")]


def test_a_pod_moved_to_another_group_requeues_both() -> None:
    state, touched = _state(reads_phase=False)
    p = pod("web-0", group="web")
    state.pods_handler.upsert(p)
    touched.clear()
    moved = R(p, metadata=R(p.metadata, annotations={"scheduling.k8s.io/group-name": "api"}))
    state.pods_handler.upsert(moved)
    assert touched == [("default", "web"), ("default", "api")]
    assert state.pods_of(("default", "api")) == [moved] and state.pods_of(("default", "web")) == []
