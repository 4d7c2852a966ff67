"""The learning curves' validation points: the objective's parts, latent usage and strategy separation."""

from __future__ import annotations

import numpy as np
import torch

from core.disentanglement.config import AggregationMode
from core.disentanglement.losses import aggregate_tokens, concentration_factor
from core.disentanglement.token_weighting import high_surprisal_weights, low_surprisal_weights
from experiments.synthetic_sequences.metrics import view
from experiments.synthetic_sequences.training.evaluate import cluster_agreement, latent_summary, posterior_pass, shuffled_z_rise
from experiments.synthetic_sequences.training.inputs import RunInputs
from experiments.synthetic_sequences.training.train_step import Objective, objective

EVAL_BATCH = 128
# batch-level counts and extremes: a validation row takes them from the whole split instead (split_diagnostics)
PER_BATCH_ONLY = (*view("train_diagnostics"), "reconstruction_to_kl")


def split_diagnostics(base: tuple[torch.Tensor, torch.Tensor], mode: AggregationMode, alpha: float) -> dict:
    """Token counts n_i and the extremes of A_a(b_i), kappa_i^a and eta_i^a over a whole split (no model involved)."""
    b, mask = base
    counts = mask.sum(dim=1).float()
    kappa = concentration_factor(b, high_surprisal_weights(b, mask, alpha), mask, mode)
    eta = concentration_factor(b, low_surprisal_weights(b, mask, alpha), mask, mode)
    return {
        "tokens_mean": counts.mean().item(),
        "tokens_min": counts.min().item(),
        "tokens_max": counts.max().item(),
        "base_aggregate_min": aggregate_tokens(b, mask, mode).min().item(),
        "kappa_min": kappa.min().item(),
        "kappa_max": kappa.max().item(),
        "eta_min": eta.min().item(),
        "eta_max": eta.max().item(),
    }


@torch.inference_mode()
def validation_metrics(model, inputs: RunInputs, spec: Objective, seed: int, device) -> dict:
    """One point of the learning curves, on the whole validation split.

    The training objective's parts (example-weighted over batches), the reconstruction NLL under q per token
    and per example (one scale for mean and sum runs), latent usage (KL, I(x;z), codes used or active units,
    the NLL rise when z is shuffled) and strategy separation (strategy_information from the posterior itself; NMI, AMI
    of the codes or a k-means of E_q[z]).
    """
    model.eval()
    records, batcher, (base_nll, _) = inputs.records["val"], inputs.batchers["val"], inputs.base["val"]

    def score(output, batch) -> dict[str, float]:
        _, metrics = objective(output, base_nll[batch.index.cpu(), : batch.mask.shape[1]].to(device), batch.mask, spec)
        return {name: value for name, value in metrics.items() if value is not None and name not in PER_BATCH_ONLY}

    passed = posterior_pass(model, batcher, EVAL_BATCH, seed, device, score=score)
    strategy = records.frame["strategy"].to_numpy()
    usage, assigned, _, information = latent_summary(passed, len(set(strategy)), seed)
    result = passed["scored"]
    beta_kl = result["beta_kl"]
    recon = spec.reconstruction.reconstruction_scale * result["reconstruction_objective"]
    return {
        **result,
        "reconstruction_to_kl": recon / beta_kl if beta_kl > 0 else None,
        "recon_nll_per_token": passed["recon_nll_per_token"],
        "recon_nll_per_example": passed["recon_nll_per_example"],
        **{name: value for name, value in usage.items() if name != "code_shares"},
        **shuffled_z_rise(passed),
        "strategy_information": information(np.arange(len(strategy)), strategy),
        **cluster_agreement(strategy, assigned),
    }
