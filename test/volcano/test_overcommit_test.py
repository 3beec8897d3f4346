"""Volcano's pkg/scheduler/plugins/overcommit/overcommit_test.go, TestOvercommitPlugin: overcommit
alone (job enqueued on); is the PodGroup enqueueable, for each overcommit-factor?"""

import pytest

from caldera.config.conf import parse_conf
from caldera.framework.session import open_session
from caldera.hack.scenario import cluster
from volcano.port import REGISTRY, build_node, build_podgroup, build_queue, res

NODES = [build_node("n1", res("2", "4Gi")), build_node("n2", res("4", "16Gi"))]
NORMAL, HUGE, SMALL = res("2000m", "2G"), res("20000m", "20G"), res("200m", "0.5G")

CASES = {
    "overCommitFactor is more than 0": (1.2, dict(min_resources=NORMAL), None, True),
    "overCommitFactor is less than 0": (0.8, dict(min_resources=NORMAL), None, True),
    "when the required resources of pg are too large": (1.2, dict(min_resources=HUGE), None, False),
    "when pg does not fill MinResources": (1.2, {}, SMALL, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_overcommit_plugin(case):
    """TestOvercommitPlugin: the case named by the parameter; expectedEnqueueAble."""
    factor, pg_kw, queue_cap, expected = CASES[case]
    text = f'actions: "enqueue"\ntiers:\n- plugins:\n  - name: overcommit\n    arguments:\n      overcommit-factor: {factor}\n'
    conf = parse_conf(text, REGISTRY)
    snap = cluster(
        nodes=NODES,
        podgroups=[build_podgroup("pg1", "test-namespace", "c1", 2, None, "Inqueue", **pg_kw)],
        queues=[build_queue("c1", 1, queue_cap)],
    )
    ssn = open_session(snap, conf.tiers, REGISTRY.plugins, conf.configurations)
    for job in ssn.jobs.values():
        ssn.job_enqueued(job)
        assert ssn.job_enqueueable(job) is expected
