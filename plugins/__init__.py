"""Caldera: plugins."""
