"""The one list of reconstruction terms and CVAE families; every other list is built from these.

The trainer's CLI choices and settings, the grid's checks, the rules' wildcard
constraints and the config schema's enums (checked by tests/test_registry.py) all
read them. A new model family is its module (a torch-free settings dataclass and
the model class, whose forward returns a CVAEOutput) plus one entry in MODELS:
the trainer's settings gain its latent settings, and evaluation reads its
posterior as categorical or Gaussian from that output (tests/test_model_families.py
trains a toy family so). No torch here: the Snakefile imports this at parse time.
Model classes are named by import path and loaded only when a model is built.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from core.disentanglement.latent_configs import ContinuousCVAEConfig, DiscreteCVAEConfig


@dataclass(frozen=True)
class Term:
    formula: str  # in the spec's symbols; a = mean | sum
    takes_alpha: bool  # its value depends on the token weights, i.e. on alpha
    normalised: bool  # divided by a reference scale, so O(1) in both modes; otherwise in the mode's own units


# Term names hold no underscore so a run key `{term}_{mode}_{alpha}` parses back.
TERMS: dict[str, Term] = {
    "raw": Term("E_i[R_i^a]", takes_alpha=False, normalised=False),
    "dist": Term("E_i[R_i^a] / c_base^a", takes_alpha=False, normalised=True),
    "ex": Term("E_i[R_i^a / (A_a(b_i) + eps_a)]", takes_alpha=False, normalised=True),
    "tok": Term("E_i E_q[W_a(l_i; pi_i)]", takes_alpha=True, normalised=False),
    "tokcc": Term("E_i E_q[W_a(l_i; pi_i) / kappa_i^a] / c_base^a", takes_alpha=True, normalised=True),
    "tokinv": Term("E_i E_q[W_a(l_i; rho_i) / eta_i^a] / c_base^a", takes_alpha=True, normalised=True),
}
HYBRID = "hybrid"  # sum_k c_k L_k over the terms above, with configured coefficients


@dataclass(frozen=True)
class Model:
    config_class: type
    model_class_path: str  # module:Class, imported by model_class()
    auxiliary_terms: tuple[str, ...]  # the names an auxiliary weight may take

    def model_class(self) -> type:
        module, name = self.model_class_path.split(":")
        return getattr(importlib.import_module(module), name)


MODELS: dict[str, Model] = {
    "shared_discrete": Model(
        DiscreteCVAEConfig,
        "core.disentanglement.shared_discrete_cvae:SharedDiscreteCVAE",
        ("posterior_entropy", "router_support", "router_marginal_kl", "inter_latent_divergence"),
    ),
    "continuous": Model(
        ContinuousCVAEConfig,
        "core.disentanglement.continuous_cvae:ContinuousCVAE",
        ("posterior_variance", "inter_latent_divergence"),
    ),
}


def alternation(names) -> str:
    """A regular expression matching exactly one of `names` (a rule's wildcard constraint)."""
    return "|".join(names)
