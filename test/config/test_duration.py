"""One duration syntax for flags and plugin arguments: Go's time.ParseDuration, as Volcano reads both."""

from __future__ import annotations

import pytest

from caldera.config.duration import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("1.5m", 90.0),
        ("1h30m", 5400.0),
        ("2h45m10s", 9910.0),
        ("1m30.5s", 90.5),
        (".5s", 0.5),
        ("1.s", 1.0),
        ("250us", 0.00025),
        ("250µs", 0.00025),
        ("10ns", 1e-8),
        ("0", 0.0),
        ("-1.5h", -5400.0),
        ("+2s", 2.0),
        (" 3s ", 3.0),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "2", "0.5", "soon", "1d", "1 s", "s", ".s", "1h30", "h1", "-", "1s2"])
def test_what_go_rejects_is_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_bare_numbers_are_seconds_only_when_asked() -> None:
    assert parse_duration("2", bare_seconds=True) == 2.0
    assert parse_duration("0.5", bare_seconds=True) == 0.5
    assert parse_duration("1h30m", bare_seconds=True) == 5400.0
    with pytest.raises(ValueError):
        parse_duration("2s5", bare_seconds=True)
