"""A PodGroup's ``spec.subGroupPolicy`` as read and checked once, when the PodGroup is decoded.

Volcano 1.14's multi-level gang (volcano.sh/apis pkg/apis/scheduling/v1beta1/types.go,
``SubGroupPolicySpec``): each policy picks pods by ``labelSelector``, splits them by the values of
``matchLabelKeys`` into sub-groups of ``subGroupSize`` pods, asks that ``minSubGroups`` of them be
placed whole, and may bind each sub-group to one HyperNode (``networkTopology``).

What is checked here is what the CRD's schema checks (``+kubebuilder:validation`` markers on the
type: ``subGroupSize`` at least 1, ``minSubGroups`` at least 0, ``name`` at most 253 characters,
``networkTopology.mode`` hard or soft, ``highestTierAllowed`` at least 0, ``highestTierName`` at
most 253 characters): a PodGroup failing one
is one the API server would not have stored, so its job is not scheduled (``invalid``). A label
selector that does not parse is not a schema error: Volcano's ``getSubJobMatchValues``
(pkg/scheduler/api/sub_job_info.go) logs it and matches no pod with that policy; so does Caldera
(``warnings``). Either is logged once per PodGroup decode and published as a Warning Event by the
gang plugin.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from caldera.framework.objects import LabelSelector, SubGroupPolicySpec

log = logging.getLogger("caldera.subgroups")

HARD = "hard"
SOFT = "soft"
MAX_NAME = 253
_SET_OPERATORS = ("In", "NotIn")
_EXIST_OPERATORS = ("Exists", "DoesNotExist")


@dataclass(frozen=True)
class SubGroupPolicies:
    """A PodGroup's sub-group policies with what is wrong with them."""

    policies: tuple[SubGroupPolicySpec, ...]
    #: a schema violation (the API server would refuse the PodGroup): the job is not scheduled
    invalid: str = ""
    #: policies whose label selector does not parse (they match no pod), by position
    broken_selectors: frozenset[int] = frozenset()
    warnings: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        return ([self.invalid] if self.invalid else []) + list(self.warnings)


def selector_error(selector: LabelSelector) -> str:
    """Why ``metav1.LabelSelectorAsSelector`` would refuse the selector ("" when it would not)."""
    for req in selector.match_expressions:
        if req.operator in _SET_OPERATORS:
            if not req.values:
                return f"operator {req.operator} of key {req.key!r} needs values"
        elif req.operator in _EXIST_OPERATORS:
            if req.values:
                return f"operator {req.operator} of key {req.key!r} takes no values"
        else:
            return f"unknown operator {req.operator!r} for key {req.key!r}"
        if not req.key:
            return "a match expression has no key"
    return ""


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Kubernetes label selector semantics for a selector that parses (``selector_error`` empty);
    an empty selector matches every pod."""
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions:
        have = labels.get(req.key)
        op = req.operator
        if op == "In" and (have is None or have not in req.values):
            return False
        if op == "NotIn" and have is not None and have in req.values:
            return False
        if op == "Exists" and have is None:
            return False
        if op == "DoesNotExist" and have is not None:
            return False
    return True


def _schema_error(i: int, policy: SubGroupPolicySpec) -> str:
    where = f"subGroupPolicy[{i}]" + (f" ({policy.name})" if policy.name else "")
    if len(policy.name) > MAX_NAME:
        return f"{where}: name is longer than {MAX_NAME} characters"
    if policy.sub_group_size is not None and policy.sub_group_size < 1:
        return f"{where}: subGroupSize must be at least 1, got {policy.sub_group_size}"
    if policy.min_sub_groups is not None and policy.min_sub_groups < 0:
        return f"{where}: minSubGroups must be at least 0, got {policy.min_sub_groups}"
    nt = policy.network_topology
    if nt is not None:
        if nt.mode not in (HARD, SOFT):
            return f"{where}: networkTopology.mode must be hard or soft, got {nt.mode!r}"
        if nt.highest_tier_allowed is not None and nt.highest_tier_allowed < 0:
            return f"{where}: networkTopology.highestTierAllowed must be at least 0, got {nt.highest_tier_allowed}"
        if len(nt.highest_tier_name) > MAX_NAME:
            return f"{where}: networkTopology.highestTierName is longer than {MAX_NAME} characters"
    return ""


def _both_tiers(i: int, policy: SubGroupPolicySpec) -> str:
    """Volcano's PodGroup webhook (pkg/webhooks/admission/podgroups/validate/validate_podgroup.go)
    refuses ``highestTierAllowed`` and ``highestTierName`` set together; the CRD's schema does not,
    and Volcano's scheduler then reads the number (``translateHighestTierNameToAllowed``). So does
    Caldera, with a warning."""
    nt = policy.network_topology
    if nt is None or nt.highest_tier_allowed is None or not nt.highest_tier_name:
        return ""
    return (
        f"subGroupPolicy[{i}] ({policy.name}): networkTopology sets both highestTierAllowed and "
        f"highestTierName; highestTierAllowed {nt.highest_tier_allowed} is used"
    )


def check_policies(specs: Sequence[SubGroupPolicySpec], what: str) -> SubGroupPolicies | None:
    """The policies of ``what`` (a PodGroup, for the log line), checked; None when there are none."""
    if not specs:
        return None
    invalid = ""
    broken: set[int] = set()
    warnings: list[str] = []
    for i, policy in enumerate(specs):
        if not invalid:
            invalid = _schema_error(i, policy)
        both = _both_tiers(i, policy)
        if both:
            warnings.append(both)
        if policy.label_selector is not None:
            error = selector_error(policy.label_selector)
            if error:
                broken.add(i)
                warnings.append(
                    f"subGroupPolicy[{i}] ({policy.name}): label selector matches no pod: {error}"
                )
    result = SubGroupPolicies(tuple(specs), invalid, frozenset(broken), tuple(warnings))
    for problem in result.problems():
        log.warning("%s: %s", what, problem)
    return result
