"""cdp: cooldown protection, Volcano's ``cdp`` plugin (pkg/scheduler/plugins/cdp/cdp.go).

Elastic jobs' pods can be preempted, come back and be preempted again straight away; a pod that asks
for a cooldown is not a victim of preempt or reclaim until it has run that long. The cooldown is the
pod's label ``volcano.sh/cooldown-time``, else its annotation of that name, a Go duration ("600s",
"10m"; ``podCooldownTime``); one that does not parse protects nothing (a log line). In
``OnSessionOpen``'s ``filterVictimFn``, registered as preemptable and reclaimable function with no
arguments: a candidate is kept as a victim unless its pod is Running and its ``PodScheduled``
condition (True) changed less than the cooldown ago; the plugin permits what it keeps.

As with ``pdb``, put it in the tier that decides victims (with ``gang``): a tier whose plugins leave
no victim hands the decision to the next tier, as in Volcano's session.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, ClassVar

from caldera.config.duration import parse_duration
from caldera.framework.model import TaskInfo
from caldera.framework.objects import Pod, parse_timestamp
from caldera.framework.plugin import Plugin

if TYPE_CHECKING:
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.cdp")

#: v1beta1.CooldownTime (volcano.sh/apis .../scheduling/v1beta1/labels.go)
COOLDOWN_TIME = "volcano.sh/cooldown-time"
PERMIT = 1

#: values already reported as invalid (one log line each while they stand)
_reported: set[str] = set()


def cooldown_seconds(pod: Pod) -> float | None:
    """``podCooldownTime``: the label's value, else the annotation's, in seconds; None when neither
    is set or the value is not a Go duration (Go's ParseDuration takes no surrounding blanks)."""
    value = pod.metadata.labels.get(COOLDOWN_TIME)
    if value is None:
        value = pod.metadata.annotations.get(COOLDOWN_TIME)
        if value is None:
            return None
    try:
        if value != value.strip():
            raise ValueError(value)
        return parse_duration(value)
    except ValueError:
        if value not in _reported:
            _reported.add(value)
            log.warning(
                "invalid time duration %s=%s (pod %s/%s)",
                COOLDOWN_TIME,
                value,
                pod.metadata.namespace,
                pod.metadata.name,
            )
        return None


def cooling_down(pod: Pod, now: float) -> bool:
    """Whether a Running pod's PodScheduled condition turned True less than its cooldown ago."""
    cooldown = cooldown_seconds(pod)
    if cooldown is None or pod.status.phase != "Running":
        return False
    for condition in pod.status.conditions:
        if condition.type == "PodScheduled" and condition.status == "True":
            return parse_timestamp(condition.last_transition_time) + cooldown > now
    return False


class CdpPlugin(Plugin):
    name: ClassVar[str] = "cdp"

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_preemptable_fn(self.name, self.victims)
        ssn.add_reclaimable_fn(self.name, self.victims)

    def victims(self, _actor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        now = time.time()
        return [t for t in candidates if not cooling_down(t.pod, now)], PERMIT
