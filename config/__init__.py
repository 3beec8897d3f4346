"""Caldera: config."""
