"""Volcano's pkg/scheduler/plugins/cdp/cdp_test.go, ported as data.

Test_CooldownTimePlugin_podPreemptStableTime: the cooldown read from a pod ("normal", "not-enabled").
TestPreemptableFn: of three Running preemptable pods, the one scheduled 100 s ago with a 600 s
cooldown is filtered out; one whose cooldown does not parse and one scheduled 800 s ago stay victims.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from caldera.config.conf import parse_conf
from caldera.framework.model import TaskInfo
from caldera.framework.objects import Pod, convert
from caldera.framework.session import open_session
from caldera.hack.scenario import cluster, pod_dict
from caldera.plugins.cdp import cooldown_seconds
from volcano.port import REGISTRY

COOLDOWN = "volcano.sh/cooldown-time"


def make_pod(
    name: str, labels: dict[str, str], annotations: dict[str, str], scheduled_ago: float | None
) -> Pod:
    """cdp_test.go makePod: Running with a PodScheduled condition that turned True ``scheduled_ago``
    seconds ago, or Pending without conditions."""
    d = pod_dict(name, group="test-group", labels=labels, annotations=annotations, node_name="n1")
    if scheduled_ago is not None:
        at = datetime.fromtimestamp(time.time() - scheduled_ago, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        d["status"] = {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at}],
        }
    return convert(Pod, d)


@pytest.mark.parametrize(
    ("case", "value", "expected"), [("normal", "600s", 600.0), ("not-enabled", "600abcde", None)]
)
def test_pod_preempt_stable_time(case, value, expected):
    """Test_CooldownTimePlugin_podPreemptStableTime (None: not enabled)."""
    assert cooldown_seconds(make_pod("test-pod", {}, {COOLDOWN: value}, 100)) == expected, case


def test_preemptable_fn():
    """TestPreemptableFn: the plugin alone, preemptable enabled; victims task2 and task3."""
    preemptable = {"volcano.sh/preemptable": "true"}
    pods = {
        "task1": make_pod("task1", preemptable, {COOLDOWN: "600s"}, 100),
        "task2": make_pod("task2", preemptable, {COOLDOWN: "600abcde"}, 100),
        "task3": make_pod("task3", preemptable, {COOLDOWN: "600s"}, 800),
    }
    text = 'actions: "preempt"\ntiers:\n- plugins:\n  - name: cdp\n    enablePreemptable: true\n'
    parsed = parse_conf(text, REGISTRY)
    ssn = open_session(cluster(), parsed.tiers, REGISTRY.plugins, parsed.configurations)
    candidates = [TaskInfo.from_pod(p) for p in pods.values()]
    victims = ssn.preemptable(candidates[0], candidates)
    assert [t.name for t in victims] == ["task2", "task3"]
