"""What the benchmarks share: a measured figure against its target, the machine, real pipeline inputs, a workflow copy.

Every figure is a ratio or a size taken within one run, since absolute times drift on shared machines.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Figure:
    benchmark: str
    name: str
    value: float
    unit: str  # "x", "%", "s", "MiB", "ms"
    target: str = ""  # "< 1.03", ">= 2.5", ... ; empty for figures reported for context
    note: str = ""

    def __post_init__(self) -> None:
        self.value = float(self.value)  # numpy scalars would leak numpy bools into the JSON results

    @property
    def met(self) -> bool | None:
        if not self.target:
            return None
        op, bound = self.target.split()
        bound = float(bound)
        return {"<": self.value < bound, "<=": self.value <= bound, ">": self.value > bound, ">=": self.value >= bound}[op]

    def formatted(self) -> str:
        if self.unit == "%":
            return f"{self.value:.1f}%"
        if self.unit == "x":
            return f"{self.value:.3f}x" if self.value < 10 else f"{self.value:.1f}x"
        return f"{self.value:.3g} {self.unit}"

    def to_dict(self) -> dict:
        return {**asdict(self), "met": self.met}


@dataclass
class BenchResult:
    command: str
    figures: list[Figure]
    curves: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # curve name -> {"runs": [...], "seconds": [...]}
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"command": self.command, "seconds": self.seconds, "figures": [f.to_dict() for f in self.figures], "curves": self.curves}


def print_result(result: BenchResult) -> None:
    print(f"\n$ {result.command}   ({result.seconds:.0f} s)")
    for f in result.figures:
        verdict = {True: "met", False: "MISSED", None: ""}[f.met]
        target = f"target {f.target}{' ' + f.unit if f.unit not in ('x', '%') else ''}" if f.target else ""
        print(f"  {f.name:<62s} {f.formatted():>12s}   {target:<18s} {verdict:<6s} {f.note}")
    sys.stdout.flush()


def trainer_commands(snakemake_args: list[str], cwd: Path) -> list[list[str]]:
    """The trainer command of every training job of the pilot in `cwd` (`snakemake -n -p --forcerun train_run` with
    `snakemake_args`: its config files and settings, and after `--` the outputs to plan for where not all), each as
    its tokens, `python` as this interpreter."""
    shown = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "--forcerun", "train_run", *snakemake_args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    commands = [shlex.split(line.split(":", 1)[1].split(" > ")[0]) for line in shown.splitlines() if "train_disentangled" in line]
    return [[sys.executable if token == "python" else token for token in tokens] for tokens in commands]


def flag_values(tokens: list[str], flag: str) -> list[str]:
    """The values of `flag` in a command's tokens: those after it up to the next flag."""
    start = tokens.index(flag) + 1
    end = next((i for i in range(start, len(tokens)) if tokens[i].startswith("--")), len(tokens))
    return tokens[start:end]


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def interleaved_times(blocks: Mapping[str, Callable[[], float]], rounds: int) -> dict[str, np.ndarray]:
    """Seconds of each timed block per round: one warm-up call each (allocator, kernels, optimiser state), then every
    round calls each once in a shuffled order, so drift on a shared machine falls on all alike."""
    for block in blocks.values():
        block()
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {name: [] for name in blocks}
    for r in range(rounds):
        for name in rng.permutation(list(blocks)):
            times[name].append(blocks[name]())
        if (r + 1) % 5 == 0:
            progress(f"round {r + 1}/{rounds}")
    return {name: np.array(values) for name, values in times.items()}


def ratio_figure(benchmark: str, name: str, times: np.ndarray, baseline: np.ndarray, target: str = "", note: str = "") -> Figure:
    """The median over rounds of a block's time over the baseline's in the same round, with the quartiles."""
    ratios = times / baseline
    low, high = np.quantile(ratios, [0.25, 0.75])
    quartiles = f"quartiles {low:.3f}-{high:.3f} over {len(ratios)} rounds"
    return Figure(benchmark, name, float(np.median(ratios)), "x", target, note=f"{quartiles}; {note}" if note else quartiles)


def machine() -> dict:
    import torch

    cpu = platform.processor() or "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        cpu = names[0] if names else cpu
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_gib, 1),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "git_commit": commit or "unknown",
        "date": datetime.date.today().isoformat(),
    }


