"""Every shipped config end to end at tiny settings (-m slow): data, z-free steps, training steps and seeds cut, the
families, terms, betas and controls as shipped. config/config.yaml runs at its own settings in test_workflow.py
(`pipeline`, 2 of its 5 blocks), config/smoke.yaml on the live Slurm cluster (test_slurm_cluster.py) and
config/sequential.yaml's looks at tiny settings in test_design_workflow.py.

Each test trains as few processes as still shows what it claims: a chunk's process pays about 4 s of imports (torch,
its dynamo through AdamW, scikit-learn) before its first step, more than a tiny run's training. Each test is a class
of its own: pytest-xdist's loadscope sends a class, as a module, whole to one worker, so they (about 2 minutes
each) are spread over both workers rather than run one after another on one.
"""

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_workflow import ROOT, snakemake

from core.disentanglement.artifacts import sha256_file
from experiments.synthetic_sequences.planning.pilot_command import PilotCommand

pytestmark = pytest.mark.slow

TINY_SETTINGS = {"steps": 20, "eval_every": 10, "eval_prompts_per_code": 4}


def tiny_overlay(configfile: str, folder: Path, **cut) -> Path:
    """A config file that cuts a shipped config's data, z-free steps, seeds and every family's steps (and `cut`'s
    top-level keys)."""
    families = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["families"]
    families |= yaml.safe_load((ROOT / configfile).read_text()).get("families", {})  # snakemake merges over config.yaml
    overlay = {
        "data": {"n_train": 200, "n_val": 60, "n_test": 60},
        "zfree": {"steps": 40},
        "seeds": 2,
        "seeds_per_job": 2,
        "families": {family: {"settings": TINY_SETTINGS} for family, spec in families.items() if spec is not None},
        **cut,
    }
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(overlay))
    return path


def run_tiny(configfile: str, tmp_path: Path, **cut) -> tuple[Path, pd.DataFrame]:
    """A shipped config end to end at tiny settings; its results folder and runs table."""
    results = tmp_path / "results"
    overlay = tiny_overlay(configfile, tmp_path, **cut)
    run = snakemake("--cores", "2", "--configfile", configfile, str(overlay), "--config", f"results={results}", timeout=1500)
    assert run.returncode == 0, run.stderr[-4000:]
    return results, pd.read_parquet(results / "tables" / "runs.parquet")


class TestPilot:
    def test_the_specs_pilot_runs_end_to_end_at_tiny_settings(self, tmp_path):
        """config/pilot.yaml (both families, every term, both controls), its steps, data and seeds cut to 1 block x 1 seed and
        its design replaced by the fixed one, as for config/note.yaml below: one run per arm still reaches every table and
        verdict section (a single seed's tables: test_tables.py)."""
        pilot = yaml.safe_load((ROOT / "config" / "pilot.yaml").read_text())
        del pilot["design"]
        (tmp_path / "pilot.yaml").write_text(yaml.safe_dump(pilot))
        results, runs = run_tiny(str(tmp_path / "pilot.yaml"), tmp_path, references=1, seeds=1, seeds_per_job=1)
        assert len(runs) == 2 * (8 + 2) and set(runs.model) == {"shared_discrete", "continuous"}
        verdict = (results / "tables" / "verdict.md").read_text()
        for family in ("discrete", "continuous"):
            for section in ("dist alpha=0", "tokcc alpha=1", "hybrid alpha=1", "raw alpha=0"):
                assert f"## {family} {section}" in verdict


NOTE_BETAS = {  # config/note.yaml's operating points (docs/findings.md, the calibration)
    ("discrete", "dist"): 0.11,
    ("discrete", "tokcc"): 0.11,
    ("discrete", "hybrid"): 0.11,
    ("discrete", "raw"): 0.035,
    ("continuous", "dist"): 0.02,
    ("continuous", "tokcc"): 0.11,
    ("continuous", "hybrid"): 0.11,
    ("continuous", "raw"): 0.02,
}


