"""Caldera: metrics."""
