"""Reusable model and loss code for the token-aggregation ablation."""
