"""Volcano's pkg/scheduler/plugins/resourcequota/resourcequota_test.go, ported as data.

TestResourceQuotaPlugin: one PodGroup in ``default`` against the quota ``test`` (hard = 2000m cpu,
2G memory, as util.BuildResourceQuota leaves it: ``status.hard`` set, nothing used); the plugin alone
with enqueued enabled, and ``ssn.JobEnqueueable`` asked for each job (four cases, named below).
TestJobEnqueuedOnOtherPluginsReject: ns1's quota allows 1 cpu; a co-tier plugin rejects pgA, so pgA
reserves nothing and pgB is let in.
"""

from __future__ import annotations

import pytest

from caldera.config.conf import parse_conf
from caldera.framework.session import close_session, open_session
from caldera.hack.scenario import cluster, resource_quota
from volcano.port import (
    REGISTRY,
    build_node,
    build_pod,
    build_podgroup,
    build_queue,
    registry_with_rejecter,
    res,
    run,
)

HUGE = res("20000m", "20G")
NORMAL = res("2000m", "2G")
PG1 = build_podgroup("pg1", "default", "c1", 2, None, "Inqueue", min_resources=NORMAL)
PG2 = build_podgroup("pg2", "default", "c1", 2, None, "Inqueue", min_resources=HUGE)
PG3 = build_podgroup("pg3", "default", "c1", 2, None, "Inqueue")
RQ1 = resource_quota("test", NORMAL, namespace="default")

CASES = [
    ("ResourceQuota capacity can match the needs of this pg", PG1, [RQ1], True),
    ("ResourceQuota capacity can't match the needs of this pg", PG2, [RQ1], False),
    ("No ResourceQuota resource object", PG2, [], True),
    ("MinResources field of pg is not set", PG3, [RQ1], True),
]


@pytest.mark.parametrize(("name", "pg", "quotas", "expected"), CASES, ids=[c[0] for c in CASES])
def test_resource_quota_plugin(name, pg, quotas, expected):
    """TestResourceQuotaPlugin."""
    text = 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: resourcequota\n    enableJobEnqueued: true\n'
    parsed = parse_conf(text, REGISTRY)
    snap = cluster(podgroups=[pg], queues=[build_queue("c1", 1)], resource_quotas=quotas)
    ssn = open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations)
    try:
        assert [ssn.job_enqueueable(job) for job in ssn.jobs.values()] == [expected], name
    finally:
        close_session(ssn)


def test_job_enqueued_on_other_plugins_reject():
    """TestJobEnqueuedOnOtherPluginsReject: pgA rejected by a co-tier plugin must not consume ns1's
    quota; pgB must be admitted."""

    registry = registry_with_rejecter("pgA")
    text = (
        'actions: "enqueue"\ntiers:\n- plugins:\n  - name: resourcequota\n    enableJobEnqueued: true\n'
        "  - name: test-rejecter\n    enableJobEnqueued: true\n"
    )
    one = res("1", "1G")
    pods = [build_pod("ns1", n, "", "Pending", one, g) for n, g in (("podA", "pgA"), ("podB", "pgB"))]
    pgs = [build_podgroup(g, "ns1", "q1", 1, None, "Pending", min_resources=one) for g in ("pgA", "pgB")]
    out = run(
        text,
        [build_node("n1", res("4", "4G", pods="10"))],
        pods,
        pgs,
        [build_queue("q1", 1)],
        registry=registry,
        resource_quotas=[resource_quota("rq1", one, namespace="ns1")],
    )
    assert out.phases["ns1/pgB"] == "Inqueue"
    assert out.phases["ns1/pgA"] == "Pending"
