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


def histogram_figures(m: Metrics, name: str) -> dict[str, float] | None:
    """A histogram's whole-life figures from its cumulative buckets: observations in all, the bucket
    bounds its median and its 99th percentile fall under, the bound of the highest bucket any
    observation reached, and how many took longer than a second. None when it has no observation."""
    buckets = sorted(
        (float(lab["le"]), v) for lab, v in m.get(name + "_bucket", []) if lab.get("le") is not None
    )
    if not buckets or not buckets[-1][1]:
        return None
    total = buckets[-1][1]

    def under(share: float) -> float:
        return next(le for le, n in buckets if n >= share * total)

    top = next(le for le, n in buckets if n >= total)
    over_1s = total - max((n for le, n in buckets if le <= 1.0), default=0.0)
    return {"count": total, "p50_le": under(0.5), "p99_le": under(0.99), "max_le": top, "over_1s": over_1s}
