"""Reference blocks that each draw their own data (data.per_block): where a draw lives, which seed it draws with, that
aggregation holds a run to its own block's records, and what the tables and verdict say of the draws."""

import pandas as pd
import pytest
from test_workflow import dry_run_jobs, snakemake, write_config

from experiments.synthetic_sequences.analysis.comparisons.confounds import confound_table, length_predicts_strategy
from experiments.synthetic_sequences.analysis.report.verdict_text import scope_line
from experiments.synthetic_sequences.analysis.tables import read_draws
from experiments.synthetic_sequences.planning.bindings import BindingError, check_inputs, grid_document
from experiments.synthetic_sequences.planning.data_draws import (
    SHARED_DRAW,
    block_data_seed,
    block_draw,
    data_artifact,
    format_data_summaries,
    parse_data_summaries,
)
from experiments.synthetic_sequences.planning.grid import expand_grid

RECORDS = ("train_records", "val_records", "test_records")
BLOCK_FILES = ("train_scores", "val_scores", "reference_mean")


def test_a_draw_lives_in_the_shared_data_folder_or_in_its_blocks_own():
    assert data_artifact("records", False, split="train") == "data/train.parquet"
    assert data_artifact("summary", False, 3) == "data/summary.json"
    assert data_artifact("records", True, 3, split="val") == "data/ref3/val.parquet"
    assert data_artifact("records", True, split="{split}") == "data/ref{reference}/{split}.parquet"  # a rule's path
    assert (SHARED_DRAW, block_draw(3)) == ("shared", "ref3")


def test_each_block_draws_with_its_own_seed_and_none_redraws_the_shared_draw():
    for data_seed in (0, 7):
        seeds = [block_data_seed(data_seed, block) for block in range(5)]
        assert seeds == [data_seed + 1 + block for block in range(5)]
        assert len(set(seeds)) == 5 and data_seed not in seeds


def test_the_tables_read_one_shared_summary_or_one_per_block():
    assert parse_data_summaries(["results/data/summary.json"]) == {"shared": "results/data/summary.json"}
    per_block = {"ref0": "r/data/ref0/summary.json", "ref12": "r/data/ref12/summary.json"}
    texts = format_data_summaries(per_block)
    assert texts == ["ref0=r/data/ref0/summary.json", "ref12=r/data/ref12/summary.json"]
    assert parse_data_summaries(texts) == per_block
    shared = {"shared": "a=b/summary.json"}  # a shared path is given bare, so an '=' in it is no block's name
    assert format_data_summaries(shared) == ["a=b/summary.json"]
    assert parse_data_summaries(format_data_summaries(shared)) == shared
    with pytest.raises(ValueError, match=r"--data-summary: ref0 is given twice \(a and b\)"):
        parse_data_summaries(["ref0=a", "ref0=b"])
    with pytest.raises(ValueError, match=r"mixes the one shared draw's summary with blocks' own"):
        parse_data_summaries(["ref0=a", "results/data/summary.json"])


def blocks_current():
    """Blocks 1 and 2, each with its own draw's records, scores and c_base, as aggregation's current inputs."""
    return {f"ref{block}/{name}": f"sha-{name}-{block}" for block in (1, 2) for name in (*RECORDS, *BLOCK_FILES)}


def recorded(block: int, records_of: int) -> dict:
    """What a run of block `block` recorded, trained on block `records_of`'s records."""
    inputs = {name: f"sha-{name}-{records_of}" for name in RECORDS}
    return inputs | {
        "train_scores": f"sha-train_scores-{block}",
        "val_scores": f"sha-val_scores-{block}",
        "reference": f"sha-reference_mean-{block}",
    }


FAMILIES = {"main": {"model": "shared_discrete", "seeds": [0], "beta": 0.1, "runs": [{"term": "raw", "modes": ["mean"]}]}}


def run_of(block: int, records_of: int) -> dict:
    run = f"main/ref{block}/raw_mean_0/seed0"
    entry = grid_document(expand_grid(FAMILIES, references=[1, 2]))["runs"][run]
    return {**entry, "run": run, "inputs_sha256": recorded(block, records_of)}


