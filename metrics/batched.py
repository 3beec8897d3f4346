"""A histogram and a counter whose observations are counted in batches, exactly as prometheus_client
counts them.

prometheus_client's ``Histogram.observe`` (prometheus_client/metrics.py) checks the metric is
observable, adds the amount to ``_sum`` under its mutex, then walks ``_upper_bounds`` to the first
bound the amount does not exceed and adds 1 to that bucket under another mutex: two lock round trips
and a Python loop per observation, about 2.4 µs, paid for each bound pod on the event loop (the
binder's observers observe two histograms per pod).

Here ``observe`` appends the amount to a list. The pending amounts are applied before anything reads
the histogram (``_child_samples``, which ``collect`` and so every /metrics scrape and
``REGISTRY.get_sample_value`` go through) and whenever ``FLUSH_AT`` of them are pending, so memory
stays bounded without a scrape. Applying them gives the values ``observe`` would have given:

- each bucket gets its count in one addition: bucket counts are whole numbers, exact in a float far
  beyond any count reached (2**53);
- the sum is carried from its current value adding the amounts one at a time in the order they were
  observed, the same float additions ``observe`` does, then set;
- an amount goes to the first bucket whose upper bound it does not exceed (``bisect_left`` on the
  sorted bounds, which end with +Inf), as ``observe``'s walk does; a NaN, which exceeds no bound and
  is counted in no bucket by that walk, only reaches the sum.

Every change to the values goes through one lock (``_apply``), so observing from several threads and
scraping meanwhile neither loses nor reorders an observation: ``del pending[:n]`` removes exactly the
``n`` amounts copied, whatever was appended since. Observations with an exemplar, and any process in
prometheus_client's multiprocess mode (values in shared files read by a collector of their own, not
through ``_child_samples``), take prometheus_client's own path, after the pending amounts.

The counter is the same idea for ``Counter.inc`` (a check, then ``_value.inc`` under its mutex: about
1.5 µs, once per bound pod for ``caldera_binds_total{result="bound"}``): ``inc`` checks the amount as
prometheus_client does (negative amounts raise at once) and appends it; applying carries the value
adding the amounts one at a time in order, the float additions ``inc`` does. ``reset`` drops the
pending amounts with the value, as it drops the ones already applied.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import Any, cast

from prometheus_client import Counter, Histogram, values
from prometheus_client.samples import Sample

#: Pending observations of one histogram that are applied without waiting for a scrape.
FLUSH_AT = 1024

_MULTIPROCESS = bool(getattr(values.ValueClass, "_multiprocess", False))


class _Pending:
    """What a batched metric keeps: the amounts not applied yet, and the one lock every change to its
    values goes through."""

    _pending: list[float]
    _apply_lock: threading.Lock

    def _pending_init(self) -> None:
        self._pending = []
        self._apply_lock = threading.Lock()

    def _observable(self) -> list[float]:
        """The pending list; a labelled parent (never initialised as a child) raises as prometheus_client
        does for it."""
        try:
            return self._pending
        except AttributeError:
            cast(Any, self)._raise_if_not_observable()
            raise

    def _queue(
        self,
        pending: list[float],
        amount: float,
        exemplar: dict[str, str] | None,
        direct: Callable[..., None],
    ) -> None:
        """Queue ``amount``; with an exemplar, or in multiprocess mode, apply what is pending and let
        prometheus_client's own method (``direct``) count it."""
        if exemplar or _MULTIPROCESS:
            with self._apply_lock:
                self._apply_pending()
                direct(amount, exemplar)
            return
        pending.append(amount)
        if len(pending) >= FLUSH_AT:
            self._apply()

    def _apply(self) -> None:
        with self._apply_lock:
            self._apply_pending()

    def _apply_pending(self) -> None:
        raise NotImplementedError

    def _take(self) -> list[float]:
        """The pending amounts, removed (exactly those: whatever is appended meanwhile stays)."""
        pending = self._pending
        n = len(pending)
        batch = pending[:n]
        del pending[:n]
        return batch

    def pending(self) -> int:
        """Observations not applied yet (tests)."""
        return len(getattr(self, "_pending", ()))


class BatchedHistogram(_Pending, Histogram):
    """A ``prometheus_client.Histogram`` (same name, labels, buckets and exposition) with cheap
    ``observe``; see the module's notes for why the exported values are the same."""

    def _metric_init(self) -> None:
        super()._metric_init()
        self._pending_init()

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        self._queue(self._observable(), amount, exemplar, super().observe)

    def _apply_pending(self) -> None:
        batch = self._take()
        if not batch:
            return
        bounds = self._upper_bounds
        counts = [0] * len(bounds)
        total = self._sum.get()
        for amount in batch:
            total += amount
            if amount == amount:  # NaN is counted in no bucket
                counts[bisect_left(bounds, amount)] += 1
        self._sum.set(total)
        buckets = self._buckets
        for i, count in enumerate(counts):
            if count:
                buckets[i].inc(count)

    def _child_samples(self) -> Iterable[Sample]:
        self._apply()
        return super()._child_samples()


class BatchedCounter(_Pending, Counter):
    """A ``prometheus_client.Counter`` (same name, labels and exposition) with cheap ``inc``; see the
    module's notes for why the exported values are the same."""

    def _metric_init(self) -> None:
        super()._metric_init()
        self._pending_init()

    def inc(self, amount: float = 1, exemplar: dict[str, str] | None = None) -> None:
        pending = self._observable()
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self._queue(pending, amount, exemplar, super().inc)

    def _apply_pending(self) -> None:
        batch = self._take()
        if not batch:
            return
        total = self._value.get()
        for amount in batch:
            total += amount
        self._value.set(total)

    def reset(self) -> None:
        with self._apply_lock:
            del self._pending[:]
            super().reset()

    def _child_samples(self) -> Iterable[Sample]:
        self._apply()
        return super()._child_samples()


__all__ = ["FLUSH_AT", "BatchedCounter", "BatchedHistogram"]
