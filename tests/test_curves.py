"""Learning-curve extraction and the convergence flag."""

import json
import math
import re
from pathlib import Path

import pytest

from core.disentanglement.artifacts import sha256_file
from experiments.synthetic_sequences.analysis.records.curves import (
    MI_FLOOR,
    TAKEUP_THRESHOLD,
    convergence,
    last_quarter_change,
    takeup,
)
from experiments.synthetic_sequences.analysis.records.metrics_files import run_metrics, runs_table, write_metrics
from experiments.synthetic_sequences.analysis.records.run_files import validation_rows
from experiments.synthetic_sequences.analysis.tables import aggregate, curves_table
from experiments.synthetic_sequences.generate import SequenceConfig, generate
from experiments.synthetic_sequences.planning.data_draws import SHARED_DRAW
from experiments.synthetic_sequences.training.train_step import train_diagnostics


def curve(recon, mi, every=100):
    return [
        {"step": every * (i + 1), "recon_nll_per_token": r, "mutual_information": m} for i, (r, m) in enumerate(zip(recon, mi, strict=True))
    ]


def test_last_quarter_change_starts_at_the_last_evaluation_before_three_quarters():
    steps = [100, 200, 300, 400, 500, 600, 700, 800]
    values = [8, 7, 6, 5, 4, 3, 2.2, 2.0]
    # 3/4 of 800 is step 600 (value 3.0): |2.0 - 3.0| / 2.0
    assert last_quarter_change(steps, values) == pytest.approx(0.5)
    assert last_quarter_change([150, 300], [1.0, 0.9]) == pytest.approx(0.1 / 0.9)  # 0.75 * 300 = 225 -> step 150
    assert math.isnan(last_quarter_change([300], [1.0]))  # one point spans no quarter


def test_a_flat_curve_is_converged_and_a_falling_one_is_not():
    flat = convergence(curve([1.0, 0.6, 0.50, 0.500, 0.499, 0.499, 0.498, 0.498], [0, 0.5, 0.69, 0.69, 0.69, 0.69, 0.69, 0.69]))
    assert flat["converged"] == 1.0 and flat["recon_rel_change"] < 0.01
    falling = convergence(curve([1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.45, 0.4], [0.69] * 8))
    assert falling["converged"] == 0.0 and falling["recon_rel_change"] == pytest.approx((0.5 - 0.4) / 0.4)


def test_train_diagnostics_take_the_mean_count_and_the_extremes_over_every_batch():
    rows = [
        {"tokens_mean": 6.0, "tokens_min": 3.0, "tokens_max": 9.0, "base_aggregate_min": 0.2, "kappa_min": 0.5, "kappa_max": 2.0},
        {"tokens_mean": 8.0, "tokens_min": 4.0, "tokens_max": 12.0, "base_aggregate_min": 0.1, "kappa_min": 0.7, "kappa_max": 1.5},
    ]
    want = {"tokens_mean": 7.0, "tokens_min": 3.0, "tokens_max": 12.0, "base_aggregate_min": 0.1, "kappa_min": 0.5, "kappa_max": 2.0}
    assert train_diagnostics(rows) == want


def test_a_late_jump_in_mutual_information_is_a_take_up_that_has_not_converged():
    late = convergence(curve([0.5] * 8, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3, 0.6]))
    assert (late["took_up"], late["onset_step"], late["onset_observed"]) == (1.0, 700.0, 1.0)
    # the onset (step 700) comes after 3/4 of the steps: I(x;z) is measured from the onset, 0.3 -> 0.6
    assert late["converged"] == 0.0 and late["mi_change"] == pytest.approx(0.5)


def test_a_latent_that_never_takes_up_is_censored_at_its_budget_not_converged_in_its_information():
    unused = convergence(curve([0.5] * 8, [1e-4, 3e-4, 2e-4, 1e-4, 4e-4, 2e-4, 5e-4, 1e-4]))
    assert (unused["took_up"], unused["onset_step"], unused["onset_observed"], unused["budget_step"]) == (0.0, 800.0, 0.0, 800.0)
    assert math.isnan(unused["mi_change"])  # whether it would stay at 0 is what censoring leaves open
    assert unused["converged"] == 1.0  # its reconstruction has settled


def test_take_up_is_the_final_value_and_onset_the_first_crossing_of_the_threshold():
    rose_and_fell = convergence(curve([0.5] * 4, [0.0, TAKEUP_THRESHOLD, 0.3, 0.02]))
    assert (rose_and_fell["took_up"], rose_and_fell["onset_step"], rose_and_fell["onset_observed"]) == (0.0, 200.0, 1.0)
    below = convergence(curve([0.5] * 4, [0.0, 0.05, 0.09, 0.099]))
    assert (below["took_up"], below["onset_observed"]) == (0.0, 0.0)
    assert MI_FLOOR < TAKEUP_THRESHOLD


