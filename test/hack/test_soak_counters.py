"""The soak's bind-counter check over a probe window (hack/soak/checker.py, bind_counter_window).

The CI soak once reported "caldera_binds_total rose by 20 while the API showed 100 bindings" on a busy
machine: the leader lost its lease mid-window, exited 1 and was replaced, and the 80 bindings it had counted
left with the process. Such a window cannot be judged; a window where the replicas stayed is exact."""

from __future__ import annotations

from caldera.hack.soak.checker import bind_counter_window


def binds(n: float, failed: float = 0.0) -> dict:
    return {"caldera_binds_total": [({"result": "bound"}, n), ({"result": "failed"}, failed)]}


def test_a_leader_that_exits_mid_window_makes_the_window_unjudgeable_not_a_mismatch() -> None:
    # A (pid 1) led and bound 80 probe pods, lost its lease and exited; B (pid 2) took over and bound 20;
    # the supervisor started C (pid 3), which bound nothing yet.
    delta, reason = bind_counter_window(
        {1, 2}, {1: binds(500), 2: binds(0)}, {2, 3}, {2: binds(20), 3: binds(0)}
    )
    assert delta is None and "pid 1 exited" in reason


def test_a_stable_window_sums_every_replica_s_rise() -> None:
    delta, reason = bind_counter_window(
        {1, 2}, {1: binds(500, failed=3), 2: binds(7)}, {1, 2}, {1: binds(580, failed=9), 2: binds(27)}
    )
    assert (delta, reason) == (100.0, "")


def test_a_replica_started_in_the_window_counts_from_zero() -> None:
    delta, _ = bind_counter_window({1}, {1: binds(10)}, {1, 4}, {1: binds(15), 4: binds(5)})
    assert delta == 10.0


def test_an_unreadable_replica_at_either_end_makes_the_window_unjudgeable() -> None:
    assert bind_counter_window({1}, {1: None}, {1}, {1: binds(5)})[0] is None
    assert bind_counter_window({1}, {1: binds(5)}, {1}, {1: None})[0] is None
