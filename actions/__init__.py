"""Actions: enqueue, allocate, backfill, preempt, reclaim, gangpreempt, gangreclaim, shuffle. ``ALL`` lists the built-ins for the registry.

An action never reaches into a plugin: it walks queues, jobs and tasks through the session's
callbacks and changes the session only through statements.
"""

from caldera.actions.allocate import AllocateAction
from caldera.actions.backfill import BackfillAction
from caldera.actions.enqueue import EnqueueAction
from caldera.actions.gangpreempt import GangPreemptAction
from caldera.actions.gangreclaim import GangReclaimAction
from caldera.actions.preempt import PreemptAction
from caldera.actions.reclaim import ReclaimAction
from caldera.actions.shuffle import ShuffleAction
from caldera.framework.plugin import Action

ALL: list[type[Action]] = [
    EnqueueAction,
    AllocateAction,
    BackfillAction,
    PreemptAction,
    ReclaimAction,
    GangPreemptAction,
    GangReclaimAction,
    ShuffleAction,
]