class TestNote:
    def test_the_notes_pilot_runs_end_to_end_at_tiny_settings(self, tmp_path):
        """config/note.yaml (both families, every term at its own beta, raw's controls at raw's), its design replaced by the
        fixed one on 1 block x 2 seeds, one chunk per arm: a look that can decide needs 10 runs per arm on 5 blocks, 200
        runs even at tiny settings. The design's looks are run end to end by test_design_workflow.py; the tables over
        several blocks by test_workflow.py's default pilot on 2."""
        note = yaml.safe_load((ROOT / "config" / "note.yaml").read_text())
        del note["design"]
        (tmp_path / "note.yaml").write_text(yaml.safe_dump(note))
        results, runs = run_tiny(str(tmp_path / "note.yaml"), tmp_path, references=1)
        assert len(runs) == 2 * 20 and set(runs.model) == {"shared_discrete", "continuous"}
        main = runs[runs.controls == "none"].assign(family=lambda frame: frame.family.str.split("-").str[0])
        assert {key: beta for key, beta in main.groupby(["family", "term"]).beta.unique().map(tuple).items()} == {
            key: (beta,) for key, beta in NOTE_BETAS.items()
        }
        scale, balance = (runs[runs.controls == kind].set_index("family").beta for kind in ("scale", "balance"))
        assert {family: beta for family, beta in scale.items()} == {
            f"{family}-scale": NOTE_BETAS[family, "raw"] for family in ("discrete", "continuous")
        }
        # balance trains at raw's beta x the data's mean token count: one factor, the same in both families
        factors = {round(beta / NOTE_BETAS[family.split("-")[0], "raw"], 6) for family, beta in balance.items()}
        assert len(factors) == 1 and factors.pop() > 1
        cross_term = pd.read_parquet(results / "tables" / "cross_term.parquet")
        assert {(row.family, row.term): row.beta for row in cross_term.itertuples()} == NOTE_BETAS
        verdict = (results / "tables" / "verdict.md").read_text()
        assert verdict.index("## At a glance") < verdict.index("## discrete dist alpha=0")
        assert (results / "plots" / "forest.png").stat().st_size > 0


class TestCalibration:
    def test_the_calibration_runs_end_to_end_at_tiny_settings(self, tmp_path):
        """config/calibration.yaml: the mean arm of every term, in both families, at each beta; its take-up table has a
        row per (family, term) and its verdict says there is no sum arm to compare."""
        # one of its two blocks and one seed per arm: one chunk per (family, term) still holds the grid's every beta
        results, runs = run_tiny("config/calibration.yaml", tmp_path, references=[11], seeds=1, seeds_per_job=1)
        assert set(runs["mode"]) == {"mean"} and set(runs.model) == {"shared_discrete", "continuous"}
        assert set(runs.reference) == {11} and len(runs) == 6 * 4  # families x terms, one seed
        assert set(runs.groupby("family").beta.unique().map(tuple)) == {(0.02,), (0.06,), (0.2,)}
        takeup = pd.read_parquet(results / "tables" / "takeup.parquet")
        assert len(takeup.groupby(["family", "term"])) == 6 * 4
        assert "No family has both a mean and a sum run" in (results / "tables" / "verdict.md").read_text()
        assert (results / "plots" / "forest.png").stat().st_size > 0


class TestCurve:
    def test_the_curve_config_runs_end_to_end_at_tiny_settings(self, tmp_path):
        """config/curve.yaml's discrete raw curve, mean and sum, at 3 of its 7 betas (its ends and the controls' beta)
        with its scale and balance controls on the axis, on 1 of its blocks x 2 seeds: every beta an arm and a job of
        its own, the curve table, its verdict section and beta_curves.png. Every chunk of the full grid is read back by
        test_slurm_recovery.py's dry run; at 8 jobs this is what a tiny run affords."""
        curve = yaml.safe_load((ROOT / "config" / "curve.yaml").read_text())
        families = curve["families"]
        raw = next(run for run in families["discrete"]["runs"] if run["term"] == "raw")
        control_beta = families["discrete-scale"]["runs"][0]["betas"][0]
        betas = [raw["betas"][0], control_beta, raw["betas"][-1]]
        families["discrete"]["runs"] = [{**raw, "betas": betas}]
        for name in [name for name in families if name.startswith("continuous")]:
            del families[name]
        (tmp_path / "curve.yaml").write_text(yaml.safe_dump(curve))
        results, runs = run_tiny(str(tmp_path / "curve.yaml"), tmp_path, references=[21])
        main = runs[runs.controls == "none"]
        assert sorted(main.key_beta.unique(), key=float) == [f"{beta:g}" for beta in betas]
        assert len(main) == 3 * 2 * 2 and set(runs[runs.controls != "none"].key_beta) == {f"{control_beta:g}"}
        table = pd.read_parquet(results / "tables" / "beta_curves.parquet")
        assert table[["family", "term", "betas"]].to_dict("records") == [{"family": "discrete", "term": "raw", "betas": 3}]
        row = table.iloc[0]
        varies = main.groupby("mode").took_up.nunique().max() > 1  # a slope to read: take-up differs across betas
        assert (row.k > 0) if varies else (row.reading == "cannot be resolved")
        verdict = (results / "tables" / "verdict.md").read_text()
        assert verdict.index("## Take-up over beta") < verdict.index(f"## discrete b={control_beta:g} raw alpha=0")
        assert (results / "plots" / "beta_curves.png").stat().st_size > 0
        takeup = pd.read_parquet(results / "tables" / "takeup.parquet")
        assert {f"discrete b={beta:g}" for beta in betas} <= set(takeup.family)