def test_a_run_is_held_to_its_own_blocks_draw_and_one_trained_on_another_blocks_data_is_refused():
    current = blocks_current()
    check_inputs([run_of(1, 1), run_of(2, 2)], current, "results")
    # trained on block 1's records, with block 2's own scores and c_base, under block 2's path
    with pytest.raises(BindingError, match=r"main/ref2/raw_mean_0/seed0 \(test_records, train_records, val_records\)") as refused:
        check_inputs([run_of(1, 1), run_of(2, 1)], current, "results")
    assert str(refused.value).endswith("Retrain them: snakemake --cores 2 --forcerun train_run")  # no chunk record on disk
    # a run of the shared draw read where each block has its own: its records match no block's
    shared = {**run_of(1, 1), "inputs_sha256": {**recorded(1, 1), **{name: f"sha-{name}" for name in RECORDS}}}
    with pytest.raises(BindingError, match=r"main/ref1/raw_mean_0/seed0 \(test_records, train_records, val_records\)"):
        check_inputs([shared], current, "results")


def test_two_blocks_draws_swapped_on_disk_are_named_as_the_files_that_changed():
    current = blocks_current()
    runs = [{**run_of(block, block), "run": f"main/ref{block}/raw_mean_0/seed{seed}"} for block in (1, 2) for seed in (0, 1)]
    check_inputs(runs, current, "results")
    swapped = {**current, "ref1/train_records": current["ref2/train_records"], "ref2/train_records": current["ref1/train_records"]}
    with pytest.raises(
        BindingError, match=r"^ref1/train_records hashes sha-train_re, but all 2 run\(s\).*\(that is ref2/train_records's now"
    ):
        check_inputs(runs, swapped, "results")


def summary(seed: int, accuracy: float, commonest: int, tokens: tuple[float, int, int]) -> dict:
    """A data summary of 100 records a split: `commonest` of them stepwise, the rest direct."""
    split = {
        "records": 100,
        "y_length": {"mean": tokens[0], "min": tokens[1], "max": tokens[2]},
        "length_only_strategy_accuracy": {"overall": accuracy, "sort": accuracy},
        "by_task_strategy": [
            {"task": "sort", "strategy": "stepwise", "count": commonest, "mean": 8.0, "min": 5, "max": tokens[2]},
            {"task": "sort", "strategy": "direct", "count": 100 - commonest, "mean": 3.0, "min": tokens[1], "max": 4},
        ],
    }
    return {"config": {"seed": seed}, "train": split, "val": split, "test": split}


DRAWS = {"ref0": summary(1, 0.71, 55, (6.41, 3, 15)), "ref1": summary(2, 0.764, 60, (6.7, 2, 17))}


def test_the_verdict_gives_each_blocks_draw_and_their_range():
    assert length_predicts_strategy(DRAWS) == (
        "Length alone predicts a training record's strategy with accuracy 0.71 to 0.76 over the 2 blocks' own data draws "
        "(ref0 0.71, ref1 0.76), against 0.55 to 0.60 for always guessing the commonest strategy. Supervised tokens "
        "per training record: mean 6.41 to 6.70 across the draws (min 2, max 17)."
    )
    runs = pd.DataFrame({"family": "main", "reference": [0, 0, 1], "term": "raw", "mode": "mean", "alpha": 0.0})
    assert scope_line(runs, DRAWS) == (
        "Over 2 reference blocks, each its own data draw and z-free reference (z-free seeds 0, 1; data seeds 1, 2), and "
        "up to 2 seeds each. Arms are compared within a reference and pooled across them."
    )
    assert "on this data draw (one `data.seed`)" in scope_line(runs, {"shared": DRAWS["ref0"]})
    one = scope_line(runs[runs.reference == 0], {"ref0": DRAWS["ref0"]})
    assert one.endswith(
        "With one reference, what it says holds for that data draw and z-free model, not for the procedure: "
        "set `references:` to replicate it."
    )


