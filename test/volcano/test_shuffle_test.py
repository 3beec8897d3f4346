"""Volcano's pkg/scheduler/actions/shuffle/shuffle_test.go, ported as data.

TestShuffle, case "select pods with low priority and evict them": a fake plugin (enabledVictim) whose
victim function selects the Running pods of priority 10; shuffle evicts exactly those three of the
seven Running pods (ExpectEvictNum 3, ExpectEvicted test/pod1-1, test/pod2-1, test/pod3-1).
"""

from __future__ import annotations

from typing import Any, ClassVar

from caldera.framework.plugin import Plugin
from caldera.scheduler.registry import builtin_registry
from volcano.port import build_node, build_pod, build_podgroup, build_queue, res, run

HIGH, LOW = 100, 10


def registry_with_fake(enabled: list[bool]) -> Any:
    """The built-ins plus the test's gomock plugin "fake": its victim function selects low-priority tasks
    (``enabled`` records that the session asked it)."""

    class Fake(Plugin):
        name: ClassVar[str] = "fake"

        def on_session_open(self, ssn: Any) -> None:
            def low_priority(candidates: list) -> list:
                enabled.append(True)
                return [t for t in candidates if t.priority == LOW]

            ssn.add_victim_tasks_fns(self.name, [low_priority])

    registry = builtin_registry()
    registry.register_plugin(Fake)
    return registry


def shuffle(enabled_victim: bool) -> tuple[list[str], list[bool]]:
    nodes = [build_node(n, res("4", "8Gi", pods="10")) for n in ("node1", "node2")]
    pods = [
        build_pod("test", name, node, "Running", res("1", "2G"), pg, priority=prio)
        for name, node, pg, prio in [
            ("pod1-1", "node1", "pg1", LOW),
            ("pod1-2", "node1", "pg1", HIGH),
            ("pod1-3", "node1", "pg1", HIGH),
            ("pod2-1", "node1", "pg2", LOW),
            ("pod2-2", "node2", "pg2", HIGH),
            ("pod3-1", "node2", "pg3", LOW),
            ("pod3-2", "node2", "pg3", HIGH),
        ]
    ]
    podgroups = [build_podgroup(pg, "test", "default", 0, None, "Running") for pg in ("pg1", "pg2", "pg3")]
    asked: list[bool] = []
    conf = (
        'actions: "shuffle"\ntiers:\n- plugins:\n  - name: fake\n'
        f"    enabledVictim: {'true' if enabled_victim else 'false'}\n"
    )
    out = run(conf, nodes, pods, podgroups, [build_queue("default", 1)], registry=registry_with_fake(asked))
    return out.evicted, asked


def test_select_pods_with_low_priority_and_evict_them():
    """TestShuffle: "select pods with low priority and evict them"."""
    evicted, asked = shuffle(enabled_victim=True)
    assert evicted == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]
    assert asked


def test_enabled_victim_false_leaves_the_fake_plugin_out():
    """The same cluster with the fake plugin's ``enabledVictim: false`` (Volcano's ``isEnabled``
    check in Session.VictimTasks): no plugin selects, nothing is evicted."""
    evicted, asked = shuffle(enabled_victim=False)
    assert evicted == [] and asked == []
