"""What a researcher reads: the verdict and cross-term tables' words, verdict.md and the figures."""
