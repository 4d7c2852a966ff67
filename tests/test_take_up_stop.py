"""stop_at_take_up: a run ends at its confirmed take-up, with the very numbers the full run had up to there, and the
tables then read its take-up and onset but not what it would have shown at its budget."""

import json
import math
import shlex

import pandas as pd
import pytest
from test_lockstep import chunk_flags, train_rows
from test_plan import Wildcards, load

from experiments.synthetic_sequences.analysis.records.metrics_files import run_metrics
from experiments.synthetic_sequences.analysis.report.verdict import ENDPOINTS, ended_line
from experiments.synthetic_sequences.arms import CONFIRMING_EVALUATIONS
from experiments.synthetic_sequences.run_layout import ENDED_AT_TAKE_UP
from experiments.synthetic_sequences.training import chunk
from experiments.synthetic_sequences.training.settings import TrainConfig
from experiments.synthetic_sequences.training.train_disentangled import main

STEPS, EVAL_EVERY = 24, 4
RUN_FOLDER = "demo/ref0/raw_sum_0"  # a run path as the tables read it (run_layout.parse_run_path)


def validation_steps(run_dir) -> list[int]:
    return [row["step"] for row in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if row["split"] == "val"]


@pytest.fixture(scope="module")
def full_run(io_flags, tmp_path_factory):
    """Seed 1, STEPS steps in sum mode, validation every EVAL_EVERY, without the option."""
    folder = tmp_path_factory.mktemp("full") / RUN_FOLDER
    main(chunk_flags(io_flags, "sum", folder, [1], STEPS, "--eval-every", str(EVAL_EVERY)))
    return folder / "seed1"


def test_a_run_ends_at_its_second_validation_point_over_the_threshold_with_the_full_runs_numbers(io_flags, full_run, tmp_path, monkeypatch):
    monkeypatch.setattr(chunk, "TAKEUP_THRESHOLD", -math.inf)  # every point is over it: confirmed at the second
    flags = chunk_flags(io_flags, "sum", tmp_path / RUN_FOLDER, [1], STEPS, "--eval-every", str(EVAL_EVERY), "--stop-at-take-up", "true")
    main(flags)
    run_dir, confirmed = tmp_path / RUN_FOLDER / "seed1", CONFIRMING_EVALUATIONS * EVAL_EVERY
    metadata = json.loads((run_dir / "metadata.json").read_text())
    assert metadata[ENDED_AT_TAKE_UP] == confirmed and metadata["timing"]["train_steps"] == confirmed
    assert validation_steps(run_dir) == [EVAL_EVERY * (i + 1) for i in range(CONFIRMING_EVALUATIONS)]
    assert train_rows(run_dir) == train_rows(full_run)[:confirmed]  # deterministic: the full run's steps, to the bit
    assert json.loads((run_dir / "run_config.json").read_text())["run"]["stop_at_take_up"] is True
    metrics = run_metrics(run_dir).set_index("metric").value
    assert metrics[ENDED_AT_TAKE_UP] == confirmed and math.isnan(metrics["converged"])


def test_a_run_that_never_confirms_trains_to_its_budget_as_without_the_option(io_flags, full_run, tmp_path, monkeypatch):
    monkeypatch.setattr(chunk, "TAKEUP_THRESHOLD", math.inf)
    main(chunk_flags(io_flags, "sum", tmp_path, [1], STEPS, "--eval-every", str(EVAL_EVERY), "--stop-at-take-up", "true"))
    metadata = json.loads((tmp_path / "seed1" / "metadata.json").read_text())
    assert ENDED_AT_TAKE_UP not in metadata and metadata["timing"]["train_steps"] == STEPS
    assert (tmp_path / "seed1" / "metrics.jsonl").read_bytes() == (full_run / "metrics.jsonl").read_bytes()
    assert ENDED_AT_TAKE_UP not in set(run_metrics(full_run).metric)


def test_seeds_in_lockstep_end_when_the_last_of_them_confirms(io_flags, tmp_path, monkeypatch):
    """Seed 0 is over the threshold from the first point, seed 1 from the third: the chunk ends at seed 1's fourth."""
    real, points = chunk.validation_metrics, {}

    def metrics_by_seed(model, inputs, spec, seed, device):
        points[seed] = points.get(seed, 0) + 1
        over = seed == 0 or points[seed] >= 3
        return {**real(model, inputs, spec, seed, device), chunk.MUTUAL_INFORMATION: 1.0 if over else 0.0}

    monkeypatch.setattr(chunk, "validation_metrics", metrics_by_seed)
    main(chunk_flags(io_flags, "sum", tmp_path, [0, 1], STEPS, "--eval-every", str(EVAL_EVERY), "--stop-at-take-up", "true"))
    for seed in ("seed0", "seed1"):
        assert json.loads((tmp_path / seed / "metadata.json").read_text())[ENDED_AT_TAKE_UP] == 4 * EVAL_EVERY
        assert validation_steps(tmp_path / seed) == [4, 8, 12, 16]


def test_a_resumed_seed_counts_the_points_its_kept_log_holds(tmp_path):
    log = tmp_path / "metrics.jsonl.partial"
    rows = [("train", 0.0), ("val", 0.3), ("val", 0.05), ("val", 0.2), ("train", 0.0), ("val", 0.4)]
    log.write_text("".join(json.dumps({"split": split, chunk.MUTUAL_INFORMATION: value}) + "\n" for split, value in rows))
    assert chunk.take_up_streak(log) == 2
    log.write_text("")
    assert chunk.take_up_streak(log) == 0


def test_the_option_is_recorded_only_where_it_is_on():
    """Runs trained before the option existed keep their settings: off, it is in neither run_config.json nor the
    settings a resume compares."""
    flat = {name: "x" for name in ("train_records", "val_records", "test_records", "train_scores", "val_scores", "reference", "run_dir")}
    off = TrainConfig.from_flat(flat)
    assert "stop_at_take_up" not in off.to_dict()["run"] and "stop_at_take_up" not in off.training_settings()
    on = off.with_settings(stop_at_take_up=True)
    assert on.to_dict()["run"]["stop_at_take_up"] is True and on.training_settings()["stop_at_take_up"] is True


def test_magnitude_and_separation_are_not_read_where_runs_ended_early():
    runs = pd.DataFrame({ENDED_AT_TAKE_UP: [150.0, math.nan, math.nan]})
    read = {endpoint.name: ended_line(endpoint, runs) for endpoint in ENDPOINTS}
    assert read["take-up"] is None and read["onset"] is None
    for name in ("magnitude", "separation"):
        assert read[name]["reading"] == "not read" and "1 of 3 runs ended at their confirmed take-up" in read[name]["text"]
    assert all(ended_line(endpoint, runs.iloc[1:]) is None for endpoint in ENDPOINTS)
    assert all(ended_line(endpoint, pd.DataFrame({"took_up": [1.0]})) is None for endpoint in ENDPOINTS)


def test_a_config_turns_it_on_through_a_familys_settings(tmp_path):
    """The schema takes the setting, and the plan hands it to the trainer as one flag value it reads back."""
    chunk = Wildcards(family="discrete", reference="3", term="raw", mode="sum", alpha="0", at_beta="", chunk="0-3")
    flags = shlex.split(load(tmp_path, {"families": {"discrete": {"settings": {"stop_at_take_up": True}}}}).chunk_flags(chunk))
    assert flags[flags.index("--stop-at-take-up") + 1] == "true"
    (tmp_path / "off").mkdir()
    assert "--stop-at-take-up" not in load(tmp_path / "off").chunk_flags(chunk)