def write_run(root, curve_rows, mode="sum", seed=3, nmi=0.4):
    run = root / "fam" / "ref0" / f"raw_{mode}_0" / f"seed{seed}"
    run.mkdir(parents=True)
    overall = {"n": 10, "strategy_information": nmi / 2, "nmi": nmi, "ami": 0.3, "ari": 0.2, "probe_accuracy": 0.7}
    evaluation = {
        "latent_usage": {"kl": 0.9, "mutual_information": 0.6, "codes_used": 3, "code_shares": [0.3, 0.3, 0.4]},
        "strategy_separation": {
            "overall": overall,
            "shuffled_label_baseline": {"nmi": 0.01, "ami": 0.0},
            "within_task": {"sort": overall},
            "within_length_bucket": {"y_length 3-5": overall},
        },
        "samples": {
            "prompts": 8,
            "parse_rate": 0.5,
            "answer_accuracy": 0.25,
            "strategy_consistency": None,
            "by_length_bucket": {"y_length 3-5": {"samples": 24, "parse_rate": 0.5, "answer_accuracy": 0.25}},
        },
    }
    (run / "eval.json").write_text(json.dumps(evaluation))
    train = [
        {"split": "train", "step": s, "tokens_mean": 6.0, "tokens_min": 3.0 + s % 2, "tokens_max": 12.0, "base_aggregate_min": 0.1}
        for s in (1, 2)
    ]
    (run / "run_config.json").write_text(
        json.dumps(
            {
                "reconstruction": {"reconstruction_loss_token_aggregation_mode": mode, "term": "raw", "token_weight_alpha": 0.0},
                "model": {"model": "shared_discrete"},
                "optim": {"seed": seed},
                "run": {"init_decoder": "", "zfree_seed": 0},
            }
        )
    )
    val = [{"split": "val", **row, "kl": 0.5, "reconstruction_to_kl": 20.0, "tokens_min": 3.0} for row in curve_rows]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(row) for row in train + val) + "\n")
    (run / "model.pt").write_bytes(b"weights")
    resolved = {"controls": "none", "beta": 0.05, "reconstruction_scale": 1.0}
    outputs = {name: sha256_file(run / name) for name in ("run_config.json", "metrics.jsonl", "model.pt", "eval.json")}
    metadata = {
        "resolved": resolved,
        "train_diagnostics": train_diagnostics(train),
        "finished": "2026-12-01T08:00:00+00:00",
        "outputs_sha256": outputs,
    }
    (run / "metadata.json").write_text(json.dumps(metadata))
    return run


def test_extraction_writes_one_curve_row_per_step_and_metric_and_the_convergence_columns(tmp_path):
    rows = curve([0.9, 0.7, 0.6, 0.5], [0.1, 0.5, 0.6, 0.6])
    metrics = run_metrics(write_run(tmp_path, rows))
    curves = curves_table(metrics)
    assert sorted(curves.step.unique()) == [100, 200, 300, 400]
    mi = curves[curves.metric == "mutual_information"].sort_values("step")
    assert mi.value.tolist() == [0.1, 0.5, 0.6, 0.6] and set(mi["mode"]) == {"sum"} and set(mi.seed) == {3}
    assert set(curves.metric) == {"recon_nll_per_token", "mutual_information", "kl", "reconstruction_to_kl"}  # not tokens_min
    run = runs_table(metrics).iloc[0]
    assert run["recon_rel_change"] == pytest.approx((0.6 - 0.5) / 0.5)  # from step 300, 3/4 of 400, to step 400
    assert run["mi_change"] == 0.0 and run["converged"] == 0.0
    assert (run["train_tokens_min"], run["train_tokens_max"], run["train_base_aggregate_min"]) == (3.0, 12.0, 0.1)
    assert run["val_tokens_min"] == 3.0 and run["nmi"] == 0.4
    assert run["strategy_information"] == 0.2 and run["strategy_information_sort"] == 0.2
    assert (run["took_up"], run["onset_step"], run["onset_observed"]) == (1.0, 100.0, 1.0)


