"""Caldera: cache."""
