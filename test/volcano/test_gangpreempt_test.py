"""Volcano's pkg/scheduler/actions/gangpreempt/gangpreempt_test.go (volcano-sh/volcano ed72c7c8),
test by test; each test's docstring names the Go test (and case) it ports."""

import logging

import pytest

from caldera.actions.gang_eviction import DEFAULT_MAX_DOMAINS, pick_domains
from volcano.gang_port import action, domain_victims, session
from volcano.port import build_node, build_pod, build_podgroup, build_queue, priority_classes, res

PCS = priority_classes(high=100, low=10)


def test_pick_domains_max_domains_and_dedup():
    """TestPickDomainsFromGradients_MaxDomainsAndDedup: capped at 2, d2 once."""
    assert pick_domains([["d1", "d2"], ["d2", "d3"]], 2, "") == ["d1", "d2"]


def test_pick_domains_fallback():
    """TestPickDomainsFromGradients_Fallback: no gradients, the fallback alone."""
    assert pick_domains([], 8, "<cluster-top-hypernode>") == ["<cluster-top-hypernode>"]


def test_parse_arguments():
    """TestParseArguments: maxDomains 3 and allowWholeBundle false from the conf's configurations."""
    act = action("gangpreempt", {"maxDomains": 3, "allowWholeBundle": False})
    assert act.max_domains == 3
    assert act.allow_whole is False


@pytest.mark.parametrize("value", [0, -1], ids=["zero", "negative"])
def test_parse_arguments_invalid_max_domains_falls_back_to_default(value, caplog):
    """TestParseArguments_InvalidMaxDomainsFallsBackToDefault: cases zero and negative."""
    with caplog.at_level(logging.WARNING, logger="caldera.actions"):
        act = action("gangpreempt", {"maxDomains": value})
    assert act.max_domains == DEFAULT_MAX_DOMAINS
    assert "maxDomains" in caplog.text


def objects(victim_pg_annotations=None):
    """One node; a pending preemptor (job priority 100) and a running victim (job priority 10, min
    member 1, so its only pod is a whole bundle), both 1 CPU, in queue q1."""
    return dict(
        nodes=[build_node("n1", res("1", "1Gi"))],
        pods=[
            build_pod("ns", "preemptor", "", "Pending", res("1"), "preemptor"),
            build_pod("ns", "victim", "n1", "Running", res("1"), "victim"),
        ],
        podgroups=[
            build_podgroup("preemptor", "ns", "q1", 1, None, "Inqueue", "high"),
            build_podgroup(
                "victim", "ns", "q1", 1, None, "Running", "low", annotations=victim_pg_annotations
            ),
        ],
        queues=[build_queue("q1")],
        priority_classes=PCS,
    )


def test_select_domain_victims_respect_allow_whole_bundle():
    """TestSelectDomainVictims_RespectAllowWholeBundle: the victim's only pod is a whole bundle,
    left out with allowWholeBundle false and taken with it true."""
    with session("gangpreempt", **objects()) as ssn:
        assert domain_victims(action("gangpreempt", {"allowWholeBundle": False}), ssn, "ns/preemptor") == []
        assert domain_victims(action("gangpreempt", {"allowWholeBundle": True}), ssn, "ns/preemptor") == [
            "victim"
        ]


def test_select_domain_victims_respect_victim_job_preemptable():
    """TestSelectDomainVictims_RespectVictimJobPreemptable: a PodGroup annotated
    volcano.sh/preemptable: "false" gives no victim."""
    with session("gangpreempt", **objects({"volcano.sh/preemptable": "false"})) as ssn:
        assert domain_victims(action("gangpreempt"), ssn, "ns/preemptor") == []


def test_select_domain_victims_allow_victim_job_when_preemptable_unset():
    """TestSelectDomainVictims_AllowVictimJobWhenPreemptableUnset: an unmarked PodGroup may be a victim."""
    with session("gangpreempt", **objects()) as ssn:
        assert domain_victims(action("gangpreempt"), ssn, "ns/preemptor") == ["victim"]
