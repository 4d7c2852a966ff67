"""CVAE training on synthetic sequences."""
