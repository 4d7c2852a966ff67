"""Every setting of one CVAE training run: TrainConfig{reconstruction, objective, model, optim, run}.

Built and validated once, at the edge (the trainer's CLI, or the Snakefile for every run at parse time), from
one flat {setting: value} mapping: each leaf setting is one CLI flag and one key of a family's `settings:`.
Help text and allowed values live beside each field (`setting(...)`), and the CLI is generated from them.
run_config.json is `to_dict()`: the nested groups, with only the chosen model family's latent settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, make_dataclass
from pathlib import Path

from core.disentanglement.checks import (
    check_choice,
    check_field_types,
    check_heads_divide_width,
    check_minimum,
    check_positive_counts,
)
from core.disentanglement.cli import flat_fields, flat_values, nested, setting, settings_from_flat
from core.disentanglement.config import AggregationMode, ReconstructionConfig
from core.disentanglement.registry import MODELS
from experiments.synthetic_sequences.arms import CONTROL_ARMS, NO_CONTROL
from experiments.synthetic_sequences.run_layout import RunLayout

MODEL_NAMES = tuple(MODELS)
AUXILIARY_TERMS = {name: model.auxiliary_terms for name, model in MODELS.items()}
BATCHING = ("random", "bucketed")
# the confound controls: `scale` multiplies the reconstruction term by the mean supervised token count
# of the training set (sum's global scale, no length weighting); `balance` multiplies beta by it
# (sum's length weighting at mean's reconstruction-to-KL balance).
CONTROLS = (NO_CONTROL, *CONTROL_ARMS)
INPUT_PATHS = ("train_records", "val_records", "test_records", "train_scores", "val_scores", "reference", "init_decoder")
DEVICES = "cpu, auto, cuda, cuda:N, mps"
DEVICE = re.compile(r"cpu|auto|cuda|cuda:[0-9]+|mps")
# options a run records only where they are on, so that the runs trained before each existed keep their settings
OFF_UNLESS_SET = ("stop_at_take_up",)


@dataclass(frozen=True)
class ObjectiveConfig:
    """Everything of the loss beside the reconstruction term: the KL weight, the controls, the auxiliary terms."""

    beta: float = setting(1.0, "weight of KL(q(z|x,y) || p(z|x)) (the balance control: sum mode with beta x mean token count)")
    beta_warmup_steps: int = setting(0, "ramp beta linearly from 0 over this many steps (KL annealing; 0 = off)")
    controls: str = setting(
        "none",
        "none; scale: reconstruction x mean train token count (use with mean); balance: beta x that count (use with sum)",
        choices=CONTROLS,
    )
    auxiliary_weights: dict[str, float] = setting(
        help="weights of auxiliary terms, added to the loss as given (negative to encourage), e.g. router_marginal_kl=0.1; "
        + "; ".join(f"{model}: {', '.join(names)}" for model, names in AUXILIARY_TERMS.items()),
        factory=dict,
    )

    def __post_init__(self) -> None:
        check_field_types(self)
        check_choice("controls", self.controls, CONTROLS)
        check_minimum(self, ("beta", "beta_warmup_steps"), strict=False)

    def control_factors(self, mean_train_tokens: float) -> tuple[float, float]:
        """(reconstruction multiplier, beta multiplier) of the selected control."""
        return (mean_train_tokens if self.controls == "scale" else 1.0, mean_train_tokens if self.controls == "balance" else 1.0)


@dataclass(frozen=True)
class ModelSettings:
    """The CVAE family and its decoder's size; ModelConfig adds each registered family's latent settings."""

    model: str = setting(MODEL_NAMES[0], "CVAE family", choices=MODEL_NAMES)
    d_model: int = setting(64, "transformer width of decoder and encoder")
    n_layer: int = setting(2, "decoder layers")
    n_head: int = setting(4, "attention heads")

    def __post_init__(self) -> None:
        check_field_types(self)
        check_choice("model", self.model, MODEL_NAMES)
        check_positive_counts(self, ("d_model", "n_layer", "n_head"))
        check_heads_divide_width(self)

    @property
    def latent(self):
        """The chosen family's latent settings (a field named after the family, of its registered config class)."""
        return getattr(self, self.model)


# one field per registered family (core/disentanglement/registry.py), named after it; settings two families share
# take one flag
ModelConfig = make_dataclass(
    "ModelConfig",
    [(name, family.config_class, nested(family.config_class)) for name, family in MODELS.items()],
    bases=(ModelSettings,),
    frozen=True,
    namespace={"__module__": __name__},
)
ModelConfig.__doc__ = "The CVAE family, its decoder's size, and each registered family's latent settings."


@dataclass(frozen=True)
class OptimConfig:
    seed: int = setting(0, "seed of the initial weights, the batch order and every sampled latent")
    steps: int = setting(600, "optimisation steps")
    batch_size: int = setting(64, "examples per training batch")
    batching: str = setting(
        "random", "training batches; bucketed pads less but makes batch-marginal terms see one length range", choices=BATCHING
    )
    lr: float = setting(2e-3, "peak learning rate of the warmup-cosine schedule")
    warm_decoder_lr_factor: float = setting(
        1.0,
        "with --init-decoder: the pretrained decoder weights learn at lr x this factor (the router and the latent "
        "projection at lr), so fine-tuning does not first undo what the z-free model learned",
    )
    weight_decay: float = setting(0.01, "AdamW weight decay")
    warmup_steps: int = setting(50, "linear learning-rate warmup steps")
    grad_clip: float = setting(1.0, "gradient-norm clip")

    def __post_init__(self) -> None:
        check_field_types(self)
        check_choice("batching", self.batching, BATCHING)
        check_positive_counts(self, ("steps", "batch_size"))
        check_minimum(self, ("lr", "warm_decoder_lr_factor", "grad_clip"), strict=True)
        check_minimum(self, ("weight_decay", "warmup_steps"), strict=False)


