"""The latent-model settings of both CVAE families, apart from the models so that config checks need no torch.

The Snakefile validates every run's settings at parse time, and the per-run metric
extraction parses run keys; neither should pay for importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.disentanglement.checks import check_choice, check_field_types, check_positive_counts
from core.disentanglement.cli import setting

PRIORS = ("fixed", "learned")  # fixed: uniform over the K codes (discrete) or N(0, I) (continuous)
ESTIMATORS = ("enumerate", "gumbel")
PRIOR_HELP = "fixed (uniform codes / N(0, I)) or learned p(z|x)"
ENCODER_HELP = "transformer layers of the posterior encoder (and of a learned prior)"
LENGTH_GROUPS_HELP = (
    "decode each batch in this many length-sorted groups, each padded to its own longest example "
    "(1: the whole batch padded as one; the numbers agree up to float rounding, the padded work shrinks)"
)


@dataclass(frozen=True)
class DiscreteCVAEConfig:
    num_codes: int = setting(6, "discrete model: number of codes K shared across tasks")
    prior: str = setting("fixed", PRIOR_HELP, choices=PRIORS)
    estimator: str = setting(
        "enumerate", "discrete model: enumerate all K codes exactly, or gumbel (straight-through samples)", choices=ESTIMATORS
    )
    gumbel_samples: int = setting(2, "discrete model with --estimator gumbel: samples per example")
    gumbel_temperature: float = setting(1.0, "discrete model with --estimator gumbel: softmax temperature")
    encoder_layers: int = setting(1, ENCODER_HELP)
    length_groups: int = setting(8, LENGTH_GROUPS_HELP)

    def __post_init__(self) -> None:
        check_field_types(self)
        check_positive_counts(self, ("length_groups", "encoder_layers"))
        if self.num_codes < 2:
            raise ValueError(f"num_codes: {self.num_codes} is not allowed; it must be >= 2")
        check_choice("prior", self.prior, PRIORS)
        check_choice("estimator", self.estimator, ESTIMATORS)
        if self.gumbel_samples < 1 or not self.gumbel_temperature > 0:
            raise ValueError("gumbel_samples must be >= 1 and gumbel_temperature > 0")


@dataclass(frozen=True)
class ContinuousCVAEConfig:
    latent_dim: int = setting(8, "continuous model: latent dimensions")
    prior: str = setting("fixed", PRIOR_HELP, choices=PRIORS)
    latent_samples: int = setting(2, "continuous model: reparameterised samples per example")
    encoder_layers: int = setting(1, ENCODER_HELP)
    length_groups: int = setting(8, LENGTH_GROUPS_HELP)

    def __post_init__(self) -> None:
        check_field_types(self)
        check_positive_counts(self, ("length_groups", "encoder_layers"))
        if self.latent_dim < 1 or self.latent_samples < 1:
            raise ValueError(f"latent_dim ({self.latent_dim}) and latent_samples ({self.latent_samples}) must be >= 1")
        check_choice("prior", self.prior, PRIORS)
