"""The benchmarks measure the real code paths: their generated grids, synthesised runs and padding counts are checked here."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from bench.common import Figure, pilot_train_config, synthetic_families
from bench.data_draws import main as compare_draws
from bench.tables import current_inputs, extract_and_aggregate, synthesise_runs
from bench.zfree import cvae_padding_share
from core.disentanglement.artifacts import write_json
from core.disentanglement.batching import BatchSchedule, RecordBatcher, SpecialTokens
from core.disentanglement.config import AggregationMode
from core.disentanglement.records import read_records
from core.disentanglement.scale_artifact import build_scale_artifact
from experiments.synthetic_sequences.planning.grid import expand_grid
from experiments.synthetic_sequences.training.cvae_run import train
from experiments.synthetic_sequences.training.settings import OptimConfig


@pytest.mark.parametrize("runs", [10, 100, 5000])
def test_generated_grids_have_exactly_the_asked_number_of_runs(runs):
    specs = expand_grid(synthetic_families(runs))
    assert len(specs) == runs
    assert len({spec.path for spec in specs}) == runs


def test_a_grid_size_that_is_not_a_multiple_of_the_pairs_is_refused():
    with pytest.raises(ValueError, match="runs: 15 is not a multiple of 10"):
        synthetic_families(15)


@pytest.mark.parametrize(
    ("value", "target", "met"), [(1.02, "< 1.03", True), (1.03, "< 1.03", False), (2.5, ">= 2.5", True), (2.49, ">= 2.5", False)]
)
def test_a_figure_is_met_only_inside_its_target(value, target, met):
    assert Figure("b", "n", value, "x", target).met is met
    assert Figure("b", "n", value, "x").met is None


def test_padding_share_counts_every_padded_position(data_dir):
    records = read_records(data_dir / "train.parquet")
    batcher = RecordBatcher(records.frame, SpecialTokens.from_vocab(records.vocab))
    config = OptimConfig(batch_size=16)
    schedule = BatchSchedule(batcher.lengths, config.batch_size, config.seed, config.batching)
    computed = sum(len(index) * batcher.lengths[index].max() for index in (schedule(s) for s in range(schedule.per_epoch)))
    assert cvae_padding_share(batcher, config, 1) == pytest.approx(1 - batcher.lengths.sum() / computed)
    assert cvae_padding_share(batcher, config, config.batch_size) == pytest.approx(0.0)  # one example per group pads nothing
    assert 0 < cvae_padding_share(batcher, config, 4) < cvae_padding_share(batcher, config, 1)


def test_synthesised_runs_go_through_the_real_extraction_and_aggregation(data_dir, scored, tmp_path):
    for mode in AggregationMode:
        write_json(build_scale_artifact(scored / "val.parquet", mode), tmp_path / "reference" / f"{mode}.json")
    inputs = {
        **{f"{split}_records": str(data_dir / f"{split}.parquet") for split in ("train", "val", "test")},
        **{f"{split}_scores": str(scored / f"{split}.parquet") for split in ("train", "val")},
        "reference_dir": str(tmp_path / "reference"),
    }
    template = tmp_path / "template"
    tiny = {"steps": 2, "eval_every": 2, "eval_prompts_per_code": 2, "d_model": 32, "n_layer": 1, "n_head": 2}
    train([pilot_train_config(inputs, template, **tiny)])

    bound_to = current_inputs(inputs, template)
    run_dirs = synthesise_runs(template, tmp_path / "grid", 20, bound_to)
    extract_and_aggregate(run_dirs, tmp_path / "grid", str(data_dir / "summary.json"), bound_to)
    runs = pd.read_parquet(tmp_path / "grid" / "tables" / "runs.parquet")
    assert len(runs) == 20
    assert sorted(runs.groupby(["term", "mode"]).size().unique()) == [2]  # 10 term/mode pairs x 2 seeds
    assert runs["nmi"].nunique() == 20  # every run carries its own jittered values
    assert np.isfinite(runs["nmi"]).all()


def test_the_run_grid_and_the_tables_load_without_torch():
    """The Snakefile imports the grid at every parse, and every extraction job imports the tables: neither pays for torch."""
    code = "import sys, experiments.synthetic_sequences.planning.grid, experiments.synthetic_sequences.analysis.tables; "
    code += "print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_the_design_simulation_reads_a_term_without_controls_through_the_looks_code():
    """Two arms (one planned contrast): sum at 1.0 against mean at 0.0 is decided "raises" in every simulated pilot, at
    look 1 (5 blocks x 2 seeds: the stratified exact p of 10/10 against 0/10 is far below 0.0056)."""
    command = [sys.executable, "-m", "bench.sequential_design", "--draws", "4", "--looks", "5x2", "5x4", "--arms", "mean", "sum"]
    run = subprocess.run([*command, "--alternative", "mean=0", "sum=1"], capture_output=True, text=True, check=True)
    assert "P(sum - mean raises): sequential 1.000, fixed at 20 runs per arm 1.000" in run.stdout
    assert 'decided "raises" at: look 1 1.000, look 2 0.000' in run.stdout
    assert "expected runs per arm: mean 10.0, sum 10.0 (fixed: 20 each)" in run.stdout
    refused = subprocess.run([*command, "--alternative", "mean=0.1"], capture_output=True, text=True)
    assert refused.returncode == 2 and "--alternative: give a rate for each of --arms mean sum" in refused.stderr


def test_the_data_draw_comparison_reads_each_arm_by_block_with_the_verdicts_tests(tmp_path, capsys):
    """Two folders of 2 blocks x 2 seeds: in one, sum takes up in every run and mean in none; in the other, sum in 3
    of 4. Each arm's counts per block, the draw's exact stratified p (block 0: 2/2 vs 2/2, block 1: 2/2 vs 1/2, so
    the conditional distribution of the one-draw arm's events given 3 and 4 events in the blocks is 1/2 at 2 for
    block 1 and certain in block 0: p = 1) and Breslow-Day's p (nan: at most one block varies)."""
    for folder, sums in (("one", [1, 1, 1, 1]), ("own", [1, 1, 1, 0])):
        rows = [
            {
                "family": "d",
                "controls": "none",
                "term": "raw",
                "alpha": 0.0,
                "mode": mode,
                "reference": block,
                "seed": seed,
                "took_up": bool(sums[2 * block + seed]) if mode == "sum" else False,
            }
            for mode in ("sum", "mean")
            for block in (0, 1)
            for seed in (0, 1)
        ]
        (tmp_path / folder / "tables").mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(tmp_path / folder / "tables" / "runs.parquet")
    compare_draws([str(tmp_path / "one"), str(tmp_path / "own")])
    out = capsys.readouterr().out
    assert "| d        | raw    | sum    |       0 | 4/4 (ref0 2/2, ref1 2/2) | 3/4 (ref0 2/2, ref1 1/2) |                    1 |" in out
    assert (
        "| own    |" not in out
        and "a draw per block | d        | raw    |       0 | 3/4 (ref0 2/2, ref1 1/2) | 0/4 (ref0 0/2, ref1 0/2) |" in out
    )
    with pytest.raises(SystemExit, match="no runs table"):
        compare_draws([str(tmp_path / "one"), str(tmp_path / "missing")])


