"""Experiment-specific code (data generators, training entry points)."""
