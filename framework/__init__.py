"""Scheduling core: resources, the job/node/queue model, sessions, statements, tiers and callbacks."""
