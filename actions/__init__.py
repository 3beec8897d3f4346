"""Actions: enqueue, allocate, backfill, preempt, reclaim. ``ALL`` lists the built-ins for the registry.

An action never reaches into a plugin: it walks queues, jobs and tasks through the session's
callbacks and changes the session only through statements.
"""

from actions.allocate import AllocateAction
from actions.backfill import BackfillAction
from actions.enqueue import EnqueueAction
from actions.preempt import PreemptAction
from actions.reclaim import ReclaimAction
from framework.plugin import Action

ALL: list[type[Action]] = [EnqueueAction, AllocateAction, BackfillAction, PreemptAction, ReclaimAction]
