"""One curve's last stage of a curve design trained again under other CPU kernels: does its reading hold? (issue 59,
item 5)

    python -m bench.kernel_rerun --configfile config/curve_design.yaml --curve continuous/dist/0 --out DIR
    ATEN_CPU_CAPABILITY=default snakemake --cores 2 --configfile DIR/config.yaml          # the command it prints
    python -m bench.kernel_rerun --configfile config/curve_design.yaml --curve continuous/dist/0 --out DIR --compare

Run in the design's folder. The first call writes DIR/config.yaml: a fixed config that trains
exactly the curve's last stage, the stage read by the look it stopped at (each mode at the betas the look before placed,
or its coarse betas for stage 1, on that stage's blocks, with the design's seeds and settings), its z-free models
included, results in DIR/results. It checks, by `snakemake -n -p` in both, that each of its trainer commands is the
design's for the same run but for the results folder, then prints the command that trains it. --compare reads what
that trained: the runs whose take-up differs, and the curve's fit (analysis/comparisons/curve_table.shift_fit, every
run at 95% over the population of blocks) with the stage's runs as the design trained them and as the rerun did.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import pandas as pd
import yaml

from bench.common import flag_values, trainer_commands
from experiments.synthetic_sequences.arms import TOOK_UP
from experiments.synthetic_sequences.planning.config_docs import merged_config
from experiments.synthetic_sequences.planning.config_files import DEFAULT_CONFIG
from experiments.synthetic_sequences.sequential.curve_design import coarse_betas, curve_design_of, stage_blocks
from experiments.synthetic_sequences.sequential.curve_looks import curve_name, curve_runs, read_curve_looks
from experiments.synthetic_sequences.sequential.look_files import look_number

RUN_KEYS = ["family", "term", "alpha", "mode", "beta", "reference", "seed"]


def last_stage(results: Path, curve: tuple[str, str, float]) -> tuple[int, dict[str, list[float]]]:
    """The stage the curve's last look read, and that stage's betas per mode."""
    paths = sorted((results / "design").glob("look*.json"), key=look_number)
    looks = read_curve_looks(paths, recompute=False)
    groups = [{(g["family"], g["term"], float(g["alpha"])): g for g in look["groups"]} for look in looks]
    stage = groups[-1][curve]["decisions"]["curve"]["look"]
    if stage == 1:
        span = looks[0]["spans"][curve_name(curve)]
        return 1, {"mean": coarse_betas(span), "sum": coarse_betas(span)}
    return stage, groups[stage - 2][curve]["next_betas"]


def stage_config(configfiles: list[Path], curve: tuple[str, str, float], out: Path) -> tuple[dict, str]:
    """The fixed config that trains the curve's last stage (module docstring), merged as snakemake merges the design's
    config files over the folder's config/config.yaml, and the design's results folder."""
    texts = {DEFAULT_CONFIG: (Path("config") / DEFAULT_CONFIG).read_text(), **{str(path): path.read_text() for path in configfiles}}
    config = merged_config(texts, *(str(path) for path in configfiles))
    design, results = curve_design_of(config), config.pop("results")
    del config["design"]
    stage, betas = last_stage(Path(results), curve)
    family, term, alpha = curve
    spec = {key: value for key, value in config["families"][family].items() if key != "betas"}
    where = {"term": term, "alpha": alpha} if alpha else {"term": term}
    spec["runs"] = [{**where, "modes": [mode], "betas": mode_betas} for mode, mode_betas in betas.items()]
    default_families = yaml.safe_load(texts[DEFAULT_CONFIG])["families"]
    config["families"] = {**dict.fromkeys(default_families), family: spec}
    config["references"] = stage_blocks(design, config["references"], stage)
    config["results"] = str(out / "results")
    return config, results


def command_flags(tokens: list[str]) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """A command as its program and {flag: its values}: the same command whatever order its flags come in."""
    starts = [i for i, token in enumerate(tokens) if token.startswith("--")]
    ends = [*starts[1:], len(tokens)]
    return tuple(tokens[: starts[0]]), {tokens[i]: tuple(tokens[i + 1 : j]) for i, j in zip(starts, ends, strict=True)}


def same_commands(workdir: Path, design_args: list[str], stage_args: list[str], design_results: str, stage_results: str) -> int:
    """How many trainer commands the stage's config has, each the design's for the same chunk of runs with its results
    folder swapped; exits naming the first that is not."""
    stage = [shlex.split(shlex.join(tokens).replace(stage_results, design_results)) for tokens in trainer_commands(stage_args, workdir)]
    chunks = [flag_values(tokens, "--chunk-manifest")[0] for tokens in stage]
    design = [command_flags(tokens) for tokens in trainer_commands([*design_args, "--", *chunks], workdir)]
    if missing := [tokens for tokens in stage if command_flags(tokens) not in design]:
        sys.exit(f"the stage's config trains a run the design did not, as the design did not: {shlex.join(missing[0])}")
    return len(stage)


def compare(design_runs: pd.DataFrame, rerun: pd.DataFrame, curve: tuple[str, str, float]) -> None:
    from experiments.synthetic_sequences.analysis.comparisons.curve_table import shift_fit

    own = curve_runs(design_runs, curve)
    joined = own.merge(rerun[[*RUN_KEYS, TOOK_UP]], on=RUN_KEYS, how="left", suffixes=("", "_rerun"), indicator=True)
    rerun_rows = joined["_merge"] == "both"
    if rerun_rows.sum() != len(rerun):
        sys.exit(f"{len(rerun)} rerun runs, {rerun_rows.sum()} of them in the design's runs")
    flips = joined[rerun_rows & (joined[TOOK_UP] != joined[f"{TOOK_UP}_rerun"])]
    print(f"{len(rerun)} runs again; {len(flips)} take-ups differ:")
    print(flips[[*RUN_KEYS, TOOK_UP, f"{TOOK_UP}_rerun"]].to_string(index=False) if len(flips) else "  none")
    swapped = own.copy()
    swapped[TOOK_UP] = joined[f"{TOOK_UP}_rerun"].where(rerun_rows, joined[TOOK_UP]).to_numpy()
    print("| kernels of the last stage | runs | k (95% population interval) | sd_mode | parallelism p | reading |")
    print("|---|---|---|---|---|---|")
    for name, runs in (("as the design trained them", own), ("rerun", swapped)):
        fit = shift_fit(runs)
        said = f"{fit['k']:.2f} ({fit['ci_low']:.2f}-{fit['ci_high']:.2f})"
        print(f"| {name} | {fit['runs']} | {said} | {fit['sd_mode']:.2f} | {fit['parallel_p']:.3f} | {fit['reading']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", type=Path, nargs="+", required=True, help="the design's config files")
    parser.add_argument("--curve", required=True, help="family/term/alpha, as the look files name a curve")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args()
    family, term, alpha = args.curve.split("/")
    curve = (family, term, float(alpha))
    config, results = stage_config(args.configfile, curve, args.out.resolve())
    if args.compare:
        tables = [Path(folder) / "tables" / "runs.parquet" for folder in (results, config["results"])]
        if missing := [str(table) for table in tables if not table.exists()]:
            raise SystemExit(f"--compare: no {' or '.join(missing)}: the design and the rerun each write it when they finish")
        compare(pd.read_parquet(tables[0]), pd.read_parquet(tables[1]), curve)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    stage_file = args.out / "config.yaml"
    stage_file.write_text(yaml.safe_dump(config, sort_keys=False))
    design_args = ["--configfile", *map(str, args.configfile)]
    count = same_commands(Path.cwd(), design_args, ["--configfile", str(stage_file)], results, config["results"])
    print(f"{stage_file}: {count} training jobs, each the design's but for its folder; train them with")
    print(f"  ATEN_CPU_CAPABILITY=default snakemake --cores 2 --configfile {stage_file}")


if __name__ == "__main__":
    main()
