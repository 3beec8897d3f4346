"""Fault injection for reliability tests; every knob can be changed while the cluster runs."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Faults:
    # Fraction of API requests (0..1) answered 429 TooManyRequests with Retry-After, and 500 InternalError.
    error_429_rate: float = 0.0
    error_500_rate: float = 0.0
    # Added to every API request, in seconds: a fixed part plus a uniformly random part.
    latency: float = 0.0
    latency_jitter: float = 0.0
    # Close every open watch stream this often (seconds); 0 disables. `abort` resets the connection instead.
    drop_watches_every: float = 0.0
    drop_watches_abort: bool = False
    # Forget the watch history this often (seconds), so clients resuming from an older version get 410.
    compact_every: float = 0.0
    # Seconds of Retry-After sent with 429.
    retry_after: int = 1
    # Restrict errors and latency to requests for which this answers True: target(method, path).
    target: Callable[[str, str], bool] | None = None
    seed: int | None = None
    _rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.seed is not None:
            self._rng.seed(self.seed)

    @property
    def active(self) -> bool:
        return bool(self.error_429_rate or self.error_500_rate or self.latency or self.latency_jitter)

    def pick_error(self) -> int | None:
        if not (self.error_429_rate or self.error_500_rate):
            return None
        x = self._rng.random()
        if x < self.error_429_rate:
            return 429
        if x < self.error_429_rate + self.error_500_rate:
            return 500
        return None

    def pick_latency(self) -> float:
        if self.latency_jitter:
            return self.latency + self._rng.random() * self.latency_jitter
        return self.latency

    def clear(self) -> None:
        self.error_429_rate = self.error_500_rate = 0.0
        self.latency = self.latency_jitter = 0.0
        self.drop_watches_every = self.compact_every = 0.0
        self.target = None
