"""Status writes whose only news is a message, held back per object (scheduler/status.py).

A pending pod's PodScheduled condition and a pending PodGroup's Unschedulable condition name why
("0/83 nodes are available: 12 Insufficient cpu, ..."); in a busy cluster those counts move every
cycle while nothing else does. A write whose status and reason are those last written, and whose
object was written less than a refresh period ago, is held here: the newest such write per object
replaces the one held and goes when the period ends (``due``). Anything else (a first write, another
status or reason, a phase or count that moved) goes at once and drops what was held.
"""

from __future__ import annotations

import heapq
from collections.abc import Container
from typing import Generic, TypeVar

W = TypeVar("W")


class HeldRefreshes(Generic[W]):
    """Per object key: when its status was last written and the newest message-only write held
    back, with the time it falls due."""

    __slots__ = ("_due", "held", "written_at")

    def __init__(self) -> None:
        #: per key, the clock time of its last write
        self.written_at: dict[str, float] = {}
        #: per key, the newest write held back and when it falls due
        self.held: dict[str, tuple[float, W]] = {}
        #: (due, key) in due order; an entry whose key is no longer held with that time is passed over
        self._due: list[tuple[float, str]] = []

    def hold(self, key: str, write: W, message_only: bool, now: float, period: float) -> bool:
        """Whether ``write`` is held back (True) or is to go now (False: what was held is dropped).
        Held when only its message is new and the key was written less than ``period`` ago, or when a
        message-only write is already held (the newest replaces it, due as it was)."""
        if message_only:
            held = self.held.get(key)
            if held is not None:
                self.held[key] = (held[0], write)
                return True
            written = self.written_at.get(key)
            if written is not None and now < written + period:
                due = written + period
                heapq.heappush(self._due, (due, key))
                self.held[key] = (due, write)
                return True
        self.held.pop(key, None)
        return False

    def written(self, key: str, now: float) -> None:
        self.written_at[key] = now

    def drop(self, key: str) -> None:
        """What was held for ``key`` is wanted no more (the object says it already, or the wish is back
        to what was written)."""
        self.held.pop(key, None)

    def forget(self, key: str) -> None:
        """The object is gone."""
        self.written_at.pop(key, None)
        self.held.pop(key, None)

    def keep_only(self, present: Container[str]) -> None:
        """After a re-list: forget the keys not in ``present``."""
        for key in [k for k in (*self.written_at, *self.held) if k not in present]:
            self.forget(key)

    def due(self, now: float) -> list[tuple[str, W]]:
        """The writes held whose time has come, in due order, no longer held."""
        heap = self._due
        out: list[tuple[str, W]] = []
        while heap and heap[0][0] <= now:
            due, key = heapq.heappop(heap)
            entry = self.held.get(key)
            if entry is None or entry[0] != due:
                continue  # written, wanted no more or forgotten meanwhile
            del self.held[key]
            out.append((key, entry[1]))
        return out

    def next_due(self) -> float | None:
        """The clock time the earliest held write falls due (None: nothing is held). An entry passed
        over later may make this early: the caller wakes, finds nothing due and waits again."""
        return self._due[0][0] if self._due else None

    def __len__(self) -> int:
        return len(self.held)
