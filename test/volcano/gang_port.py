"""Shared by the ports of gangpreempt_test.go and gangreclaim_test.go (volcano-sh/volcano,
pkg/scheduler/actions/gangpreempt/ and gangreclaim/): a session over the Go tests' objects, with
one plugin whose unified evictable function permits every candidate (Volcano's "test-preempt" /
"test-reclaim"; here the gang plugin's, which does exactly that), and the action built from a conf."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from caldera.config.conf import parse_conf
from caldera.framework.plugin import Arguments
from caldera.framework.session import close_session, open_session
from caldera.hack import scenario
from volcano.port import REGISTRY

CONF = """\
actions: "{action}"
tiers:
- plugins:
  - name: gang
    enableJobOrder: false
    enableJobReady: false
    enableJobPipelined: false
    enablePreemptable: false
    enableReclaimable: false
    enableJobStarving: false
{configurations}"""


def conf(action: str, arguments: dict[str, Any] | None = None) -> str:
    extra = ""
    if arguments is not None:
        lines = [f"    {k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in arguments.items()]
        extra = "configurations:\n" + f"- name: {action}\n  arguments:\n" + "\n".join(lines) + "\n"
    return CONF.format(action=action, configurations=extra)


def action(name: str, arguments: dict[str, Any] | None = None) -> Any:
    """The action as the conf builds it (Volcano's New() then parseArguments)."""
    parsed = parse_conf(conf(name, arguments), REGISTRY)
    args = parsed.configurations.get(name) or Arguments(f"action {name!r}")
    return REGISTRY.actions[name](args)


@contextmanager
def session(name: str, **objects: Any) -> Any:
    parsed = parse_conf(conf(name), REGISTRY)
    snap = scenario.cluster(**objects)
    ssn = open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations)
    try:
        yield ssn
    finally:
        close_session(ssn)


def domain_victims(act: Any, ssn: Any, preemptor_job: str) -> list[str]:
    """``FlattenBundles(action.selectDomainBundles(ssn, ..., pending, jobNeed, "d1"))`` with the
    whole cluster as domain d1: the victims' pod names."""
    job = ssn.jobs[preemptor_job]
    pending = [t for t in job.tasks.values()]
    need = pending[0].init_resreq.clone()
    for t in pending[1:]:
        need.add(t.init_resreq)
    bundles = act.select_bundles(ssn, job, need, "d1", ssn.all_rows)
    return [t.name for b in bundles for t in b.tasks]
