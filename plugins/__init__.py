"""Plugins: scheduling policy registered on a session. ``ALL`` lists the built-ins for the registry."""

from framework.plugin import Plugin

ALL: list[type[Plugin]] = []
