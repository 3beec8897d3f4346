"""Reading a scheduler replica's /metrics (fetched, parsed into series, summed by labels) and its
/debug/queues."""

from __future__ import annotations

from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

#: metric (or sample) name -> its series, each (labels, value)
Metrics = dict[str, list[tuple[dict[str, str], float]]]


def parse_metrics(text: str) -> Metrics:
    out: Metrics = {}
    for fam in text_string_to_metric_families(text):
        out.setdefault(fam.name, [])  # a family without series yet is still exported
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


async def scrape(http: aiohttp.ClientSession, base: str) -> Metrics | None:
    """The metrics at `base`/metrics, or None when the replica does not answer in time."""
    try:
        async with http.get(base + "/metrics", timeout=aiohttp.ClientTimeout(total=3)) as r:
            if r.status != 200:
                return None
            return parse_metrics(await r.text())
    except (TimeoutError, aiohttp.ClientError, OSError):
        return None


def value(m: Metrics, name: str, **labels: str) -> float | None:
    """The sum of the series of `name` whose labels include `labels`; None when `name` is not exported."""
    rows = m.get(name)
    if rows is None:
        return None
    return sum(v for lab, v in rows if all(lab.get(k) == w for k, w in labels.items()))


async def debug_queues(http: aiohttp.ClientSession, base: str) -> tuple[Any, dict[str, dict[str, Any]]]:
    """The replica's last cycle number and its queues by name (``/debug/queues``); (None, {}) when it
    does not answer in time."""
    try:
        async with http.get(base + "/debug/queues", timeout=aiohttp.ClientTimeout(total=5)) as r:
            doc = await r.json() if r.status == 200 else {}
    except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
        return None, {}
    return doc.get("cycle"), {q.get("name", ""): q for q in doc.get("queues") or []}
