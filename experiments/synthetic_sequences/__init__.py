"""Synthetic task x strategy sequences with a parser back to (strategy, answer)."""
