"""The batched histogram and counter export exactly what prometheus_client's Histogram and Counter
export for the same observations, at every scrape: buckets, count, sum and total to the last bit, with
or without labels, with amounts on the bucket bounds, beyond the last bound, negative, infinite and
NaN, across the automatic applies (FLUSH_AT), and observed from several threads while scrapes run."""

from __future__ import annotations

import math
import random
import threading

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from caldera.metrics import scheduler as m
from caldera.metrics.batched import FLUSH_AT, BatchedCounter, BatchedHistogram

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def pair(
    labels: tuple[str, ...] = (),
) -> tuple[Histogram, BatchedHistogram, CollectorRegistry, CollectorRegistry]:
    plain_registry, batched_registry = CollectorRegistry(), CollectorRegistry()
    plain = Histogram("h_seconds", "help", labels, buckets=BUCKETS, registry=plain_registry)
    batched = BatchedHistogram("h_seconds", "help", labels, buckets=BUCKETS, registry=batched_registry)
    return plain, batched, plain_registry, batched_registry


def scrape(registry: CollectorRegistry) -> list[str]:
    """The exposition, without the creation timestamps (the two histograms were made moments apart)."""
    return [line for line in generate_latest(registry).decode().splitlines() if "_created" not in line]


def amounts(rng: random.Random, n: int) -> list[float]:
    """Latency-like amounts, many exactly on a bound, some outside every bucket or odd."""
    out: list[float] = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.2:
            out.append(float(rng.choice(BUCKETS)))
        elif roll < 0.22:
            out.append(rng.choice([0.0, -0.5, 31.0, 1e9]))
        else:
            out.append(rng.lognormvariate(-4, 2))
    return out


def test_every_scrape_shows_what_the_plain_histogram_shows() -> None:
    plain, batched, plain_registry, batched_registry = pair()
    rng = random.Random(17)
    for size in (0, 1, 7, FLUSH_AT - 1, 1, FLUSH_AT * 3 + 5, 250):
        for amount in amounts(rng, size):
            plain.observe(amount)
            batched.observe(amount)
        assert scrape(batched_registry) == scrape(plain_registry)
        assert batched.pending() == 0, "a scrape applies everything pending"
    # the sum is the plain one to the last bit, not merely close (a sum of the batch would differ)
    assert batched_registry.get_sample_value("h_seconds_sum") == plain_registry.get_sample_value(
        "h_seconds_sum"
    )
    assert (
        batched_registry.get_sample_value("h_seconds_count")
        == 1 + 7 + FLUSH_AT - 1 + 1 + FLUSH_AT * 3 + 5 + 250
    )


def test_pending_observations_stay_bounded_without_a_scrape() -> None:
    _, batched, _, _ = pair()
    for i in range(FLUSH_AT * 5 + 3):
        batched.observe(i / 1000)
        assert batched.pending() < FLUSH_AT
    assert batched.pending() == 3


def test_infinity_lands_in_the_last_bucket_and_nan_in_none_as_in_prometheus_client() -> None:
    plain, batched, plain_registry, batched_registry = pair()
    for amount in (0.003, math.inf, 7.0):
        plain.observe(amount)
        batched.observe(amount)
    assert scrape(batched_registry) == scrape(plain_registry)
    assert batched_registry.get_sample_value("h_seconds_bucket", {"le": "30.0"}) == 2
    assert batched_registry.get_sample_value("h_seconds_bucket", {"le": "+Inf"}) == 3
    for amount in (0.2, math.nan):
        plain.observe(amount)
        batched.observe(amount)
    assert scrape(batched_registry) == scrape(plain_registry)
    assert batched_registry.get_sample_value("h_seconds_count") == 4
    assert math.isnan(batched_registry.get_sample_value("h_seconds_sum") or 0.0)


def test_labelled_children_and_exemplars() -> None:
    plain, batched, plain_registry, batched_registry = pair(("action",))
    rng = random.Random(3)
    for amount in amounts(rng, 3000):
        action = rng.choice(["allocate", "backfill", "preempt"])
        plain.labels(action).observe(amount)
        batched.labels(action).observe(amount)
    plain.labels("allocate").observe(0.02, {"trace": "a"})
    batched.labels("allocate").observe(0.02, {"trace": "a"})
    batched.remove("preempt")
    plain.remove("preempt")
    assert scrape(batched_registry) == scrape(plain_registry)
    try:
        batched.observe(1.0)
    except ValueError as exc:  # a labelled parent is not observable, as with prometheus_client
        assert "No label names were set" in str(exc) or "missing label" in str(exc).lower()
    else:
        raise AssertionError("observing a labelled parent must fail")