def test_the_confounds_table_has_each_draws_rows_and_cbase_on_its_blocks_draw():
    references = [{"zfree_seed": block, "mode": "mean", "c_base": 1.0 + block, "base_aggregate_min": 0.5} for block in (0, 1)]
    metrics = pd.DataFrame({"mode": ["mean"], "scope": ["length:y_length 3-4"], "metric": ["parse_rate"], "value": [0.9]})
    table = confound_table(DRAWS, references, metrics)
    accuracy = table[(table.diagnostic == "length_only_strategy_accuracy") & (table.split == "train") & (table.scope == "overall")]
    assert dict(zip(accuracy.draw, accuracy.value, strict=True)) == {"ref0": 0.71, "ref1": 0.764}
    tokens = table[(table.diagnostic == "supervised_tokens_max") & (table.split == "test")]
    assert dict(zip(tokens.draw, tokens.value, strict=True)) == {"ref0": 15, "ref1": 17}
    c_base = table[table.diagnostic == "c_base"]
    assert dict(zip(c_base.scope, c_base.draw, strict=True)) == {"ref0": "ref0", "ref1": "ref1"}
    assert table[table.diagnostic == "sample_parse_rate"].draw.tolist() == ["pooled"]


def test_the_tables_refuse_summaries_of_other_blocks_than_the_runs(tmp_path):
    runs = pd.DataFrame({"reference": [0, 1]})
    with pytest.raises(
        ValueError, match=r"the runs read the draws of blocks \['ref0', 'ref1'\], but the summaries given are \['ref0', 'ref2'\]"
    ):
        read_draws({"ref0": tmp_path / "a.json", "ref2": tmp_path / "b.json"}, runs)


def test_the_dry_run_draws_each_block_its_records_and_wires_each_job_to_its_blocks_draw(tmp_path):
    jobs = dry_run_jobs("--configfile", "config/per_block.yaml", "--config", f"results={tmp_path}")
    draws = sorted(job["shell"] for job in jobs if job["rule"] == "synthetic_sequences")
    assert len(draws) == 5
    for block, shell in enumerate(draws):
        assert f"--out-dir {tmp_path}/data/ref{block} " in shell and f" --seed {block + 1} " in shell and "per-block" not in shell
    for job in jobs:
        if job["rule"] in ("train_zfree", "train_run"):
            block = next(part for part in job["output"][0].split("/") if part.startswith("ref"))
            assert f"{tmp_path}/data/{block}/train.parquet" in job["input"]
            assert not any(path.startswith(f"{tmp_path}/data/") and f"/{block}/" not in path for path in job["input"])
    (aggregate,) = (job for job in jobs if job["rule"] == "aggregate_tables")
    assert f"--data-summary ref0={tmp_path}/data/ref0/summary.json ref1=" in aggregate["shell"]
    assert f"--input ref4/test_records={tmp_path}/data/ref4/test.parquet" in aggregate["shell"]
    # the verdict's suggested rerun repeats this pilot's command line, so that it extends the per-block pilot
    assert f"--pilot-configfile config/per_block.yaml --pilot-config results={tmp_path}" in aggregate["shell"]
    shared = dry_run_jobs("--config", f"results={tmp_path}", "seeds=3")
    assert [job["output"][0] for job in shared if job["rule"] == "synthetic_sequences"] == [f"{tmp_path}/data/train.parquet"]
    (aggregate,) = (job for job in shared if job["rule"] == "aggregate_tables")
    # the whole --config, seeds included: a refusal's advice repeats it (the seeds line sets its own)
    log = f"{tmp_path}/logs/aggregate_tables.log"
    assert aggregate["shell"].endswith(f"--pilot-config results={tmp_path} --pilot-config seeds=3 > {log} 2>&1")


def test_a_draw_per_block_with_one_entangled_checkpoint_is_refused_before_any_job(tmp_path):
    config = write_config(
        tmp_path,
        {("data", "per_block"): True, ("references",): 1, ("reference", "source"): "entangled", ("reference", "checkpoint"): "x.pt"},
    )
    run = snakemake("-n", "--configfile", str(config), "--config", f"results={tmp_path}/r")
    assert run.returncode != 0
    assert "data.per_block: true draws each block its own records, but source: entangled has one checkpoint" in run.stdout + run.stderr
