"""Seeds in lockstep: S copies of one model trained as one, their parameters stacked along a leading seed dimension.

Each seed's weights are its own model's, built under its own seed and stacked ([S, ...] per parameter). One
forward pass maps the unchanged model over the seeds (torch.vmap of torch.func.functional_call), and one backward
pass through the sum of the per-seed objectives gives each seed exactly its own gradient: nothing mixes between
seeds, since every mapped operation acts on one seed's slice. AdamW on the stacked tensors is elementwise, so it
is per seed as it stands; gradient-norm clipping is not, and `clip_grad_norms_` clips each seed by its own norm.

A stack of one seed calls the model directly, without vmap, so a single-seed run computes what an unstacked model
does. Under vmap the model's values cannot steer Python, so the checks that read values (a row without supervised
tokens) are made on the stacked inputs first (masking.inspectable), scaled-dot-product attention takes its math
kernel (the fused CPU kernel has no batching rule, and vmap would loop over the seeds), and the decoder reads
every batch in one length group (length groups are chosen from each batch's values).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch
import torch.nn as nn
from torch.func import functional_call
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._pytree import tree_map


class BoundModel:
    """The model's code with one seed's parameters: calling it calls the model."""

    def __init__(self, template: nn.Module, parameters: dict[str, torch.Tensor]):
        self.template, self.parameters = template, parameters

    def __call__(self, *args, **kwargs):
        return functional_call(self.template, self.parameters, args, kwargs)


def one_length_group(template: nn.Module) -> nn.Module:
    """The template a mapped forward runs: its latent config (when it has one) with length_groups 1."""
    config = getattr(template, "config", None)
    if config is not None and getattr(config, "length_groups", 1) != 1:
        template = copy.copy(template)
        template.config = replace(config, length_groups=1)
    return template


class SeedStack(nn.Module):
    """The parameters of S models of one architecture, stacked: `stacked[j]` is [S, *shape of parameter j]."""

    def __init__(self, models: Sequence[nn.Module]):
        super().__init__()
        if not models:
            raise ValueError("a seed stack needs at least one model")
        if any(True for _ in models[0].buffers()):
            raise ValueError("a seed stack stacks parameters only; the model has buffers")
        self.names = [name for name, _ in models[0].named_parameters()]
        per_model = [dict(model.named_parameters()) for model in models]
        for index, parameters in enumerate(per_model):
            if list(parameters) != self.names or any(parameters[n].shape != per_model[0][n].shape for n in self.names):
                raise ValueError(f"model {index} of the stack differs in its parameters from model 0")
        self.stacked = nn.ParameterList(nn.Parameter(torch.stack([p[name].detach() for p in per_model])) for name in self.names)
        # the model's code without weights of its own: every call gives it the parameters to use
        template = copy.deepcopy(models[0]).to("meta")
        self.templates = {"direct": template, "mapped": one_length_group(template)}  # a dict: no submodules, no state

    @property
    def seeds(self) -> int:
        return self.stacked[0].shape[0]

    def named_stacked(self) -> list[tuple[str, nn.Parameter]]:
        """(the model's parameter name, its stacked tensor)."""
        return list(zip(self.names, self.stacked, strict=True))

    def map(self, fn: Callable, *inputs):
        """fn(model, *seed_inputs) for every seed, results stacked [S, ...]: `model` is the model with that seed's
        parameters, and each input is a tensor (or a tuple or dict of tensors) of S seeds' values, [S, ...], or None."""
        if self.seeds == 1:
            model = BoundModel(self.templates["direct"], {name: p[0] for name, p in self.named_stacked()})
            result = fn(model, *tree_map(lambda t: None if t is None else t[0], inputs))
            return tree_map(lambda t: t.unsqueeze(0), result)

        def one_seed(parameters, *seed_inputs):
            return fn(BoundModel(self.templates["mapped"], parameters), *seed_inputs)

        in_dims = (0, *(None if value is None else 0 for value in inputs))  # an absent input (no noise) is no one's
        with sdpa_kernel(SDPBackend.MATH):
            return torch.vmap(one_seed, in_dims=in_dims, randomness="error")(dict(self.named_stacked()), *inputs)

    @torch.no_grad()
    def seed_state(self, index: int) -> dict[str, torch.Tensor]:
        """Seed `index`'s weights as the plain model's state dict (copies)."""
        return {name: p[index].clone() for name, p in self.named_stacked()}

    @torch.no_grad()
    def load_seed_state(self, index: int, state: dict[str, torch.Tensor]) -> None:
        for name, p in self.named_stacked():
            p[index].copy_(state[name])

    @torch.no_grad()
    def clip_grad_norms_(self, max_norm: float) -> torch.Tensor:
        """Clip each seed's gradient to total 2-norm `max_norm`, as torch.nn.utils.clip_grad_norm_ does for one model
        (the coefficient max_norm / (norm + 1e-6), at most 1); returns the norms before clipping, [S]."""
        grads = [p.grad for p in self.stacked if p.grad is not None]
        norms = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads], dim=1), dim=1)
        coefficients = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coefficients.view(-1, *[1] * (g.dim() - 1)))
        return norms
