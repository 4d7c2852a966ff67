"""Supervised-token masks: validation, counts n_i, and padding that never leaks."""

from __future__ import annotations

import torch


def check_mask(mask: torch.Tensor, values_shape: torch.Size, name: str = "values") -> None:
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor, got {mask.dtype}")
    if mask.dim() != 2:
        raise ValueError(f"mask must be [B, T], got shape {tuple(mask.shape)}")
    if tuple(values_shape[-2:]) != tuple(mask.shape):
        raise ValueError(f"{name} must end in the mask's [B, T] = {tuple(mask.shape)}, got shape {tuple(values_shape)}")


def inspectable(tensor: torch.Tensor) -> bool:
    """Whether Python may branch on `tensor`'s values: not inside torch.vmap, where the lockstep trainer has run the
    same checks on the stacked inputs before it maps over the seeds (core.disentanglement.lockstep)."""
    return not torch._C._functorch.is_batchedtensor(tensor)


def supervised_counts(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """n_i = |S_i| as a float tensor [B]; an example without supervised tokens is an error, not a silent 0/0."""
    counts = mask.sum(dim=-1)
    if inspectable(counts) and bool((counts == 0).any()):
        empty = torch.nonzero(counts == 0).flatten().tolist()
        raise ValueError(f"examples {empty[:10]} have no supervised tokens (n_i = 0); every example needs n_i >= 1")
    return counts.to(dtype)


def zero_padding(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """values with every unsupervised position set to 0.

    torch.where, not multiplication: a NaN or inf in padding would survive `* mask`
    and its gradient would be NaN; where() cuts both the value and the gradient.
    """
    return torch.where(mask, values, values.new_zeros(()))
