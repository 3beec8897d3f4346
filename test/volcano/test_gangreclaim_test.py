"""Volcano's pkg/scheduler/actions/gangreclaim/gangreclaim_test.go (volcano-sh/volcano ed72c7c8),
test by test; each test's docstring names the Go test (and case) it ports."""

import logging

import pytest

from caldera.actions.gang_eviction import DEFAULT_MAX_DOMAINS, pick_domains
from volcano.gang_port import action, domain_victims, session
from volcano.port import build_node, build_pod, build_podgroup, build_queue, res


def test_pick_domains_max_domains_and_dedup():
    """TestPickDomainsFromGradients_MaxDomainsAndDedup: capped at 3, d2 once."""
    assert pick_domains([["d1", "d2"], ["d2", "d3"]], 3, "") == ["d1", "d2", "d3"]


def test_pick_domains_fallback():
    """TestPickDomainsFromGradients_Fallback: empty gradients, the fallback alone."""
    assert pick_domains([[]], 8, "<cluster-top-hypernode>") == ["<cluster-top-hypernode>"]


def test_parse_arguments():
    """TestParseArguments: maxDomains 5 and allowWholeBundle false from the conf's configurations."""
    act = action("gangreclaim", {"maxDomains": 5, "allowWholeBundle": False})
    assert act.max_domains == 5
    assert act.allow_whole is False


@pytest.mark.parametrize("value", [0, -1], ids=["zero", "negative"])
def test_parse_arguments_invalid_max_domains_falls_back_to_default(value, caplog):
    """TestParseArguments_InvalidMaxDomainsFallsBackToDefault: cases zero and negative."""
    with caplog.at_level(logging.WARNING, logger="caldera.actions"):
        act = action("gangreclaim", {"maxDomains": value})
    assert act.max_domains == DEFAULT_MAX_DOMAINS
    assert "maxDomains" in caplog.text


def reclaimer():
    return build_pod("ns", "reclaimer", "", "Pending", res("1"), "reclaimer")


def running(name, group):
    return build_pod("ns", name, "n1", "Running", res("1"), group)


def test_select_domain_victims_reclaimable_cross_queue_only():
    """TestSelectDomainVictims_ReclaimableCrossQueueOnly: of two running pods of other queues, only
    the one whose queue is reclaimable (q2, not q3) is a victim."""
    with session(
        "gangreclaim",
        nodes=[build_node("n1", res("2", "1Gi"))],
        pods=[reclaimer(), running("victim", "victim"), running("other", "other")],
        podgroups=[
            build_podgroup("reclaimer", "ns", "q1", 1, None, "Inqueue"),
            build_podgroup("victim", "ns", "q2", 1, None, "Running"),
            build_podgroup("other", "ns", "q3", 1, None, "Running"),
        ],
        queues=[build_queue("q1"), build_queue("q2", reclaimable=True), build_queue("q3", reclaimable=False)],
    ) as ssn:
        assert domain_victims(action("gangreclaim"), ssn, "ns/reclaimer") == ["victim"]


def one_victim(annotations=None):
    return dict(
        nodes=[build_node("n1", res("1", "1Gi"))],
        pods=[reclaimer(), running("victim", "victim")],
        podgroups=[
            build_podgroup("reclaimer", "ns", "q1", 1, None, "Inqueue"),
            build_podgroup("victim", "ns", "q2", 1, None, "Running", annotations=annotations),
        ],
        queues=[build_queue("q1"), build_queue("q2", reclaimable=True)],
    )


def test_select_domain_victims_respect_victim_job_preemptable():
    """TestSelectDomainVictims_RespectVictimJobPreemptable: a PodGroup annotated
    volcano.sh/preemptable: "false" gives no victim."""
    with session("gangreclaim", **one_victim({"volcano.sh/preemptable": "false"})) as ssn:
        assert domain_victims(action("gangreclaim"), ssn, "ns/reclaimer") == []


def test_select_domain_victims_allow_victim_job_when_preemptable_unset():
    """TestSelectDomainVictims_AllowVictimJobWhenPreemptableUnset: an unmarked PodGroup may be a victim."""
    with session("gangreclaim", **one_victim()) as ssn:
        assert domain_victims(action("gangreclaim"), ssn, "ns/reclaimer") == ["victim"]
