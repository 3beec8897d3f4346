"""The command line: durations, flags into options, the fail-fast path for an unusable conf."""

from __future__ import annotations

import argparse

import pytest

from caldera.scheduler.cli import build_parser, duration, options_from


@pytest.mark.parametrize(("text", "seconds"), [("1s", 1.0), ("200ms", 0.2), ("1.5m", 90.0), ("2", 2.0)])
def test_durations(text: str, seconds: float) -> None:
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "-1s", "0s"])
def test_bad_durations_are_rejected(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def test_flags_become_options() -> None:
    args = build_parser().parse_args(
        [
            "--scheduler-name",
            "a",
            "--scheduler-name",
            "b",
            "--schedule-period",
            "200ms",
            "--leader-elect",
            "--scheduler-conf",
            "configmap:ns/conf:key",
            "--log-format",
            "json",
        ]
    )
    opts = options_from(args)
    assert opts.scheduler_names == ["a", "b"] and opts.schedule_period == 0.2
    assert opts.leader_elect and opts.scheduler_conf == "configmap:ns/conf:key"
    assert options_from(build_parser().parse_args([])).scheduler_names == ["caldera"]
    assert options_from(build_parser().parse_args([])).listen_address == "127.0.0.1:8080"
