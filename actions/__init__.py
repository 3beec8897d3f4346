"""Caldera: actions."""
