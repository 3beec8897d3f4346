"""The soak's clock (seconds since the start) and its event log."""

from __future__ import annotations

import time


class Timeline:
    def __init__(self, events: list[str], verbose: bool = False) -> None:
        self.t0 = time.monotonic()
        self.events = events
        self.verbose = verbose

    def now(self) -> float:
        return time.monotonic() - self.t0

    def log(self, msg: str) -> None:
        line = f"[{self.now():7.1f}s] {msg}"
        self.events.append(line)
        if self.verbose:
            print(line, flush=True)
