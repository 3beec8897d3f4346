"""conformance: never evict system-critical pods (kube-system, system-*-critical priority classes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from caldera.framework.model import TaskInfo
from caldera.framework.plugin import Plugin

if TYPE_CHECKING:
    from caldera.framework.session import Session

PERMIT = 1
CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_NAMESPACE = "kube-system"


def evictable(task: TaskInfo) -> bool:
    return task.namespace != SYSTEM_NAMESPACE and task.pod.spec.priority_class_name not in CRITICAL_CLASSES


class ConformancePlugin(Plugin):
    name: ClassVar[str] = "conformance"

    def on_session_open(self, ssn: Session) -> None:
        def victims(actor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            return [t for t in candidates if evictable(t)], PERMIT

        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
        # Volcano conformance.go AddUnifiedEvictableFn: the same rule for the gang actions
        ssn.add_unified_evictable_fn(
            self.name, lambda _ctx, tasks: ([t for t in tasks if evictable(t)], PERMIT)
        )
