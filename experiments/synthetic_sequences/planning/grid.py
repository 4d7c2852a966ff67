"""The run grid of a pipeline config: families x runs x modes x seeds, and the run keys that name them.

Each run's directory, key and files are run_layout's.

Config shape (validated by config/schema/config.schema.yaml first):

    references: 3                            # the z-free seeds, one reference block each: a count (0..N-1) or a list
    seeds: 10                                # every family's seeds: a count (0..N-1) or a list; a family may set its own
    families:
      <family>:
        model: shared_discrete | continuous      # a family of core/disentanglement/registry.py
        seeds: [0, 1]                        # optional: this family's own seeds (a count or a list)
        beta: 0.2                            # or betas: [0.02, 0.05, 0.1]: a beta axis, each beta an arm of its own
        controls: none | scale | balance     # scale: reconstruction x mean train token count; balance: beta x it
        warm_start: false                    # true: every run's decoder starts from the z-free checkpoint
        control_of: <family>                 # for a control family: the family it is compared against
        settings: {...}                      # any other train_disentangled flag, e.g. steps, num_codes
        hybrid: {tokcc: 0.5, dist: 0.5}      # coefficients, when a run uses term hybrid
        runs:
          - {term: dist, modes: [mean, sum]}
          - {term: tokcc, alpha: 1.0, beta: 0.5, modes: [mean, sum]}   # a run's own beta overrides the family's
          - {term: raw, betas: [0.01, 0.03], modes: [mean, sum]}         # ...as do its own betas

A run on a beta axis carries its beta in its key (run_layout: raw_sum_0_b0.05); one without has the key it always had.

Every run of every family is trained once in every reference block, with the same seeds: its arms are compared within
a block and pooled across blocks.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from argparse import ArgumentTypeError
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from core.disentanglement.cli import parse_pairs
from core.disentanglement.config import OPTIMISABLE_TERMS, AggregationMode, check_aggregation_mode, parse_aggregation_mode
from experiments.synthetic_sequences.arms import CONTROL_MODE, NO_CONTROL
from experiments.synthetic_sequences.run_layout import GridError, chunk_name, chunk_path, run_key, run_path
from experiments.synthetic_sequences.training.settings import CONTROLS, INPUT_PATHS, SETTING_NAMES, TrainConfig

# the required paths of a run (init_decoder is optional: "" starts from random weights)
PATH_FIELDS = (*(name for name in INPUT_PATHS if name != "init_decoder"), "run_dir")
# set by the grid itself (from the run key, the family or the workflow), never through a family's settings
GRID_FIELDS = PATH_FIELDS + (
    "model",
    "reconstruction_term",
    "reconstruction_loss_token_aggregation_mode",
    "token_weight_alpha",
    "seed",
    "zfree_seed",
    "beta",
    "controls",
    "hybrid_coefficients",
    "init_decoder",
)
SETTABLE_FIELDS = tuple(name for name in SETTING_NAMES if name not in GRID_FIELDS)

FAMILY_PATTERN = r"[A-Za-z0-9][A-Za-z0-9-]{0,63}"  # a path component, short enough for any filesystem
FAMILY_NAME = re.compile(f"^{FAMILY_PATTERN}$")
# a seed label fits in the low 20 bits of its run's trainer seed (training_seed), the block's z-free seed (at most
# 1000, the schema's bound) above them: the trainer seed stays below 2**31, as numpy's and scikit-learn's seeds must
SEED_BITS = 20


def training_seed(block: int, seed: int) -> int:
    """The seed a run trains with: its block's z-free seed in the high bits, its own seed in the low SEED_BITS.

    Reference 0's runs train with their own seed, so one reference block reproduces the runs of a pipeline without
    blocks; in every other block a seed is a draw of its own, so two blocks never share a router's initial weights and
    a batch order (a cold-start run, which reads nothing of its reference, would otherwise be copied in every block).
    """
    return (block << SEED_BITS) + seed


@dataclass(frozen=True)
class RunSpec:
    family: str
    block: int  # its reference block, by the block's z-free seed (the key `references:`, the column `reference`, ref<N>)
    model: str
    term: str
    mode: AggregationMode  # parsed where the config names it: a bare string is refused
    alpha: float
    seed: int
    beta: float
    controls: str
    warm_start: bool = False
    beta_axis: bool = False  # trained on a beta axis (`betas:`): its key carries its beta
    settings: Mapping = field(default_factory=dict, hash=False, compare=False)
    hybrid: Mapping = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        check_aggregation_mode(self.mode, "RunSpec.mode")

    @property
    def key_beta(self) -> float | None:
        """The beta its key carries: its own on a beta axis, else None."""
        return self.beta if self.beta_axis else None

    @property
    def key(self) -> str:
        return run_key(self.term, self.mode, self.alpha, self.key_beta)

    @property
    def path(self) -> str:
        """The run's path under the runs folder (run_layout.RUN_TEMPLATE)."""
        return run_path(self.family, self.block, self.term, self.mode, self.alpha, self.seed, self.key_beta)

    def parameters(self) -> dict:
        """What its path names, from the spec itself: run_layout.parse_run_path(self.path) gives the same, but a path
        is parsed only where one is found on disk."""
        named = {"family": self.family, "reference": self.block, "term": self.term, "mode": str(self.mode)}
        named |= {"alpha": float(self.alpha), "seed": self.seed}
        return named if self.key_beta is None else {**named, "beta": float(self.key_beta)}

    def chunk_path(self, seeds_per_job: int) -> str:
        """The path of the chunk it trains in at `seeds_per_job` under the runs folder (run_layout.CHUNK_TEMPLATE)."""
        chunk = chunk_name(self.seed, seeds_per_job)
        return chunk_path(self.family, self.block, self.term, self.mode, self.alpha, chunk, self.key_beta)

    def trainer_settings(self) -> dict:
        """The trainer's settings of this run, by setting name: its key's term, mode and alpha, its block's z-free seed
        and its family's settings. Its seed, its folder and its input files are its job's (Plan.chunk_flags)."""
        settings = {
            "reconstruction_term": self.term,
            "reconstruction_loss_token_aggregation_mode": self.mode,
            "token_weight_alpha": self.alpha,
            "zfree_seed": self.block,
            "model": self.model,
            "beta": self.beta,
            "controls": self.controls,
            **self.settings,
        }
        if self.term == "hybrid":
            settings["hybrid_coefficients"] = dict(self.hybrid)
        return settings

    def train_config(self, **paths: str) -> TrainConfig:
        """The full trainer config of this run (paths default to placeholders, for validation)."""
        paths = {name: paths.get(name, "-") for name in PATH_FIELDS}
        return TrainConfig.from_flat({**paths, "seed": training_seed(self.block, self.seed), **self.trainer_settings()})