def default_config() -> dict:
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def workflow_dir(folder: Path, config: dict) -> list[str]:
    """A working directory for the real Snakefile with `config` as its config/config.yaml; returns the snakemake command."""
    (folder / "config").mkdir(parents=True, exist_ok=True)
    (folder / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return ["snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(folder)]


def wall_time(command: list[str]) -> tuple[float, str]:
    """Seconds a command takes and its stdout; a failing command stops the benchmark with its output."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed, done.stdout


def prepare_run_inputs(folder: Path, zfree_steps: int = 100) -> dict[str, str]:
    """The default pilot's data, z-free scores and both reference artifacts, made by the pipeline's own functions.

    The z-free model is trained briefly: its scores set b_{i,t}, whose values do not change any cost measured here.
    """
    from core.disentanglement.artifacts import write_json
    from core.disentanglement.config import AggregationMode
    from core.disentanglement.scale_artifact import build_scale_artifact
    from core.disentanglement.zfree import ZFreeTrainConfig, score_records, train_zfree
    from experiments.synthetic_sequences.generate import SequenceConfig, generate

    progress("generating data, z-free scores and references")
    config = default_config()
    data, zfree = folder / "data", folder / "zfree"
    generate(SequenceConfig(**config["data"]), data)
    zfree_settings = {**config["zfree"], "steps": zfree_steps, "eval_every": zfree_steps}
    train_zfree(data / "train.parquet", data / "val.parquet", zfree / "model.pt", ZFreeTrainConfig(**zfree_settings))
    for split in ("train", "val"):
        score_records(zfree / "model.pt", data / f"{split}.parquet", zfree / f"{split}_scores.parquet")
    for mode in AggregationMode:
        write_json(build_scale_artifact(zfree / "val_scores.parquet", mode), folder / "reference" / f"{mode}.json")
    return {
        **{f"{split}_records": str(data / f"{split}.parquet") for split in ("train", "val", "test")},
        **{f"{split}_scores": str(zfree / f"{split}_scores.parquet") for split in ("train", "val")},
        "reference_dir": str(folder / "reference"),
    }


def pilot_train_config(
    inputs: dict[str, str], run_dir: Path, *, family: str = "discrete", term: str = "raw", mode: str = "mean", **overrides
):
    """The default pilot's trainer config for one run of `family`, with its real family settings."""
    from experiments.synthetic_sequences.planning.grid import expand_grid

    config = default_config()
    specs = [s for s in expand_grid(config["families"], config["seeds"]) if s.family == family and s.term == term and s.mode == mode]
    if not specs:
        raise ValueError(f"the default config has no {family} run with term {term} in mode {mode}")
    paths = {name: value for name, value in inputs.items() if name != "reference_dir"}
    train_config = specs[0].train_config(**paths, reference=f"{inputs['reference_dir']}/{mode}.json", run_dir=str(run_dir))
    return train_config.with_settings(**overrides)


SYNTHETIC_RUNS = [
    {"term": "raw", "modes": ["mean", "sum"]},
    {"term": "dist", "modes": ["mean", "sum"]},
    {"term": "ex", "modes": ["mean", "sum"]},
    {"term": "tok", "alpha": 1, "modes": ["mean", "sum"]},
    {"term": "tokcc", "alpha": 1, "modes": ["mean", "sum"]},
]


def synthetic_families(runs: int) -> dict:
    """A `families` config section of exactly `runs` runs: the default discrete family, 10 term/mode pairs x runs/10 seeds."""
    per_seed = sum(len(r["modes"]) for r in SYNTHETIC_RUNS)
    if runs % per_seed:
        raise ValueError(f"runs: {runs} is not a multiple of {per_seed} (term/mode pairs per seed)")
    family = {**default_config()["families"]["discrete"], "seeds": list(range(runs // per_seed)), "runs": SYNTHETIC_RUNS}
    return {"discrete": family}


def scheduled_batches(config, inputs, steps: int) -> list:
    """The trainer's batches of steps 0 .. steps-1, each with its z-free scores b [B, T], collated once."""
    from core.disentanglement.batching import BatchSchedule

    batcher, (train_base, _) = inputs.batchers["train"], inputs.base["train"]
    optim = config.optim
    schedule = BatchSchedule(batcher.lengths, optim.batch_size, optim.seed, optim.batching)
    batches = []
    for step in range(steps):
        index = schedule(step)
        batch = batcher.batch(index)
        batches.append((batch, train_base[index, : batch.mask.shape[1]]))
    return batches