def test_the_compile_benchmark_charges_a_variant_its_first_steps_excess_against_what_each_later_step_saves(monkeypatch):
    """Synthetic step times: eager 30 ms a step; a variant whose first step costs 10 s and whose later ones 20 ms
    has 10 - 0.02 s of excess over its first 10 steps beyond its own pace, and saves 10 ms a step: repaid after
    998 steps, so not within a 400-step run; a variant slower than eager never repays."""
    from bench import compile_step

    def steps(first: float, each: float) -> dict:
        return {"seconds": [first] + [each] * 19, "losses": [1.0] * 20, "run_steps": 400, "process": 1.0}

    variants = {
        "eager, 4 length groups": steps(0.03, 0.03),
        "eager, 1 length group": steps(0.03, 0.04),
        "compiled, cold cache": steps(10.0, 0.02),
        "compiled, warm cache": steps(0.03, 0.02),
    }
    monkeypatch.setattr(compile_step, "run_variant", lambda name, *_: variants[name])
    figures = {figure.name: figure for figure in compile_step.measure(steps=20).figures}
    cold = figures["compiled, cold cache: steps to repay its first 10 steps' excess"]
    assert cold.value == pytest.approx((10.0 - 0.02) / 0.01) and cold.note == "a 400-step run: not repaid"
    assert figures["compiled, warm cache: steps to repay its first 10 steps' excess"].note == "a 400-step run: repaid"
    assert figures["eager, 1 length group: steps to repay its first 10 steps' excess"].note == "a 400-step run: never"
    assert figures["compiled, cold cache: median step / eager's"].value == pytest.approx(2 / 3)
    assert "eager, 4 length groups: steps to repay its first 10 steps' excess" not in figures
    with pytest.raises(ValueError, match="--steps must be more than 10"):
        compile_step.measure(steps=10)


