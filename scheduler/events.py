"""One event recorder: Events written the way Kubernetes writes them.

client-go's event correlator (``tools/record/events_cache.go``: ``EventCorrelator.EventCorrelate``,
``eventLogger.eventObserve``) turns a repeat of an event about the same object into an update of
the Event already written (``count`` + 1, ``lastTimestamp``) instead of a new object, and a spam
filter (``EventSourceObjectSpamFilter``, a token bucket per source and object) caps how many
reach the API server. Here:

- an event is keyed by (involved object, type, reason); its first occurrence is POSTed, every
  repeat (whatever its message) updates that one Event: count, lastTimestamp and message;
- repeats are coalesced: an Event is PATCHed at most once per ``patch_interval`` carrying the
  count reached so far, so a reason repeated every cycle costs one write per interval;
- at most ``creates_per_minute`` Event objects are created per involved object per minute (a
  token bucket as the spam filter); occurrences beyond it are counted and dropped;
- an Event the server no longer has (404 on update: events expire after an hour) is created again.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("caldera.events")

#: A repeated event is written back (PATCH) at most this often per Event.
PATCH_INTERVAL = 10.0
#: New Event objects per involved object: burst and refill per minute.
CREATES_PER_MINUTE = 5
#: Events the scheduler remembers (oldest forgotten first); the server keeps them one hour.
MAX_SERIES = 20_000
FORGET_AFTER = 3600.0


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


SeriesKey = tuple[str, str, str]  # involved object, type, reason


@dataclass
class _Series:
    namespace: str
    ref: dict[str, str]
    etype: str
    reason: str
    message: str
    first_timestamp: str
    last_timestamp: str
    name: str = ""
    count: int = 1
    #: the Event exists on the server (its POST succeeded)
    created: bool = False
    in_flight: bool = False
    dirty: bool = True
    last_write: float = -1e18
    last_seen: float = 0.0


@dataclass
class EventWrite:
    """One request the recorder wants sent: a POST of a new Event or a PATCH of an existing one."""

    key: SeriesKey
    method: str  # "POST" | "PATCH"
    namespace: str
    name: str
    body: dict[str, Any]
    count: int


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class EventRecorder:
    component: str = "caldera"
    instance: str = ""
    clock: Callable[[], float] = time.monotonic
    patch_interval: float = PATCH_INTERVAL
    creates_per_minute: int = CREATES_PER_MINUTE
    _series: dict[SeriesKey, _Series] = field(default_factory=dict)
    _dirty: set[SeriesKey] = field(default_factory=set)
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    #: the series of each involved object, and the objects deleted while an Event about them was
    #: still to be written (``forget``)
    _by_object: dict[str, list[SeriesKey]] = field(default_factory=dict)
    _gone: set[str] = field(default_factory=set)
    #: occurrences dropped by the per-object creation limit
    dropped: int = 0
    created: int = 0
    updated: int = 0

    # -- recording ---------------------------------------------------------------------------------
    def record(self, ref: dict[str, str], etype: str, reason: str, message: str) -> None:
        obj = f"{ref.get('kind')}/{ref.get('namespace', '')}/{ref.get('name')}/{ref.get('uid', '')}"
        self._gone.discard(obj)
        key: SeriesKey = (obj, etype, reason)
        now = self.clock()
        stamp = now_rfc3339()
        series = self._series.get(key)
        if series is not None and now - series.last_seen > FORGET_AFTER:
            del self._series[key]  # the server has let it expire by now
            series = None
        if series is None:
            if not self._take_token(obj, now):
                self.dropped += 1
                return
            series = _Series(
                namespace=ref.get("namespace") or "default",
                ref=dict(ref),
                etype=etype,
                reason=reason,
                message=message[:1024],
                first_timestamp=stamp,
                last_timestamp=stamp,
                name=f"{ref.get('name')}.{uuid.uuid4().hex[:16]}",
            )
            self._series[key] = series
            keys = self._by_object.setdefault(obj, [])
            if key not in keys:
                keys.append(key)
            if len(self._series) > MAX_SERIES:
                self._forget_oldest()
        else:
            series.count += 1
            series.message = message[:1024]
            series.last_timestamp = stamp
            series.ref = dict(ref)
        series.last_seen = now
        series.dirty = True
        self._dirty.add(key)

    def _take_token(self, obj: str, now: float) -> bool:
        """client-go's spam filter, per object: a bucket of ``creates_per_minute`` tokens, refilled
        at that rate per minute; creating an Event takes one."""
        cap = float(max(1, self.creates_per_minute))
        bucket = self._buckets.get(obj)
        if bucket is None:
            bucket = self._buckets[obj] = _Bucket(cap, now)
            if len(self._buckets) > MAX_SERIES:
                for k in list(self._buckets)[: MAX_SERIES // 2]:
                    del self._buckets[k]
        else:
            bucket.tokens = min(cap, bucket.tokens + (now - bucket.at) * cap / 60.0)
            bucket.at = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def forget(self, obj: str) -> None:
        """The involved object ``obj`` is gone: no further occurrence can come, so its series and
        spam bucket go; a series with a write still to send goes once that write is done."""
        self._buckets.pop(obj, None)
        keys = self._by_object.pop(obj, None)
        if not keys:
            self._gone.discard(obj)
            return
        left = []
        for key in keys:
            series = self._series.get(key)
            if series is None:
                continue
            if key in self._dirty or series.in_flight:
                left.append(key)
            else:
                del self._series[key]
        if left:
            self._by_object[obj] = left
            self._gone.add(obj)
        else:
            self._gone.discard(obj)

    def _forget_oldest(self) -> None:
        by_age = sorted(self._series.items(), key=lambda kv: kv[1].last_seen)
        for key, _ in by_age[: len(by_age) // 2]:
            del self._series[key]
            self._dirty.discard(key)
        for obj in [o for o, keys in self._by_object.items() if not any(k in self._series for k in keys)]:
            del self._by_object[obj]
            self._gone.discard(obj)

    # -- writing -----------------------------------------------------------------------------------
    def due(self) -> list[EventWrite]:
        """The writes to send now: new Events, and updates of Events whose last write is at least
        ``patch_interval`` old. Updates not yet due stay pending (see :meth:`next_due`)."""
        now = self.clock()
        out: list[EventWrite] = []
        for key in list(self._dirty):
            series = self._series.get(key)
            if series is None:
                self._dirty.discard(key)
                continue
            if series.in_flight:
                continue
            if series.created and now - series.last_write < self.patch_interval:
                continue
            self._dirty.discard(key)
            series.dirty = False
            series.in_flight = True
            series.last_write = now
            out.append(self._write(key, series))
        return out

    def next_due(self) -> float | None:
        """Seconds until the earliest pending update is due; None when nothing waits."""
        if not self._dirty:
            return None
        now = self.clock()
        best: float | None = None
        for key in self._dirty:
            series = self._series.get(key)
            if series is None or series.in_flight:
                continue
            wait = 0.0 if not series.created else max(0.0, series.last_write + self.patch_interval - now)
            best = wait if best is None else min(best, wait)
        return best

    def _write(self, key: SeriesKey, s: _Series) -> EventWrite:
        if not s.created:
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": s.name, "namespace": s.namespace},
                "involvedObject": s.ref,
                "reason": s.reason,
                "message": s.message,
                "type": s.etype,
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "reportingInstance": self.instance or self.component,
                "firstTimestamp": s.first_timestamp,
                "lastTimestamp": s.last_timestamp,
                "count": s.count,
            }
            return EventWrite(key, "POST", s.namespace, s.name, body, s.count)
        body = {"count": s.count, "lastTimestamp": s.last_timestamp, "message": s.message}
        return EventWrite(key, "PATCH", s.namespace, s.name, body, s.count)

    def written(self, write: EventWrite, ok: bool, status: int = 0, retry: bool = False) -> None:
        """The outcome of a write: on success the Event exists; a 404 on update means the server
        dropped it (it is created again, under a new name); a transient failure is tried again."""
        series = self._series.get(write.key)
        if series is None:
            return
        series.in_flight = False
        if write.key[0] in self._gone:
            self._dirty.discard(write.key)  # the object is gone: this was the last write about it
            series.dirty = False
            self.forget(write.key[0])
        if ok or (write.method == "POST" and status == 409):
            if write.method == "POST":
                self.created += 1
            else:
                self.updated += 1
            series.created = True
            return
        if write.method == "PATCH" and status == 404:
            series.created = False
            series.name = f"{series.ref.get('name')}.{uuid.uuid4().hex[:16]}"
            retry = True
        if retry:
            series.dirty = True
            self._dirty.add(write.key)
        else:
            log.info(
                "event %s %s about %s dropped (HTTP %s)", write.method, series.reason, write.key[0], status
            )

    def __len__(self) -> int:
        return len(self._series)