def resolve_seeds(seeds: int | Sequence[int] | None, where: str, what: str = "seed") -> list[int]:
    """A count N (0..N-1) or a list of seeds, checked: at least one, none repeated, each fitting its word."""
    if seeds is None:
        raise GridError(f"{where}: no seeds; set a top-level `seeds:` (a count or a list) or the family's own")
    resolved = list(range(seeds)) if isinstance(seeds, int) else [int(seed) for seed in seeds]
    if not resolved:
        raise GridError(f"{where}: at least one {what} is needed")
    if len(set(resolved)) != len(resolved):
        raise GridError(f"{where}: {resolved} repeats a {what}")
    if not all(0 <= seed < 2**SEED_BITS for seed in resolved):
        raise GridError(f"{where}: {what}s lie in 0..{2**SEED_BITS - 1}")
    return resolved


def resolve_blocks(references: int | Sequence[int] | None) -> list[int]:
    """The reference blocks by their z-free seeds: `references: 3` is seeds 0, 1, 2; a list names them; default one, 0."""
    return resolve_seeds(1 if references is None else references, "references", what="z-free seed")


def family_seeds(spec: Mapping, default: int | Sequence[int] | None, family: str) -> list[int]:
    """The family's own `seeds`, else the top-level default."""
    if "seeds" in spec:
        return resolve_seeds(spec["seeds"], f"families.{family}.seeds")
    return resolve_seeds(default, "seeds")


def check_family(families: Mapping[str, Mapping], family: str) -> None:
    """The family-level rules: its name, controls and their main family, and the names of its settings."""
    spec, where = families[family], f"families.{family}"
    if not FAMILY_NAME.match(family):
        raise GridError(f"{where}: family names are 1-64 letters, digits and '-' (no '_' or '/'), got {family!r}")
    controls = spec.get("controls", NO_CONTROL)
    if controls not in CONTROLS:
        raise GridError(f"{where}.controls: {controls!r} is not allowed; allowed values: {', '.join(CONTROLS)}")
    parent = spec.get("control_of")
    if (controls == NO_CONTROL) != (parent is None):
        raise GridError(f"{where}.control_of: a family with controls {controls!r} {'needs' if parent is None else 'takes no'} control_of")
    if parent is not None and (parent not in families or families[parent].get("controls", NO_CONTROL) != NO_CONTROL):
        raise GridError(f"{where}.control_of: {parent!r} is not a family without controls; families: {', '.join(families)}")
    unknown = sorted(set(spec.get("settings", {})) - set(SETTABLE_FIELDS))
    if unknown:
        raise GridError(f"{where}.settings: {unknown} are not trainer settings; allowed: {', '.join(SETTABLE_FIELDS)}")


