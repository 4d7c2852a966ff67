"""One CVAE objective and one optimisation step.

    loss = reconstruction_scale * L_term^a  +  beta * KL  +  sum_k w_k * aux_k

L_term^a is the selected reconstruction term in the selected aggregation mode
a (the only place the mode enters); KL and the auxiliary terms never see it.
An auxiliary weight is added as given, so a term to be encouraged (posterior
entropy, inter-latent divergence) takes a negative weight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from core.disentanglement.config import RECONSTRUCTION_TERMS, ReconstructionConfig
from core.disentanglement.cvae_output import CVAEOutput
from core.disentanglement.losses import hybrid_term, reconstruction_terms
from experiments.synthetic_sequences.metrics import METRICS, view

BATCH_EXTREMES = view("batch_extremes")
REDUCTIONS = {"mean": lambda values: sum(values) / len(values), "min": min, "max": max}


@dataclass(frozen=True)
class Objective:
    """The run's loss, resolved: the reconstruction settings with the control's scale applied, the reference scale
    c_base^a, the KL weight of the current step and the auxiliary weights."""

    reconstruction: ReconstructionConfig
    c_base: float
    beta: float
    auxiliary_weights: Mapping[str, float]

    def with_beta(self, beta: float) -> Objective:
        return replace(self, beta=beta)


def objective_parts(output: CVAEOutput, base_nll: torch.Tensor, mask: torch.Tensor, spec: Objective) -> tuple[torch.Tensor, dict]:
    """The scalar loss and its logged parts as 0-d tensors: nothing is read back, so it maps over lockstep seeds."""
    reconstruction, beta, auxiliary_weights = spec.reconstruction, spec.beta, spec.auxiliary_weights
    terms = reconstruction_terms(
        output.token_nll,
        base_nll,
        mask,
        mode=reconstruction.mode,
        alpha=reconstruction.token_weight_alpha,
        c_base=spec.c_base,
        epsilon=reconstruction.epsilon,
        sample_weights=output.sample_weights,
    )
    optimised = hybrid_term(terms, reconstruction.hybrid_coefficients) if reconstruction.term == "hybrid" else terms[reconstruction.term]
    scaled_reconstruction = reconstruction.reconstruction_scale * optimised
    beta_kl = beta * output.kl
    loss = scaled_reconstruction + beta_kl
    for name, weight in auxiliary_weights.items():
        loss = loss + weight * output.auxiliary[name]

    counts = mask.sum(dim=1).float()
    parts = {
        "loss": loss,
        "reconstruction_loss": terms["raw"],  # L_raw^a whatever term is optimised
        "reconstruction_objective": optimised,
        **{f"recon_{name}": terms[name] for name in RECONSTRUCTION_TERMS},
        "kl": output.kl,
        "beta_kl": beta_kl,
        "scaled_reconstruction": scaled_reconstruction,
        **output.auxiliary,
        "tokens_mean": counts.mean(),
        "tokens_min": counts.min(),
        "tokens_max": counts.max(),
        **{name: terms[name] for name in BATCH_EXTREMES},
    }
    return loss, {name: value.detach() for name, value in parts.items()}


def logged_metrics(parts: dict[str, float]) -> dict[str, float]:
    """The logged metrics of one seed's parts, read back as floats: the ratio of the reconstruction term to beta x KL
    (None without a KL term) in place of the scaled reconstruction term."""
    metrics = {}
    for name, value in parts.items():  # in the parts' order: the ratio takes the scaled term's place
        if name == "scaled_reconstruction":
            metrics["reconstruction_to_kl"] = value / parts["beta_kl"] if parts["beta_kl"] > 0 else None
        else:
            metrics[name] = value
    return metrics


def objective(output: CVAEOutput, base_nll: torch.Tensor, mask: torch.Tensor, spec: Objective) -> tuple[torch.Tensor, dict[str, float]]:
    """The scalar loss and its logged parts (plain floats)."""
    loss, parts = objective_parts(output, base_nll, mask, spec)
    return loss, logged_metrics({name: value.item() for name, value in parts.items()})


def train_diagnostics(train_rows: Sequence[dict]) -> dict[str, float]:
    """The train_diagnostics view over a run's train rows: each reduced over every step's batch as its metric says
    (the mean token count, the extremes)."""
    return {
        name: float(REDUCTIONS[METRICS[name].over_batches]([row[name] for row in train_rows]))
        for name in view("train_diagnostics")
        if train_rows and name in train_rows[0]
    }
