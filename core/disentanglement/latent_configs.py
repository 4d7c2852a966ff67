"""The latent-model settings of both CVAE families, apart from the models so that config checks need no torch.

The Snakefile validates every run's settings at parse time, and the per-run metric
extraction parses run keys; neither should pay for importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.disentanglement.config import check_positive_counts

PRIORS = ("fixed", "learned")  # fixed: uniform over the K codes (discrete) or N(0, I) (continuous)
ESTIMATORS = ("enumerate", "gumbel")


@dataclass(frozen=True)
class DiscreteCVAEConfig:
    num_codes: int = 6
    prior: str = "fixed"
    estimator: str = "enumerate"
    gumbel_samples: int = 2
    gumbel_temperature: float = 1.0
    encoder_layers: int = 1
    length_groups: int = 8

    def __post_init__(self) -> None:
        check_positive_counts(self, ("length_groups",))
        if self.num_codes < 2:
            raise ValueError(f"num_codes: {self.num_codes} is not allowed; it must be >= 2")
        if self.prior not in PRIORS:
            raise ValueError(f"prior: {self.prior!r} is not allowed; allowed values: {', '.join(PRIORS)}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator: {self.estimator!r} is not allowed; allowed values: {', '.join(ESTIMATORS)}")
        if self.gumbel_samples < 1 or not self.gumbel_temperature > 0:
            raise ValueError("gumbel_samples must be >= 1 and gumbel_temperature > 0")


@dataclass(frozen=True)
class ContinuousCVAEConfig:
    latent_dim: int = 8
    prior: str = "fixed"
    samples: int = 2
    encoder_layers: int = 1
    length_groups: int = 8

    def __post_init__(self) -> None:
        check_positive_counts(self, ("length_groups",))
        if self.latent_dim < 1 or self.samples < 1:
            raise ValueError(f"latent_dim ({self.latent_dim}) and samples ({self.samples}) must be >= 1")
        if self.prior not in PRIORS:
            raise ValueError(f"prior: {self.prior!r} is not allowed; allowed values: {', '.join(PRIORS)}")
