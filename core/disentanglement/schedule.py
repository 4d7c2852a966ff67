"""Learning-rate schedule shared by every trainer."""

from __future__ import annotations

import math


def warmup_cosine(step: int, peak: float, warmup_steps: int, total_steps: int) -> float:
    """Linear warm-up to `peak`, then cosine decay to 10% of it at `total_steps`."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
