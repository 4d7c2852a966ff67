"""Every setting of one CVAE training run, flat so it maps one-to-one onto CLI flags and run_config.json."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.disentanglement.config import AggregationMode, ReconstructionConfig, check_field_types, check_positive_counts
from core.disentanglement.latent_configs import ContinuousCVAEConfig, DiscreteCVAEConfig

MODELS = ("shared_discrete", "continuous")
AUXILIARY_TERMS = {
    "shared_discrete": ("posterior_entropy", "router_support", "router_marginal_kl", "inter_latent_divergence"),
    "continuous": ("posterior_variance", "inter_latent_divergence"),
}
BATCHING = ("random", "bucketed")
# design.md's confound controls: `scale` multiplies the reconstruction term by the mean supervised token count
# of the training set (sum's global scale, no length weighting); `balance` multiplies beta by it
# (sum's length weighting at mean's reconstruction-to-KL balance).
CONTROLS = ("none", "scale", "balance")
INPUT_PATHS = ("train_records", "val_records", "test_records", "train_scores", "val_scores", "reference", "init_decoder")
DEVICES = "cpu, auto, cuda, cuda:N, mps"
DEVICE = re.compile(r"cpu|auto|cuda|cuda:[0-9]+|mps")


@dataclass(frozen=True)
class TrainConfig:
    # inputs and output
    train_records: str
    val_records: str
    test_records: str
    train_scores: str
    val_scores: str
    reference: str
    run_dir: str
    init_decoder: str = ""  # a z-free checkpoint to warm-start the decoder from; "" = random initialisation
    # objective
    model: str = "shared_discrete"
    reconstruction_term: str = "dist"
    reconstruction_loss_token_aggregation_mode: str = "mean"
    token_weight_alpha: float = 0.0
    epsilon: float = 1e-3
    hybrid_coefficients: dict[str, float] = field(default_factory=dict)
    reconstruction_scale: float = 1.0
    beta: float = 1.0
    beta_warmup_steps: int = 0
    controls: str = "none"
    auxiliary_weights: dict[str, float] = field(default_factory=dict)
    # model
    d_model: int = 64
    n_layer: int = 2
    n_head: int = 4
    encoder_layers: int = 1
    num_codes: int = 6
    prior: str = "fixed"  # uniform over codes / N(0, I); or "learned" p(z|x)
    estimator: str = "enumerate"
    gumbel_samples: int = 2
    gumbel_temperature: float = 1.0
    latent_dim: int = 8
    latent_samples: int = 2
    length_groups: int = 8
    # optimisation
    seed: int = 0
    steps: int = 600
    batch_size: int = 64
    batching: str = "random"
    lr: float = 2e-3
    warm_decoder_lr_factor: float = 1.0
    weight_decay: float = 0.01
    warmup_steps: int = 50
    grad_clip: float = 1.0
    # bookkeeping
    eval_every: int = 100
    checkpoint_every: int = 100
    log_every: int = 50
    eval_prompts_per_code: int = 32
    device: str = "cpu"

    def __post_init__(self) -> None:
        """The one validation of a run's settings: the Snakefile runs it for every run at parse time, the trainer at start."""
        check_field_types(self)
        if self.model not in MODELS:
            raise ValueError(f"model: {self.model!r} is not allowed; allowed values: {', '.join(MODELS)}")
        if self.controls not in CONTROLS:
            raise ValueError(f"controls: {self.controls!r} is not allowed; allowed values: {', '.join(CONTROLS)}")
        if self.batching not in BATCHING:
            raise ValueError(f"batching: {self.batching!r} is not allowed; allowed values: {', '.join(BATCHING)}")
        _ = (self.reconstruction, self.model_config)  # building them validates their fields
        allowed = AUXILIARY_TERMS[self.model]
        for name, weight in self.auxiliary_weights.items():
            if name not in allowed:
                raise ValueError(f"auxiliary_weights: {name!r} is not a term of model {self.model!r}; allowed values: {', '.join(allowed)}")
            if not isinstance(weight, int | float):
                raise ValueError(f"auxiliary_weights.{name}: {weight!r} is not a number")
        if self.beta < 0 or self.beta_warmup_steps < 0:
            raise ValueError(f"beta ({self.beta}) and beta_warmup_steps ({self.beta_warmup_steps}) must be >= 0")
        check_positive_counts(
            self,
            (
                "steps",
                "batch_size",
                "eval_every",
                "checkpoint_every",
                "log_every",
                "eval_prompts_per_code",
                "d_model",
                "n_layer",
                "n_head",
                "encoder_layers",
            ),
        )
        for name in ("lr", "warm_decoder_lr_factor", "grad_clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: {getattr(self, name)} is not allowed; it must be > 0")
        for name in ("weight_decay", "warmup_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: {getattr(self, name)} is not allowed; it must be >= 0")
        if not DEVICE.fullmatch(self.device):
            raise ValueError(f"device: {self.device!r} is not allowed; allowed values: {DEVICES}")

    def control_factors(self, mean_train_tokens: float) -> tuple[float, float]:
        """(reconstruction multiplier, beta multiplier) of the selected control."""
        return (mean_train_tokens if self.controls == "scale" else 1.0, mean_train_tokens if self.controls == "balance" else 1.0)

    @property
    def mode(self) -> AggregationMode:
        return self.reconstruction.mode

    @property
    def reconstruction(self) -> ReconstructionConfig:
        return ReconstructionConfig(
            term=self.reconstruction_term,
            reconstruction_loss_token_aggregation_mode=self.reconstruction_loss_token_aggregation_mode,
            token_weight_alpha=self.token_weight_alpha,
            epsilon=self.epsilon,
            hybrid_coefficients=self.hybrid_coefficients,
            reconstruction_scale=self.reconstruction_scale,
        )

    @property
    def model_config(self) -> DiscreteCVAEConfig | ContinuousCVAEConfig:
        if self.model == "shared_discrete":
            return DiscreteCVAEConfig(
                num_codes=self.num_codes,
                prior=self.prior,
                estimator=self.estimator,
                gumbel_samples=self.gumbel_samples,
                gumbel_temperature=self.gumbel_temperature,
                encoder_layers=self.encoder_layers,
                length_groups=self.length_groups,
            )
        return ContinuousCVAEConfig(
            latent_dim=self.latent_dim,
            prior=self.prior,
            samples=self.latent_samples,
            encoder_layers=self.encoder_layers,
            length_groups=self.length_groups,
        )

    @property
    def run_path(self) -> Path:
        return Path(self.run_dir)

    def to_dict(self) -> dict:
        return asdict(self)

    def training_settings(self) -> dict:
        """Every setting that decides the trained weights: a resumed run must match these exactly.

        The input files are left out by path and compared by content instead (resume.pt keeps their sha256), so a
        moved results folder still resumes and a rebuilt input at the same path does not.
        """
        settings = self.to_dict()
        for name in (*INPUT_PATHS, "run_dir", "device", "log_every", "checkpoint_every"):
            settings.pop(name)
        return settings