def tiny_curve_design_files(folder: Path, results: Path) -> PilotCommand:
    """config/curve_design.yaml's discrete dist curve on 1 block a stage x 1 seed, its budget cut to stage 1's 10 runs
    (5 coarse betas x 2 modes) and one stage of 4, at tiny settings, writing to `results`: the pilot's command line
    (its two config files in `folder`)."""
    config = yaml.safe_load((ROOT / "config" / "curve_design.yaml").read_text())
    discrete = config["families"]["discrete"]
    discrete["runs"] = [run for run in discrete["runs"] if run["term"] == "dist"]
    del config["families"]["continuous"]
    config["design"] |= {"first_blocks": 1, "stage_blocks": 1, "budget": 14}
    (folder / "curve_design.yaml").write_text(yaml.safe_dump(config))
    cut = {"references": [101, 102], "seeds": 1, "seeds_per_job": 1, "results": str(results)}
    return PilotCommand((str(folder / "curve_design.yaml"), str(tiny_overlay(str(folder / "curve_design.yaml"), folder, **cut))))


CURVE_DESIGN_RUNS = 14  # tiny_curve_design_files' runs: 10 in stage 1, 4 in stage 2


@pytest.fixture(scope="class")
def tiny_curve_design(tmp_path_factory) -> tuple[Path, Path, pd.DataFrame]:
    """The tiny curve design (tiny_curve_design_files) run to its end: its folder, results folder and runs table."""
    folder = tmp_path_factory.mktemp("curve_design")
    results = folder / "results"
    pilot = tiny_curve_design_files(folder, results)
    run = snakemake(*shlex.split(pilot.command())[1:], timeout=1500)
    assert run.returncode == 0, run.stderr[-4000:]
    return folder, results, pd.read_parquet(results / "tables" / "runs.parquet")


def copied_design(tiny_curve_design, tmp_path) -> tuple[Path, PilotCommand]:
    """A copy of the finished tiny curve design (mtimes kept) and its pilot's command line writing to the copy."""
    _, base, _ = tiny_curve_design
    results = tmp_path / "results"
    shutil.copytree(base, results)
    return results, tiny_curve_design_files(tmp_path, results)


def look_seal(results: Path, look: int) -> str:
    return json.loads((results / "design" / f"look{look}.json").read_text())["sha256"]


def design_verdict(results: Path) -> str:
    return (results / "tables" / "verdict.md").read_text()


