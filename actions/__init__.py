"""Actions: enqueue, allocate, backfill, preempt, reclaim. ``ALL`` lists the built-ins for the registry."""

from framework.plugin import Action

ALL: list[type[Action]] = []
