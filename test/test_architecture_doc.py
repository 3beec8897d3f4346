"""docs/architecture.md's worked example is real: the plugin as printed there registers, is named in a
conf, and keeps pods off nodes under maintenance, with the explanation it promises."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

from caldera.config.conf import parse_conf
from caldera.framework.plugin import Arguments
from caldera.framework.session import close_session, open_session
from caldera.hack.scenario import cluster, node, pod, podgroup
from caldera.scheduler.registry import builtin_registry

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def example_plugin() -> type:
    text = DOC.read_text()
    (code,) = re.findall(r"```python\n# caldera/plugins/maintenance.py\n(.*?)```", text, re.S)
    module = types.ModuleType("maintenance_example")
    sys.modules[module.__name__] = module  # dataclass/typing machinery looks modules up by name
    try:
        exec(compile(code, str(DOC), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module.MaintenancePlugin  # type: ignore[no-any-return]


CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: maintenance
    arguments: {maintenance.label: example.com/maintenance}
"""


def test_the_documented_plugin_keeps_pods_off_nodes_under_maintenance() -> None:
    registry = builtin_registry()
    registry.register_plugin(example_plugin())
    conf = parse_conf(CONF, registry)
    snap = cluster(
        nodes=[
            node("a", labels={"example.com/maintenance": "true"}),
            node("b"),
            node("c", labels={"example.com/maintenance": "true"}),
        ],
        pods=[pod(f"p{i}", group="g", cpu="1") for i in range(3)],
        podgroups=[podgroup("g", min_member=3)],
    )
    ssn = open_session(snap, conf.tiers, registry.plugins, conf.configurations)
    for name in conf.actions:
        registry.actions[name](Arguments(name)).execute(ssn)
    result = close_session(ssn)
    assert {p.task.name: p.node for p in result.placements} == {"p0": "b", "p1": "b", "p2": "b"}

    blocked = cluster(
        nodes=[node("a", labels={"example.com/maintenance": "true"})],
        pods=[pod("q", group="h", cpu="1")],
        podgroups=[podgroup("h", min_member=1)],
    )
    ssn = open_session(blocked, conf.tiers, registry.plugins, conf.configurations)
    (task,) = ssn.jobs["default/h"].tasks.values()
    assert ssn.explain_predicates(task) == {"node(s) were under maintenance": 1}