class TestCurveDesign:
    """The tiny curve design end to end, and what a user does to a finished one, each on a copy: the pipeline ends
    well (exit 0, the tables count every run) with the advice it prints followed once, literally, and the verdict byte
    for byte the unbroken folder's where nothing was meant to change (test_advice.py does the same for the fixed design)."""

    def test_the_curve_design_runs_two_stages_whose_second_trains_where_the_first_fit_placed_it(self, tiny_curve_design):
        """Look 1 fits stage 1, stops nothing it cannot (the budget holds another stage) and places stage 2 on block 102;
        look 2 reads all 14 runs and stops the curve at its budget. The betas stage 2 trained are those
        curve_design.informative_betas gives from look 1's recorded fit, on the second block only, and the verdict gives
        the design's account."""
        from experiments.synthetic_sequences.sequential.curve_design import coarse_betas, informative_betas

        _, results, runs = tiny_curve_design
        look1, look2 = (json.loads((results / "design" / f"look{k}.json").read_text()) for k in (1, 2))
        (group,) = look1["groups"]
        decision = group["decisions"]["curve"]
        assert decision["decision"] == "continue" and decision["runs"] == 10 and group["train_next"] == ["mean", "sum"]
        span = look1["spans"]["discrete/dist/0"]
        for is_sum, mode in enumerate(("mean", "sum")):
            placed = informative_betas(*decision["fit"][:3], is_sum, span, "c-optimal")
            assert group["next_betas"][mode] == placed
            first = runs[(runs.reference == 101) & (runs["mode"] == mode)]
            second = runs[(runs.reference == 102) & (runs["mode"] == mode)]
            assert sorted(first.beta) == coarse_betas(span) and sorted(second.beta) == placed
        assert look2["groups"][0]["decisions"]["curve"] | {} == {**look2["groups"][0]["decisions"]["curve"], "runs": 14}
        assert look2["groups"][0]["decisions"]["curve"]["decision"] in ("budget", "beyond scale", "precise", "no shift", "a shift")
        assert len(runs) == 14 and set(look2["runs_read"]) == set(look1["runs_read"]) | set(look2["runs_read"])
        verdict = (results / "tables" / "verdict.md").read_text()
        assert "### The curve design" in verdict and "2 looks, a budget of 14 runs per curve, 1 block in stage 1 and 1 new" in verdict

    def test_the_cells_bench_reads_each_curves_stop_and_runs_from_the_design(self, tiny_curve_design):
        """bench/curve_design_cells.py on the tiny design: the curve's row gives the look it stopped at, its reason and
        its 14 runs, as look 2 recorded them; its open interval leaves no width for the fixed grid to match."""
        import subprocess
        import sys

        _, results, _ = tiny_curve_design
        decision = json.loads((results / "design" / "look2.json").read_text())["groups"][0]["decisions"]["curve"]
        command = [sys.executable, "-m", "bench.curve_design_cells", str(results), "--draws", "1"]
        cells = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        assert cells.returncode == 0, cells.stderr
        (row,) = [line.split(" | ") for line in cells.stdout.splitlines() if line.startswith("| discrete | dist |")]
        assert row[5:] == [f"look 2: {decision['decision']}", "14", "- |"]

    def test_the_sd_bound_bench_refits_each_stopped_curve_from_the_runs_its_look_read(self, tiny_curve_design):
        """bench/sd_bound.py on the tiny design's look 2: the curve it stopped, from its 14 runs, once per likelihood
        and bound, and the SDs it fits never above the bound searched."""
        import re
        import subprocess
        import sys

        _, results, _ = tiny_curve_design
        decision = json.loads((results / "design" / "look2.json").read_text())["groups"][0]["decisions"]["curve"]
        command = [sys.executable, "-m", "bench.sd_bound", str(results), "--look", "2", "--limits", "0.5", "10", "--laplace"]
        bound = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        assert bound.returncode == 0, bound.stderr
        assert f"discrete dist: {decision['decision']} at look 2, 14 runs" in bound.stdout
        fits = re.findall(r"(\w+), SDs up to ([\d.]+): .*SDs ([\d.]+) / ([\d.]+);", bound.stdout)
        assert [fit[:2] for fit in fits] == [("quadrature", "0.5"), ("quadrature", "10"), ("laplace", "0.5"), ("laplace", "10")]
        assert all(float(sd) <= float(limit) for _, limit, *sds in fits for sd in sds)

    def test_the_kernel_rerun_trains_the_curves_last_stage_as_the_design_did(self, tiny_curve_design):
        """bench/kernel_rerun.py on the tiny design: its config trains stage 2 (the stage look 2 read: block 102, each
        mode at look 1's placed betas), each trainer command the design's but for its folder; trained under the same
        kernels, its runs' metrics logs are the design's byte for byte, and --compare finds no take-up changed and reads
        the same fit."""
        import subprocess
        import sys

        from experiments.synthetic_sequences.run_layout import METRICS_LOG

        folder, results, _ = tiny_curve_design
        out = folder / "rerun"
        bench = [sys.executable, "-m", "bench.kernel_rerun", "--configfile", str(folder / "curve_design.yaml"), str(folder / "tiny.yaml")]
        bench += ["--curve", "discrete/dist/0", "--out", str(out)]
        written = subprocess.run(bench, cwd=ROOT, capture_output=True, text=True)
        assert written.returncode == 0 and "4 training jobs, each the design's but for its folder" in written.stdout, written.stderr
        stage = yaml.safe_load((out / "config.yaml").read_text())
        look1 = json.loads((results / "design" / "look1.json").read_text())
        assert stage["references"] == [102] and "design" not in stage
        assert {run["modes"][0]: run["betas"] for run in stage["families"]["discrete"]["runs"]} == look1["groups"][0]["next_betas"]
        trained = snakemake("--cores", "2", "--configfile", str(out / "config.yaml"), timeout=600)
        assert trained.returncode == 0, trained.stderr[-4000:]
        logs = sorted((out / "results" / "runs").glob(f"**/{METRICS_LOG}"))
        assert len(logs) == 4
        for log in logs:
            assert log.read_bytes() == (results / log.relative_to(out / "results")).read_bytes(), log
        compared = subprocess.run([*bench, "--compare"], cwd=ROOT, capture_output=True, text=True)
        assert compared.returncode == 0 and "4 runs again; 0 take-ups differ" in compared.stdout, compared.stderr
        fits = [line.split("|")[2:] for line in compared.stdout.splitlines() if line.startswith(("| as the design", "| rerun"))]
        assert len(fits) == 2 and fits[0] == fits[1]

    def test_a_look_recomputed_during_a_run_is_the_look_every_later_check_reads(self, tiny_curve_design, tmp_path):
        """docs/pipeline.md's `--forcerun design_look`: both looks made again in one run, the second after the first,
        whose new seal every input function then reads (curve_stages.CurveStages.checked_look)."""
        from test_advice import run

        results, pilot = copied_design(tiny_curve_design, tmp_path)
        before, seals = design_verdict(results), [look_seal(results, look) for look in (1, 2)]
        forced = run(shlex.split(pilot.command(flags=["--forcerun", "design_look"])))
        assert forced.returncode == 0, forced.stderr[-3000:]
        remade = [look_seal(results, look) for look in (1, 2)]
        assert all(new != old for new, old in zip(remade, seals, strict=True)) and design_verdict(results) == before
        assert len(pd.read_parquet(results / "tables" / "runs.parquet")) == CURVE_DESIGN_RUNS

    def test_a_no_op_change_of_the_command_line_reruns_no_look(self, tiny_curve_design, tmp_path):
        """The look jobs take the pilot's command from the environment (pilot_command.PILOT_VARIABLE), not their
        params: `--config seeds=1` (the design's own) and back rerun the tables alone, whose suggestions repeat it."""
        from test_advice import run

        results, pilot = copied_design(tiny_curve_design, tmp_path)
        before = design_verdict(results)
        for command in (pilot.command("seeds=1"), pilot.command()):
            again = run(shlex.split(command))
            assert again.returncode == 0, again.stderr[-3000:]
            assert "(Rule: design_look)" not in again.stdout + again.stderr and "(Rule: train_run)" not in again.stdout + again.stderr
        assert design_verdict(results) == before

    def test_a_deleted_stage_one_run_is_retrained_by_its_advice_and_the_looks_made_again(self, tiny_curve_design, tmp_path):
        from test_advice import follow, refusal, run

        results, pilot = copied_design(tiny_curve_design, tmp_path)
        before = design_verdict(results)
        shutil.rmtree(next((results / "runs" / "discrete" / "ref101").glob("dist_mean_*/seed0")))
        advice = refusal(run(shlex.split(pilot.command())))
        assert "1 run(s) are gone or unfinished" in advice
        followed = follow(advice, pilot)
        assert followed.returncode == 0, followed.stderr[-3000:]
        assert design_verdict(results) == before and len(pd.read_parquet(results / "tables" / "runs.parquet")) == CURVE_DESIGN_RUNS

    def test_a_metrics_file_linked_to_another_runs_is_named_and_extracted_again(self, tiny_curve_design, tmp_path):
        """The link stands for its run's file: read as it is, the look would drop that run and count another twice."""
        from test_advice import follow, refusal, run

        results, pilot = copied_design(tiny_curve_design, tmp_path)
        before = design_verdict(results)
        own, other = sorted((results / "metrics" / "discrete" / "ref101").glob("dist_mean_*/seed0.parquet"))[:2]
        own.unlink()
        own.symlink_to(other)
        advice = refusal(run(shlex.split(pilot.command())))
        assert advice.startswith(f"{own} is a link (to {other})") and advice.endswith(f"rm {own}; then {pilot.command()}")
        followed = follow(advice, pilot)
        assert followed.returncode == 0, followed.stderr[-3000:]
        assert not own.is_symlink() and design_verdict(results) == before

    def test_a_design_changed_after_its_looks_is_refused_and_its_reset_is_named_in_the_verdict(self, tiny_curve_design, tmp_path):
        """The design is recorded at its first look (sequential/record.py); another spending is refused even after the
        looks are deleted, and the reset the refusal offers keeps the earlier design in the record and the verdict."""
        from test_advice import run

        results, pilot = copied_design(tiny_curve_design, tmp_path)
        config = yaml.safe_load(Path(pilot.configfiles[0]).read_text())
        config["design"]["alpha_spending"] = "pocock"
        Path(pilot.configfiles[0]).write_text(yaml.safe_dump(config))
        refused = run(shlex.split(pilot.command()))
        assert refused.returncode != 0
        line = next(line for line in (refused.stdout + refused.stderr).splitlines() if "design.json: this results folder" in line)
        assert "obrien-fleming spending" in line and "pocock spending" in line
        reset = line.partition("To start over under the new design anyway (the verdict names the earlier one): ")[2].partition("; or,")[0]
        assert reset == f"rm -r {results / 'design'}; then {pilot.command('design_reset=True')}"
        subprocess.run(reset.partition("; then ")[0], shell=True, check=True)
        followed = run(shlex.split(reset.partition("; then ")[2]))
        assert followed.returncode == 0, followed.stderr[-3000:]
        designs = json.loads((results / "design.json").read_text())["designs"]
        assert [entry["design"]["alpha_spending"] for entry in designs] == ["obrien-fleming", "pocock"]
        look1 = json.loads((results / "design" / "look1.json").read_text())
        assert [entry["design"] for entry in look1["earlier_designs"]] == [designs[0]["design"]]
        assert "**An earlier design was read first**: a curve design of at most 14 runs per curve" in design_verdict(results)

    def test_the_verdict_ends_with_the_designs_own_next_step_and_lists_every_run(self, tiny_curve_design):
        """No seeds line (a curve design refuses more seeds): its curve stopped at the budget, which the last line
        says can only grow in a design of its own; runs.csv holds every run with its stage."""
        _, results, _ = tiny_curve_design
        verdict = design_verdict(results)
        last = verdict.rstrip().splitlines()[-1]
        assert "seeds=" not in last and last.startswith("discrete dist stopped at the design's budget of 14 runs per curve")
        assert f"Every run the design read, {CURVE_DESIGN_RUNS} in all" in verdict
        runs = pd.read_csv(results / "tables" / "runs.csv")
        assert len(runs) == CURVE_DESIGN_RUNS and sorted(runs.groupby("stage").size().items()) == [(1, 10), (2, 4)]
        assert set(runs[runs.stage == 2].reference) == {102}