def test_the_curve_cells_fixed_grid_is_the_fixed_configs_curves_and_its_runs_scale_as_one_over_root_runs(monkeypatch):
    """config/curve.yaml's 8 curves at their own betas (raw's 7, controls left out); 5 betas x 2 modes x 2 seeds x 16
    blocks = 320 runs; a fixed grid whose half-width is twice the design's needs 4 x 320 runs; an open interval has no
    width to match."""
    import math

    import yaml

    from bench import curve_design_cells

    grid = curve_design_cells.fixed_grid(yaml.safe_load(open("config/curve.yaml")))
    assert len(grid) == 8 and grid[("continuous", "raw", 0.0)] == [0.0072, 0.014, 0.027, 0.051, 0.098, 0.19, 0.36]
    assert grid[("discrete", "tokcc", 1.0)] == [0.035, 0.062, 0.11, 0.2, 0.35]
    layout = curve_design_cells.grid_layout(grid[("discrete", "tokcc", 1.0)], 16, 2)
    assert len(layout.took_up) == 320 and layout.sums.sum() == 160 and set(layout.block) == set(range(16))
    monkeypatch.setattr(curve_design_cells, "fixed_width", lambda draw, log_k, draws: (0.4, 0.95))
    fit = dict(intercept=-5.4, slope=-2.45, mode_effect=0.0, sd_block=0.5, sd_mode=0.5)
    row = pd.Series(dict(fit, ci_low=math.exp(-0.2), ci_high=math.exp(0.2)))
    betas = grid[("discrete", "tokcc", 1.0)]
    assert curve_design_cells.fixed_runs(row, betas, 16, 2, 1, np.random.default_rng(0)) == "1280"
    for open_end in (dict(ci_high=math.inf), dict(ci_low=0.0)):
        assert curve_design_cells.fixed_runs(pd.Series({**row, **open_end}), betas, 16, 2, 1, np.random.default_rng(0)) == "-"


def test_fitting_with_a_likelihood_fits_with_it_and_gives_the_shipped_fit_back_after_an_error():
    from bench import laplace_error
    from experiments.synthetic_sequences.analysis.statistics import population_curves as population

    shipped = population.marginal_loglik, population.SD_LIMIT
    seen = []

    def recorded(*args):
        seen.append(population.SD_LIMIT)
        return shipped[0](*args)

    runs = laplace_error.pilot(np.random.default_rng(0), laplace_error.LOG_K, 2, 1, laplace_error.BETAS, slope=-3.0)
    curves = laplace_error.Curves.of(runs)
    with laplace_error.fitting_with(recorded, 3.0):
        fit = population.fit_population(curves)
    assert seen and set(seen) == {3.0} and max(fit.sd_block, fit.sd_mode) <= 3.0
    with pytest.raises(RuntimeError), laplace_error.fitting_with(recorded, 4.0):
        raise RuntimeError
    assert (population.marginal_loglik, population.SD_LIMIT) == shipped


def test_the_curve_design_simulation_run_in_pieces_reads_back_as_one(tmp_path):
    """Two pieces of a design each (seeds 0 and 1, a budget of 40: each stops at look 1) read back as 2 designs, with the
    stops of both; one piece read back prints what its own simulation printed; a piece of another scenario and a seed
    read twice are refused before anything is simulated."""
    command = [sys.executable, "-m", "bench.curve_design", "--draws", "1", "--fixed-draws", "0", "--budget", "40"]
    printed = {}
    for seed in (0, 1):
        run = subprocess.run(
            [*command, "--seed", str(seed), "--rows", str(tmp_path / f"{seed}.csv")], capture_output=True, text=True, check=True
        )
        printed[seed] = run.stdout.splitlines()[:-1]  # the last line is the wall
    back = subprocess.run([*command, "--from-rows", str(tmp_path / "0.csv")], capture_output=True, text=True, check=True)
    assert back.stdout.splitlines()[:-1] == printed[0]
    both = subprocess.run(
        [*command, "--from-rows", str(tmp_path / "0.csv"), str(tmp_path / "1.csv")], capture_output=True, text=True, check=True
    )
    stops = [line for lines in printed.values() for line in lines if line.startswith("  looks: ")]
    assert both.stdout.startswith("2 designs: ") and stops == ["  looks: {1: 1}"] * 2 and "  looks: {1: 2}" in both.stdout
    other = subprocess.run([*command[:-1], "160", "--from-rows", str(tmp_path / "0.csv")], capture_output=True, text=True)
    assert other.returncode == 1 and "--from-rows: budget is 40 in the pieces, 160 asked" in other.stderr
    twice = subprocess.run([*command, "--from-rows", str(tmp_path / "1.csv"), str(tmp_path / "1.csv")], capture_output=True, text=True)
    assert twice.returncode == 1 and "--from-rows: seed 1 is in" in twice.stderr and "the same designs read twice" in twice.stderr


def test_the_look_drift_finds_the_largest_relative_difference_and_every_field_that_changed_in_kind():
    from bench.look_float_drift import drift

    filed = [[{"decisions": {"curve": {"log_k": 0.5, "parallel_p": 0.63, "log_high": np.inf, "reading": "a shift"}}}]]
    made = [[{"decisions": {"curve": {"log_k": 0.5 * (1 + 3e-6), "parallel_p": np.nan, "log_high": 1.4, "reading": "no shift"}}}]]
    largest, at, differ = drift(filed, made)
    assert largest == pytest.approx(3e-6, rel=1e-3) and at == "[0][0].decisions.curve.log_k"
    assert sorted(differ) == [
        "[0][0].decisions.curve.log_high: inf -> 1.4",
        "[0][0].decisions.curve.parallel_p: 0.63 -> nan",
        "[0][0].decisions.curve.reading: 'a shift' -> 'no shift'",
    ]
    assert drift(filed, filed) == (0.0, "-", []) and drift(filed, [[{"decisions": {}}]])[2][0].endswith("only in the file")
