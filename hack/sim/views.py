"""events.k8s.io/v1 Events are a second view of core/v1 Events, stored once, as in a real API server."""

from __future__ import annotations

from typing import Any

_TO_CORE = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_TO_VIEW = {v: k for k, v in _TO_CORE.items()}


def event_to_core(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Event"}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind"):
            out[_TO_CORE.get(str(key), str(key))] = value
    return out


def event_to_view(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind"):
            out[_TO_VIEW.get(key, key)] = value
    return out
