"""How late this process's event loop runs: a timer's lateness, measured four times a second.

Everything the binary does on its event loop (watch events, bind answers, lease renewals, the snapshot's
steps, /debug pages) waits while the loop is held: by a long step on it, by the decision thread holding
the interpreter's lock, by a process starved of CPU. A sleep of ``PERIOD`` that wakes later than asked
says by how much, whatever held it. ``caldera_event_loop_lag_seconds`` is the histogram of that
lateness; ``summary()`` gives the recent figures for ``/debug/scheduler`` (beside the watch's delay,
``cache/lag.py``: a large watch delay with a small loop lag points at the API server's side).
"""

from __future__ import annotations

import asyncio
from collections import deque

from caldera.cache.lag import RECENT, recent_figures
from caldera.metrics import scheduler as m

#: seconds between two measurements
PERIOD = 0.25


class LoopLag:
    def __init__(self, period: float = PERIOD, keep: int = RECENT) -> None:
        self.period = period
        self._recent: deque[float] = deque(maxlen=keep)
        self.observed = 0

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            asked = loop.time() + self.period
            await asyncio.sleep(self.period)
            self.note(loop.time() - asked)

    def note(self, late: float) -> None:
        late = max(0.0, late)
        self._recent.append(late)
        self.observed += 1
        m.LOOP_LAG.observe(late)

    def summary(self) -> dict[str, float | int]:
        """For ``/debug/scheduler``: measurements in all, and the recent ones' p50/p99/max."""
        return {"observed": self.observed, **recent_figures(self._recent)}


__all__ = ["PERIOD", "LoopLag"]