@dataclass(frozen=True)
class RunConfig:
    """Inputs, output and bookkeeping: where the run reads and writes, how often it reports, on which device."""

    train_records: str = setting(help="train split records parquet")
    val_records: str = setting(help="validation split records parquet")
    test_records: str = setting(help="test split records parquet (evaluation only)")
    train_scores: str = setting(help="z-free scores b_{i,t} of the train split")
    val_scores: str = setting(help="z-free scores of the validation split; must be the ones the reference was built from")
    reference: str = setting(help="c_base artifact (reference/{mode}.json) built in the run's own aggregation mode")
    run_dir: str = setting(help="output folder of this run")
    zfree_seed: int = setting(
        0, "seed of the z-free model whose scores, c_base and warm start this run reads (its reference block); checked"
    )
    init_decoder: str = setting(
        "",
        "z-free checkpoint (results/zfree/model.pt) whose weights start the CVAE decoder: a warm start; "
        "only the latent's input projection starts random. Empty: random initialisation",
    )
    eval_every: int = setting(100, "steps between validation points of the learning curves")
    stop_at_take_up: bool = setting(
        False,
        "end the run at a confirmed take-up: the second validation point in a row at or above the take-up threshold "
        "(seeds in lockstep end when every one has); its final I(x;z), strategy information and convergence are then not read",
    )
    checkpoint_every: int = setting(100, "steps between resume checkpoints")
    log_every: int = setting(50, "steps between progress lines")
    eval_prompts_per_code: int = setting(32, "test evaluation: sampled prompts per code")
    device: str = setting("cpu", "cpu, auto (cuda when available, else cpu with a notice), cuda, cuda:N or mps")

    def __post_init__(self) -> None:
        check_field_types(self)
        check_positive_counts(self, ("eval_every", "checkpoint_every", "log_every", "eval_prompts_per_code"))
        check_minimum(self, ("zfree_seed",), strict=False)
        if not DEVICE.fullmatch(self.device):
            raise ValueError(f"device: {self.device!r} is not allowed; allowed values: {DEVICES}")

    @property
    def path(self) -> Path:
        return Path(self.run_dir)

    @property
    def layout(self) -> RunLayout:
        return RunLayout(self.run_dir)


@dataclass(frozen=True)
class TrainConfig:
    reconstruction: ReconstructionConfig = nested(ReconstructionConfig)
    objective: ObjectiveConfig = nested(ObjectiveConfig)
    model: ModelConfig = nested(ModelConfig)
    optim: OptimConfig = nested(OptimConfig)
    run: RunConfig = nested(RunConfig)

    def __post_init__(self) -> None:
        """The checks across groups; each group checked its own fields when it was built."""
        allowed = AUXILIARY_TERMS[self.model.model]
        for name in self.objective.auxiliary_weights:
            if name not in allowed:
                raise ValueError(
                    f"auxiliary_weights: {name!r} is not a term of model {self.model.model!r}; allowed values: {', '.join(allowed)}"
                )

    @classmethod
    def from_flat(cls, values: Mapping) -> TrainConfig:
        """The one way a run's settings are built: from {setting: value}; an unknown setting is refused by name."""
        unknown = sorted(set(values) - set(SETTING_NAMES))
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not a trainer setting; allowed: {', '.join(SETTING_NAMES)}")
        return settings_from_flat(cls, values)

    @property
    def mode(self) -> AggregationMode:
        return self.reconstruction.mode

    def to_dict(self) -> dict:
        """run_config.json: the groups as nested mappings, the model with only its own family's latent settings."""
        groups = asdict(self)
        groups["reconstruction"]["reconstruction_loss_token_aggregation_mode"] = self.mode.value
        model = groups["model"]
        model["latent"] = model.pop(self.model.model)
        for name in MODEL_NAMES:
            model.pop(name, None)
        for name in OFF_UNLESS_SET:
            if not groups["run"][name]:
                groups["run"].pop(name)
        return groups

    def flat(self) -> dict:
        return flat_values(self)

    def with_settings(self, **changes) -> TrainConfig:
        """A copy with some settings (by their flat names) changed, checked like any other."""
        return TrainConfig.from_flat({**self.flat(), **changes})

    def training_settings(self) -> dict:
        """Every setting that decides the trained weights: a resumed run must match these exactly.

        The input files are left out by path and compared by content instead (resume.pt keeps their sha256), so a
        moved results folder still resumes and a rebuilt input at the same path does not.
        """
        settings = {name: str(value) if isinstance(value, AggregationMode) else value for name, value in self.flat().items()}
        for name in (*INPUT_PATHS, "run_dir", "device", "log_every", "checkpoint_every"):
            settings.pop(name)
        return {name: value for name, value in settings.items() if name not in OFF_UNLESS_SET or value}


SETTING_NAMES = tuple(dict.fromkeys(name for name, _ in flat_fields(TrainConfig)))