def beyond_defaults(spec: RunSpec, config: TrainConfig) -> dict:
    """A run's family settings less those written at their default (the config they give is the same without them):
    a setting spelled out at its default changes no job's command, so it reruns nothing."""
    return {
        name: value
        for name, value in spec.settings.items()
        if dataclasses.replace(spec, settings={k: v for k, v in spec.settings.items() if k != name}).train_config() != config
    }


def run_betas(spec: Mapping, run: Mapping) -> tuple[list[float], bool]:
    """A run entry's betas and whether they are a beta axis: its own `beta` or `betas` where it sets one (each term at
    its own operating point), else its family's; one beta (1 where none is set) is no axis."""
    source = run if "beta" in run or "betas" in run else spec
    if "betas" in source:
        return [float(beta) for beta in source["betas"]], True
    return [float(source.get("beta", 1.0))], False


def family_runs(family: str, spec: Mapping, seeds: Sequence[int], blocks: Sequence[int]) -> Iterator[tuple[str, RunSpec]]:
    """(where, run) for every run of one checked family in every reference block; each run's full trainer config is
    validated on the way."""
    controls = spec.get("controls", NO_CONTROL)
    for i, run in enumerate(spec.get("runs") or []):
        where = f"families.{family}.runs[{i}]"
        if run["term"] not in OPTIMISABLE_TERMS:
            raise GridError(f"{where}.term: {run['term']!r} is not allowed; allowed values: {', '.join(OPTIMISABLE_TERMS)}")
        if run["term"] == "hybrid" and not spec.get("hybrid"):
            raise GridError(f"families.{family}.hybrid: runs[{i}] uses term 'hybrid' but the family sets no hybrid coefficients")
        for mode in run["modes"]:
            try:
                parsed = parse_aggregation_mode(mode, f"{where}.modes")
            except ValueError as err:
                raise GridError(str(err)) from err
            if controls in CONTROL_MODE and mode != CONTROL_MODE[controls]:
                raise GridError(f"{where}.modes: a {controls!r} control family runs mode {CONTROL_MODE[controls]!r} only, got {mode!r}")
            betas, beta_axis = run_betas(spec, run)
            settings = None  # the family's settings that its runs' configs need: those not at their default
            for beta, block, seed in itertools.product(betas, blocks, seeds):
                run_spec = RunSpec(
                    family=family,
                    block=block,
                    model=spec["model"],
                    term=run["term"],
                    mode=parsed,
                    alpha=float(run.get("alpha", 0.0)),
                    seed=int(seed),
                    beta=beta,
                    controls=controls,
                    warm_start=bool(spec.get("warm_start", False)),
                    beta_axis=beta_axis,
                    settings=dict(spec.get("settings", {})) if settings is None else settings,
                    hybrid=dict(spec.get("hybrid", {})),
                )
                try:
                    config = run_spec.train_config()  # the one validation of every setting, alpha on its term included
                except (TypeError, ValueError) as err:
                    raise GridError(f"families.{family}: {err} (in runs[{i}])") from err
                if settings is None:
                    settings = beyond_defaults(run_spec, config)
                    run_spec = dataclasses.replace(run_spec, settings=settings)

                yield where, run_spec


def expand_grid(
    families: Mapping[str, Mapping], seeds: int | Sequence[int] | None = None, references: int | Sequence[int] | None = None
) -> list[RunSpec]:
    """Every run of the config, in config order; `seeds` is the top-level default of the families that set none,
    `references` the reference blocks (resolve_blocks). Raises GridError for anything ill-formed, before any job runs."""
    blocks = resolve_blocks(references)
    if not families:
        raise GridError("families: the config defines no family; at least one is needed")
    specs: list[RunSpec] = []
    seen: dict[str, str] = {}
    for family in families:
        check_family(families, family)
        for where, run_spec in family_runs(family, families[family], family_seeds(families[family], seeds, family), blocks):
            if run_spec.path in seen:
                raise GridError(f"{where}: duplicate run key {run_spec.path} (also from {seen[run_spec.path]})")
            seen[run_spec.path] = where
            specs.append(run_spec)
    return specs


def modes_used(specs: Iterable[RunSpec]) -> list[str]:
    return sorted({spec.mode for spec in specs})


def blocks_used(specs: Iterable[RunSpec]) -> list[int]:
    return sorted({spec.block for spec in specs})


def control_families(families: Mapping[str, Mapping]) -> dict[str, str]:
    """{control family: the main family it is compared against}."""
    return {name: spec["control_of"] for name, spec in families.items() if spec.get("control_of")}


def parse_control_of(text: str) -> dict[str, str]:
    """'fam-scale=fam,fam-balance=fam' (the tables' and plots' --control-of) -> {control family: main family}."""
    try:
        return parse_pairs(text, str, what="control_family=main_family")
    except ArgumentTypeError as err:
        raise GridError(f"--control-of: {err}") from err