def test_aggregation_writes_every_table_without_an_empty_row_or_column(tmp_path):
    metrics = []
    for mode in ("mean", "sum"):
        for seed in (0, 1):
            frame = run_metrics(
                write_run(tmp_path / "runs", curve([0.9, 0.7, 0.6, 0.6], [0.1, 0.5, 0.6, 0.6]), mode, seed, 0.2 + seed / 10)
            )
            path = tmp_path / "metrics" / f"{mode}{seed}.parquet"
            path.parent.mkdir(exist_ok=True)
            write_metrics(frame, path)
            metrics.append(path)
    generate(SequenceConfig(n_train=200, n_val=60, n_test=60, min_size=1, max_size=3, tasks=("sort", "count")), tmp_path)  # summary.json
    references = []
    for mode, c_base in (("mean", 0.3), ("sum", 1.8)):
        references.append(tmp_path / f"{mode}.json")
        references[-1].write_text(json.dumps({"mode": mode, "c_base": c_base, "base_aggregate_min": 0.01}))
    tables = aggregate(metrics, {SHARED_DRAW: tmp_path / "summary.json"}, references, tmp_path / "tables", {})
    # nan where nothing is left to resolve, where every run took up (no mi_change is nan) or the onsets are too few
    # two runs: no interval; both took up at their first evaluation, so no I(x;z) floor before it; one reference block,
    # so no homogeneity across blocks to test, and every run took up, so no block varies and CMH has nothing to say
    may_be_empty = {
        "seeds_needed",
        "median_onset_low",
        "median_onset_high",
        "mi_change",
        "floor_mutual_information",
        "p_homogeneity",
        "p_cmh",
    }
    for name in ("runs", "aggregate", "takeup", "mean_vs_sum", "confounds", "length_separation", "verdict", "cross_term", "curves"):
        frame = tables[name]
        empty_columns = set(frame.columns[frame.isna().all(axis=0)]) - may_be_empty
        assert not frame.empty and not frame.isna().all(axis=1).any() and not empty_columns, name
        assert (tmp_path / "tables" / f"{name}.parquet").is_file() and (tmp_path / "tables" / f"{name}.csv").is_file()
    assert set(tables["mean_vs_sum"].comparison) == {"sum-mean"}
    assert list(tables["verdict"].endpoint) == ["take-up", "onset", "magnitude", "separation"]
    assert (tmp_path / "tables" / "verdict.md").read_text().startswith("# Verdict")
    samples = tables["confounds"][tables["confounds"].diagnostic == "sample_parse_rate"]
    assert sorted(samples["mode"]) == ["mean", "sum"] and set(samples.scope) == {"y_length 3-5"}


def test_validation_rows_are_parsed_as_records_in_any_key_order(tmp_path):
    rows = [{"split": "train", "step": 1}, {"split": "val", "step": 1, "mutual_information": 0.0, "recon_nll_per_token": 0.4}]
    rows.append({"recon_nll_per_token": 0.3, "mutual_information": 0.5, "step": 2, "split": "val"})  # sorted keys
    text = "\n".join(json.dumps(row) for row in rows)  # no newline after the last row
    assert validation_rows(text.encode(), tmp_path) == [rows[1], rows[2]]
    assert validation_rows((text + "\n").encode(), tmp_path) == [rows[1], rows[2]]
    assert validation_rows(json.dumps(rows[0]).encode(), tmp_path) == []


def test_a_row_is_a_validation_row_by_its_parsed_split_not_by_the_text_val():
    validation = {"split": "val", "step": 1, "mutual_information": 0.0, "recon_nll_per_token": 0.4}
    rows = [{"split": "train", "step": 1, "note": "val"}, validation]
    rows.append({"step": 2, "split": "test", "val": "val"})
    text = "\n".join(json.dumps(row) for row in rows).encode()
    assert validation_rows(text, Path("m.jsonl")) == [rows[1]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"split": "train"}\n\n{"split": "val"}\n', "line 2 is not valid JSON"),
        (b'{"split": "train"}\n[1, 2]\n', "line 2 is [1, 2], not a JSON record"),
        (b'{"split": "train"}\n{"split": "val"}, {"split": "val"}\n', "line 2 is not valid JSON"),
        (b'{"split": "train", "step": \n', "line 1 is not valid JSON"),
    ],
)
def test_a_metrics_log_line_that_is_not_one_json_record_is_refused_by_its_number(text, message):
    with pytest.raises(ValueError, match=re.escape(f"m.jsonl: {message}")):
        validation_rows(text, Path("m.jsonl"))


def information_curve(values, se=0.0):
    return [{"step": 50 * (i + 1), "mutual_information": v, "mutual_information_se": se} for i, v in enumerate(values)]


def test_the_collapse_floor_and_a_take_up_from_float_precision_are_measured():
    from_rounding = takeup(information_curve([1e-4, 3e-6, 1.2e-7, 0.4, 0.6]))
    assert from_rounding["floor_mutual_information"] == 1.2e-7 and from_rounding["rounding_takeup"] == 1.0
    from_use = takeup(information_curve([1e-3, 2e-4, 0.4]))
    assert from_use["floor_mutual_information"] == 2e-4 and from_use["rounding_takeup"] == 0.0
    never = takeup(information_curve([1e-3, 1e-7, 5e-8]))
    assert never["floor_mutual_information"] == 5e-8 and never["rounding_takeup"] == 0.0  # over the whole run, no take-up
    at_once = takeup(information_curve([0.3, 0.5]))
    assert math.isnan(at_once["floor_mutual_information"]) and at_once["rounding_takeup"] == 0.0
    estimated = takeup(information_curve([-2e-3, 5e-7, 0.4], se=1e-3))  # a Monte Carlo estimate has no such floor
    assert estimated["rounding_takeup"] == 0.0


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([], "the run has no validation rows: no take-up event can be read"),
        (curve([2.0, 1.9, 1.8], [0.0, math.nan, 0.5]), "mutual_information is not finite at validation step 200"),
        (curve([2.0, 1.9], [0.0, math.inf]), "mutual_information is not finite at validation step 200"),
    ],
    ids=["no rows", "a nan on the curve", "an inf at the end"],
)
def test_a_run_without_a_readable_curve_is_refused_not_counted_as_no_take_up(rows, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        takeup(rows)