class TestPerBlock:
    def test_blocks_with_their_own_data_train_tabulate_and_bind_at_tiny_settings(self, tmp_path):
        """config/per_block.yaml on 2 of its blocks x 2 seeds: each block draws its own records with its own seed, and
        every run was trained on its own block's records (the sha256 its metadata recorded is that block's file, which
        aggregation checked too); the confounds table gives each draw its rows and the verdict says over which draws it
        holds. A run moved across draws is refused: test_data_draws.py."""
        results, runs = run_tiny("config/per_block.yaml", tmp_path, references=2)
        assert len(runs) == 2 * 2 * 4 and set(runs.reference) == {0, 1}
        summaries = {block: json.loads((results / "data" / f"ref{block}" / "summary.json").read_text()) for block in (0, 1)}
        assert [summaries[block]["config"]["seed"] for block in (0, 1)] == [1, 2]
        train = {block: sha256_file(results / "data" / f"ref{block}" / "train.parquet") for block in (0, 1)}
        assert train[0] != train[1] and not (results / "data" / "train.parquet").exists()
        for metadata in (results / "runs").glob("*/ref*/*/seed*/metadata.json"):
            block = int(metadata.parts[-4].removeprefix("ref"))
            assert json.loads(metadata.read_text())["inputs_sha256"]["train_records"] == train[block], metadata
        confounds = pd.read_parquet(results / "tables" / "confounds.parquet")
        accuracy = confounds[(confounds.diagnostic == "length_only_strategy_accuracy") & (confounds.scope == "overall")]
        assert set(accuracy.draw) == {"ref0", "ref1"}
        verdict = (results / "tables" / "verdict.md").read_text()
        assert "Over 2 reference blocks, each its own data draw and z-free reference (z-free seeds 0, 1; data seeds 1, 2)" in verdict
        assert "over the 2 blocks' own data draws (ref0 " in verdict
