"""Conditional-VAE building blocks: aggregation contract, token weights, decoder, z-free reference."""
