"""Durations as Volcano writes them: Go's time.Duration syntax, for flags (`--schedule-period 500ms`) and
plugin arguments (`sla-waiting-time: 1h30m`) alike."""

from __future__ import annotations

import re

# Go, src/time/format.go, ParseDuration: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, each number with digits before
# or after its point, units ns, us (or µs, μs), ms, s, m, h; a lone "0" needs no unit.
_SIGN = re.compile(r"[-+]?")
_PART = re.compile(r"(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h)")
_BARE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, *, bare_seconds: bool = False) -> float:
    """Seconds in `text`, a Go duration (``500ms``, ``1.5m``, ``1h30m``, ``-2s``); with `bare_seconds`, a
    plain number (``2``, ``0.5``) is seconds too, as the scheduler's flags have always taken it. Surrounding
    white space is ignored. Raises ValueError on anything else; the sign is the caller's to judge."""
    s = text.strip()
    if bare_seconds and _BARE.fullmatch(s):
        return float(s)
    sign = _SIGN.match(s)
    pos = sign.end() if sign else 0
    negative = s[:pos] == "-"
    if s[pos:] == "0":
        return 0.0
    if pos == len(s):
        raise ValueError(f"not a duration: {text!r} (use e.g. 500ms, 1.5m, 1h30m)")
    total = 0.0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None or not (m.group(1) or m.group(2)):
            raise ValueError(f"not a duration: {text!r} (use e.g. 500ms, 1.5m, 1h30m)")
        number = float(f"{m.group(1) or 0}.{m.group(2) or 0}")
        total += number * _UNITS[m.group(3)]
        pos = m.end()
    return -total if negative else total
