"""The Grafana dashboard in deploy/grafana only uses metrics the scheduler exports."""

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

import caldera.metrics.cycle  # noqa: F401 - every metric module is imported, so registered
from caldera.metrics.collectors import WatchCollector, WatchState

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "caldera-dashboard.json"
NAME = re.compile(r"\b((?:volcano|caldera)_[a-zA-Z0-9_]+)")


def exported_names() -> set[str]:
    names = set()
    collectors = [REGISTRY, WatchCollector(lambda: [WatchState("pods", True, 1, 2, 1, 0)])]
    for collector in collectors:
        for family in collector.collect():
            names.add(family.name)
            names.update(s.name for s in family.samples)
            # a labelled metric with no series yet has no samples: its names follow from its type
            if family.type == "counter":
                names.add(family.name + "_total")
            elif family.type == "histogram":
                names.update(family.name + suffix for suffix in ("_bucket", "_count", "_sum"))
    return names


def test_every_metric_the_dashboard_queries_is_exported():
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in NAME.findall(e)}
    assert len(used) >= 30
    missing = used - exported_names()
    # histograms are exported as _bucket/_count/_sum; counters as _total: sample names cover both
    assert not missing, f"dashboard queries metrics nobody exports: {sorted(missing)}"
    # every panel has a unique id and at least one query
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and all(p["targets"] for p in dash["panels"])
