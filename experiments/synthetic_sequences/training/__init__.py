"""The trainer: one chunk of an arm's seeds, from its settings and inputs to each seed's run directory."""
