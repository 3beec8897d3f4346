"""Caldera: scheduler."""
