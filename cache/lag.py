"""How far the cache's view runs behind the API server, measured on this replica's own binds.

Kubernetes gives a watch event no timestamp, but a replica knows two moments of each pod it binds:
when the API server answered the binding (``Assumptions.confirm_bound``) and when the pod watch
brought that pod back bound (``Ingest.upsert_pod``). The time between them is how late the cache
learns what the API server already holds: the API server's own fan-out, the network, and this
process's event loop reading its watches (a starved process, a loop held by a long step, a watch
behind a slow server all show here). A watch that brings the pod first counts 0.

``caldera_watch_bind_delay_seconds`` is the histogram of those delays; ``summary()`` gives the recent
figures and, for binds answered but not yet seen, how many and how long the oldest has waited (a
watch that has stopped delivering shows there before any delay is observed); ``/debug/scheduler``
carries it. What is kept is one entry per bind answered and not yet seen: forgotten when the watch
brings the pod, when the pod is deleted, or when the bind is given up.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import numpy as np
from prometheus_client import Histogram

WATCH_BIND_DELAY = Histogram(
    "caldera_watch_bind_delay_seconds",
    "From the API server answering one of this replica's bindings to its pod watch bringing the pod "
    "bound (0 when the watch came first): how far the cache's view runs behind the API server.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
#: delays kept for the recent figures of ``summary``
RECENT = 2048


def recent_figures(values: deque[float] | list[float]) -> dict[str, float | int]:
    """``{"recent": n, "p50_ms", "p99_ms", "max_ms"}`` of ``values`` (seconds); only ``recent`` when empty."""
    if not values:
        return {"recent": 0}
    arr = np.fromiter(values, dtype=float, count=len(values)) * 1000.0
    p50, p99 = np.percentile(arr, (50, 99))
    return {
        "recent": len(values),
        "p50_ms": round(float(p50), 1),
        "p99_ms": round(float(p99), 1),
        "max_ms": round(float(arr.max()), 1),
    }


class WatchLag:
    """The bind-answered-to-watch-seen delays of one cache (see the module's docstring). Called under
    the cache's lock, from the event loop."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, keep: int = RECENT) -> None:
        self.clock = clock
        #: pod uid -> when the API server answered its binding, oldest first
        self._answered: dict[str, float] = {}
        self._recent: deque[float] = deque(maxlen=keep)
        self.observed = 0

    def answered(self, uid: str) -> None:
        """The API server accepted the binding of ``uid`` (its watch event has not come yet)."""
        self._answered[uid] = self.clock()

    def seen(self, uid: str, answered_first: bool) -> None:
        """The pod watch brought ``uid`` bound: after its binding's answer (``answered_first``), or
        before it (the delay is 0)."""
        at = self._answered.pop(uid, None)
        if answered_first and at is None:
            return  # not a bind this replica saw answered (a re-list after a restart, another binder)
        delay = max(0.0, self.clock() - at) if at is not None else 0.0
        self._recent.append(delay)
        self.observed += 1
        WATCH_BIND_DELAY.observe(delay)

    def forget(self, uid: str) -> None:
        """The pod is gone, or its bind was given up: it will not be seen bound."""
        self._answered.pop(uid, None)

    @property
    def awaiting(self) -> int:
        return len(self._answered)

    def summary(self) -> dict[str, float | int]:
        """For ``/debug/scheduler``: delays observed in all, the recent ones' p50/p99/max, and the
        binds answered but not yet seen, with the age of the oldest."""
        doc: dict[str, float | int] = {"observed": self.observed, **recent_figures(self._recent)}
        doc["awaiting"] = len(self._answered)
        if self._answered:
            oldest = next(iter(self._answered.values()))
            doc["oldest_awaiting_ms"] = round(max(0.0, self.clock() - oldest) * 1000.0, 1)
        return doc


__all__ = ["RECENT", "WATCH_BIND_DELAY", "WatchLag", "recent_figures"]