def test_observations_from_threads_during_scrapes_are_all_counted() -> None:
    _, batched, _, batched_registry = pair()
    per_thread, threads = 20_000, 4
    done = threading.Event()
    counts: list[float] = []

    def scraper() -> None:
        while not done.is_set():
            counts.append(batched_registry.get_sample_value("h_seconds_count") or 0.0)

    def observer() -> None:
        for _ in range(per_thread):
            batched.observe(0.5)

    watching = threading.Thread(target=scraper)
    watching.start()
    workers = [threading.Thread(target=observer) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    watching.join()
    assert counts == sorted(counts), "a scrape never shows fewer observations than one before it"
    assert batched_registry.get_sample_value("h_seconds_count") == per_thread * threads
    assert batched_registry.get_sample_value("h_seconds_bucket", {"le": "0.5"}) == per_thread * threads
    assert batched_registry.get_sample_value("h_seconds_sum") == 0.5 * per_thread * threads


def test_the_per_pod_histograms_are_batched_and_keep_their_names_and_buckets() -> None:
    assert isinstance(m.BIND_DURATION, BatchedHistogram) and isinstance(m.TASK_LATENCY, BatchedHistogram)
    assert m.BIND_DURATION._name == "caldera_bind_duration_seconds"
    assert m.TASK_LATENCY._name == "volcano_task_scheduling_latency_milliseconds"
    assert m.BIND_DURATION._upper_bounds == [*map(float, BUCKETS), math.inf]
    assert m.TASK_LATENCY._upper_bounds == [float(5 * 2**i) for i in range(15)] + [math.inf]


def counters(
    labels: tuple[str, ...] = (),
) -> tuple[Counter, BatchedCounter, CollectorRegistry, CollectorRegistry]:
    plain_registry, batched_registry = CollectorRegistry(), CollectorRegistry()
    plain = Counter("c", "help", labels, registry=plain_registry)
    batched = BatchedCounter("c", "help", labels, registry=batched_registry)
    return plain, batched, plain_registry, batched_registry


def test_the_counter_shows_what_the_plain_counter_shows_at_every_scrape() -> None:
    plain, batched, plain_registry, batched_registry = counters(("result",))
    rng = random.Random(5)
    for size in (0, 1, FLUSH_AT + 17, 3, FLUSH_AT * 2):
        for _ in range(size):
            result = rng.choice(["bound", "failed"])
            amount = rng.choice([1, 1, 1, 0, 0.1, 2.5, rng.random()])
            plain.labels(result).inc(amount)
            batched.labels(result).inc(amount)
        assert scrape(batched_registry) == scrape(plain_registry)
        assert all(child.pending() == 0 for child in batched._metrics.values())
    # fractions added one at a time, in order: the same float as prometheus_client's, not a batch sum
    assert batched_registry.get_sample_value(
        "c_total", {"result": "bound"}
    ) == plain_registry.get_sample_value("c_total", {"result": "bound"})


def test_the_counter_refuses_what_prometheus_client_refuses_and_resets_pending_too() -> None:
    plain, batched, plain_registry, batched_registry = counters()
    for counter in (plain, batched):
        counter.inc(3)
        try:
            counter.inc(-1)
        except ValueError:
            pass
        else:
            raise AssertionError("a negative increment must fail")
        counter.inc()
        counter.reset()
        counter.inc(2)
        counter.inc(1, {"trace": "t"})
    assert scrape(batched_registry) == scrape(plain_registry)
    assert batched_registry.get_sample_value("c_total") == 3
    parent = BatchedCounter("p", "help", ["result"], registry=CollectorRegistry())
    try:
        parent.inc()
    except ValueError:
        pass
    else:
        raise AssertionError("a labelled parent is not observable")


def test_counter_increments_from_threads_during_scrapes_are_all_counted() -> None:
    _, batched, _, batched_registry = counters()
    done = threading.Event()
    seen: list[float] = []

    def scraper() -> None:
        while not done.is_set():
            seen.append(batched_registry.get_sample_value("c_total") or 0.0)

    def incrementer() -> None:
        for _ in range(20_000):
            batched.inc()

    watching = threading.Thread(target=scraper)
    watching.start()
    workers = [threading.Thread(target=incrementer) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    watching.join()
    assert seen == sorted(seen)
    assert batched_registry.get_sample_value("c_total") == 80_000


def test_the_binds_counter_is_batched_and_keeps_its_name_and_label() -> None:
    assert isinstance(m.BINDS, BatchedCounter)
    assert m.BINDS._name == "caldera_binds" and m.BINDS._labelnames == ("result",)
