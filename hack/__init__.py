"""Caldera: hack."""
