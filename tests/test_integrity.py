"""Check, don't trust: each input a run can be handed wrongly, and each state a run directory can be left in.

One test per way an input can be wrong, each with the failing input; the refusals are one line naming the file and the field.
"""

import errno
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from pandas.testing import assert_frame_equal

from core.disentanglement.artifacts import sha256_file
from core.disentanglement.scores import read_scores, write_scores
from core.disentanglement.zfree import train_zfree
from experiments.synthetic_sequences.analysis.records.metrics_files import (
    RUN_COLUMNS,
    check_endpoints_finite,
    check_extracted,
    first_difference,
    hybrid_mixes,
    read_metrics,
    run_metrics,
    write_metrics,
)
from experiments.synthetic_sequences.analysis.records.metrics_files import main as extract_main
from experiments.synthetic_sequences.analysis.tables import main as tables_main
from experiments.synthetic_sequences.run_layout import RESUME, RUN_OUTPUTS, metrics_path
from experiments.synthetic_sequences.training.run_state import MetricsLog, load_resume, save_resume
from experiments.synthetic_sequences.training.train_disentangled import main
from tests.conftest import TINY, hold_run_lock

ROOT = Path(__file__).resolve().parents[1]
TINY_RUN = ["--d-model", "32", "--n-layer", "1", "--n-head", "2", "--num-codes", "3", "--batch-size", "32"]
TINY_RUN += ["--eval-prompts-per-code", "2", "--eval-every", "2", "--log-every", "1", "--threads", "1"]


def with_flag(flags: list[str], flag: str, value: str) -> list[str]:
    flags = list(flags)
    flags[flags.index(flag) + 1] = value
    return flags


def rewrite_scores(source: Path, target: Path, *, split=None, nll=None, drop_last_token_of_first=False, bare=False, **provenance):
    """A copy of a scores file with its split, its NLLs, one row's length or its provenance changed (bare: none)."""
    scores = read_scores(source)
    frame = scores.frame.copy()
    if nll is not None:
        frame["token_nll"] = [nll(a) for a in frame["token_nll"]]
    if drop_last_token_of_first:
        frame.at[0, "token_nll"] = frame.at[0, "token_nll"][:-1]
        frame.at[0, "n"] = frame.at[0, "n"] - 1
    write_scores(frame, target, split=split or scores.split, metadata={} if bare else {**scores.metadata, **provenance})
    return target


def edited_reference(source: Path, target: Path, **changes) -> Path:
    target.write_text(json.dumps({**json.loads(source.read_text()), **changes}))
    return target


@pytest.fixture(scope="module")
def finished_run(io_flags, tmp_path_factory):
    run = tmp_path_factory.mktemp("finished") / "fam" / "ref0" / "raw_mean_0" / "seed0"
    main([*io_flags("mean", run), *TINY_RUN, "--steps", "4", "--reconstruction-term", "raw"])
    return run


# ---------------------------------------------------------------- inputs, refused before the run directory is written


def bad_inputs(case: str, io_flags, scored, references, tmp_path) -> tuple[list[str], str]:
    """(trainer flags with one input made wrong, the refusal expected) for each way an input can be wrong."""
    train, val, mean_reference = scored / "train.parquet", scored / "val.parquet", references / "mean.json"
    c_base = json.loads(mean_reference.read_text())["c_base"]
    scores, reference = tmp_path / "train.parquet", tmp_path / "reference.json"
    cases = {  # case: (mode, flag, the wrong input, the refusal)
        "mean artifact relabelled sum": (
            *("sum", "--reference", lambda: edited_reference(mean_reference, reference, mode="sum")),
            r"reference.json: c_base: .* disagrees with .* recomputed from .*val.parquet in mode 'sum'",
        ),
        "c_base x 100": (
            *("mean", "--reference", lambda: edited_reference(mean_reference, reference, c_base=100 * c_base)),
            r"reference.json: c_base: .* disagrees",
        ),
        "negated train scores": (
            *("mean", "--train-scores", lambda: rewrite_scores(train, scores, nll=lambda a: -a)),
            r"train.parquet: token_nll holds a negative or non-finite NLL for ids",
        ),
        "non-finite train scores": (
            *("mean", "--train-scores", lambda: rewrite_scores(train, scores, nll=lambda a: a * float("nan"))),
            r"train.parquet: token_nll holds a negative or non-finite NLL",
        ),
        "n is not the record's token count": (
            *("mean", "--train-scores", lambda: rewrite_scores(train, scores, drop_last_token_of_first=True)),
            r"train.parquet: n disagrees with y_length of .*train.parquet for ids",
        ),
        "val scores given as train scores": (
            *("mean", "--train-scores", lambda: val),
            r"val.parquet: split is 'val', but it was given as the 'train' split",
        ),
        "train scores of another checkpoint": (
            *("mean", "--train-scores", lambda: rewrite_scores(train, scores, checkpoint_sha256="0" * 64)),
            r"train.parquet: checkpoint_sha256 000000000000\.\.\. differs from .*val.parquet's",
        ),
        "train scores of other records": (
            *("mean", "--train-scores", lambda: rewrite_scores(train, scores, records_sha256="f" * 64)),
            r"train.parquet: records_sha256 ffffffffffff\.\.\. is not that of .*train.parquet",
        ),
        "train scores without provenance": (
            *("mean", "--train-scores", lambda: rewrite_scores(train, scores, bare=True)),
            r"train.parquet: provenance lacks records_sha256; was it written by 'zfree score'\?",
        ),
        "test records given as val records": (
            *("mean", "--val-records", lambda: io_flags("mean", tmp_path)[5]),
            r"test.parquet: split is 'test', but it was given as the 'val' split",
        ),
        "scores of another reference block": (
            *("mean", "--zfree-seed", lambda: 1),
            r"val.parquet: scored by the z-free model of seed 0, but this run belongs to reference block 1",
        ),
        "a warm start from another block's model": (
            *("mean", "--init-decoder", lambda: other_checkpoint(tmp_path)),
            r"init_decoder: .*other.pt is not the z-free checkpoint that scored .*val.parquet",
        ),
    }
    mode, flag, wrong_input, message = cases[case]
    flags = io_flags(mode, tmp_path / "run") + [flag, "-"]  # a flag io_flags does not give is appended, then set
    return with_flag(flags[:-2] if flag in flags[:-2] else flags, flag, str(wrong_input())), message


def other_checkpoint(tmp_path: Path) -> Path:
    """A file that is not the checkpoint that scored the fixtures' records (another block's z-free model, by sha256)."""
    path = tmp_path / "other.pt"
    path.write_bytes(b"another z-free model")
    return path


@pytest.mark.parametrize(
    "case",
    [
        "mean artifact relabelled sum",
        "c_base x 100",
        "negated train scores",
        "non-finite train scores",
        "n is not the record's token count",
        "val scores given as train scores",
        "train scores of another checkpoint",
        "train scores of other records",
        "train scores without provenance",
        "test records given as val records",
        "scores of another reference block",
        "a warm start from another block's model",
    ],
)
def test_a_bad_input_is_refused_in_one_line_before_anything_is_written(io_flags, scored, references, tmp_path, case):
    flags, message = bad_inputs(case, io_flags, scored, references, tmp_path)
    with pytest.raises(SystemExit, match=message) as refused:
        main([*flags, *TINY_RUN, "--steps", "2"])
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--steps", "10.7"], "argument --steps: invalid int value: '10.7'"),
        (["--device", "tpu"], "device: 'tpu' is not allowed; allowed values: cpu, auto, cuda, cuda:N, mps"),
        (["--grad-clip", "0"], "grad_clip: 0.0 is not allowed; it must be > 0"),
        (["--weight-decay", "-1"], "weight_decay: -1.0 is not allowed; it must be >= 0"),
        (["--warmup-steps", "-5"], "warmup_steps: -5 is not allowed; it must be >= 0"),
        (["--reconstruction-term", "hybrid", "--hybrid-coefficients", "dist=-1"], "hybrid_coefficients.dist: -1.0 is not allowed"),
        (["--reconstruction-term", "hybrid", "--hybrid-coefficients", "dist=0,raw=0"], "every coefficient is 0"),
    ],
)
def test_the_trainer_refuses_bad_settings_naming_the_field(io_flags, tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit):
        main([*io_flags("mean", tmp_path / "run"), *flags])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_hybrid_of_normalised_and_unnormalised_terms_says_so(io_flags, tmp_path, capsys):
    hybrid = ["--reconstruction-term", "hybrid", "--hybrid-coefficients", "raw=0.5,dist=0.5"]
    main([*io_flags("sum", tmp_path / "run"), *TINY_RUN, "--steps", "2", *hybrid])
    assert "note: the hybrid mixes raw (in sum units) with dist (divided by a reference scale)" in capsys.readouterr().err


# ---------------------------------------------------------------- resume state


@pytest.fixture
def saved_state(tmp_path):
    model = torch.nn.Linear(2, 2)
    path = tmp_path / RESUME
    (tmp_path / "metrics.partial.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    save_resume(path, 3, model, torch.optim.AdamW(model.parameters()), {}, {"0": 2}, {"beta": 0.1}, {"reference": "abc"})
    return path


def partial_logs(saved_state):
    return {"0": saved_state.parent / "metrics.partial.jsonl"}


def test_a_resume_state_of_the_same_settings_and_inputs_is_resumed(saved_state):
    state = load_resume(saved_state, {"beta": 0.1}, {"reference": "abc"}, partial_logs(saved_state))
    assert state["step"] == 3 and saved_state.is_file()


@pytest.mark.parametrize(
    ("settings", "inputs", "reason"),
    [
        ({"beta": 0.5}, {"reference": "abc"}, "its settings differ in beta"),
        ({"beta": 0.1}, {"reference": "def"}, r"its inputs changed since \(reference\)"),
        ({"beta": 0.1}, {"reference": "abc", "train_scores": "0"}, r"its inputs changed since \(train_scores\)"),
    ],
)
def test_a_resume_state_of_other_settings_or_inputs_is_set_aside(saved_state, capsys, settings, inputs, reason):
    assert load_resume(saved_state, settings, inputs, partial_logs(saved_state)) is None
    warning = capsys.readouterr().err
    assert f"warning: {saved_state} set aside as resume.pt.stale-" in warning and "the chunk starts from step 0" in warning
    assert re.search(reason, warning)
    assert not saved_state.exists() and len(list(saved_state.parent.glob("resume.pt.stale-*"))) == 1


def test_a_resume_state_whose_metrics_log_lost_rows_is_set_aside(saved_state, capsys):
    (saved_state.parent / "metrics.partial.jsonl").write_text('{"step": 1}\n{"step": 2')  # a counted row, cut short
    assert load_resume(saved_state, {"beta": 0.1}, {"reference": "abc"}, partial_logs(saved_state)) is None
    assert "seed 0's metrics.partial.jsonl holds 1 rows, fewer than the 2 it had logged" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_an_unreadable_resume_state_is_set_aside_with_the_reason(saved_state, capsys, damage):
    content = {"truncated": saved_state.read_bytes()[:200], "garbage": b"not a checkpoint at all", "empty": b""}[damage]
    saved_state.write_bytes(content)
    assert load_resume(saved_state, {"beta": 0.1}, {"reference": "abc"}, partial_logs(saved_state)) is None
    warning = capsys.readouterr().err.strip()
    assert warning.startswith(f"warning: {saved_state} set aside as resume.pt.stale-") and "it cannot be read (" in warning
    assert "\n" not in warning and not saved_state.exists()


def test_the_metrics_log_appends_and_a_resumed_log_keeps_only_the_rows_its_state_had_logged(tmp_path):
    path, final = tmp_path / "metrics.partial.jsonl", tmp_path / "metrics.jsonl"
    log = MetricsLog(path)
    for step in (1, 2, 3):
        log.append({"split": "train", "step": step, "loss": 0.1 * step})
        assert path.read_text().count("\n") == step  # on disk as it comes, not at the end
    path.write_text(path.read_text() + '{"split": "tr')  # killed mid-row after a state that logged 2 rows
    resumed = MetricsLog(path, keep=2)
    resumed.append({"split": "train", "step": 3, "loss": 0.30000000000000004})
    assert resumed.rows == 3
    assert resumed.finish(final) == [{"split": "train", "step": s, "loss": 0.1 * s} for s in (1, 2, 3)]
    assert not path.exists()
    assert final.read_text() == "".join(json.dumps({"split": "train", "step": s, "loss": 0.1 * s}) + "\n" for s in (1, 2, 3))


def interrupt_at_step(flags: list[str], step: int) -> None:
    """Run the trainer CLI and send it SIGUSR1 (Slurm's warning before a time limit) once it logs `step`."""
    command = [sys.executable, "-m", "experiments.synthetic_sequences.training.train_disentangled", *flags]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if f" step {step}/" in line:  # "raw_mean_0 seeds 0 step 5/60 ..."
            os.kill(process.pid, signal.SIGUSR1)
            break
    process.stderr.read()
    assert process.wait(timeout=300) == 128 + signal.SIGUSR1


def test_a_run_whose_inputs_changed_after_an_interruption_starts_fresh(io_flags, references, finished_run, tmp_path, capsys):
    """The issue's case: interrupted, inputs rebuilt, rerun. A finished run's outputs in the same directory are gone
    as soon as the new run starts, so no directory ever mixes two runs."""
    run = tmp_path / "fam" / "ref0" / "raw_mean_0" / "seed0"
    shutil.copytree(finished_run, run)
    flags = [*io_flags("mean", run), *TINY_RUN, "--steps", "60", "--checkpoint-every", "2", "--reconstruction-term", "raw"]
    interrupt_at_step(flags, 5)
    assert (run / RESUME).is_file()
    assert not (run / "eval.json").exists() and not (run / "model.pt").exists()  # the earlier run's outputs were removed
    with pytest.raises(ValueError, match="holds resume.pt: the run is unfinished or was interrupted"):
        run_metrics(run)

    rebuilt = tmp_path / "mean.json"  # the same c_base, rewritten: another file, another sha256
    rebuilt.write_text(json.dumps(json.loads((references / "mean.json").read_text()), indent=4))
    main(with_flag(flags, "--reference", str(rebuilt)))
    err = capsys.readouterr().err
    assert r"set aside as resume.pt.stale-" in err and "its inputs changed since (reference)" in err
    assert "resuming" not in err
    metadata = json.loads((run / "metadata.json").read_text())
    assert metadata["resumed_from_step"] is None and metadata["inputs_sha256"]["reference"] == sha256_file(rebuilt)
    assert len(run_metrics(run)) > 0


# ---------------------------------------------------------------- run directories and artifacts


def test_extraction_refuses_a_directory_mixing_two_runs(finished_run, tmp_path):
    mixed = tmp_path / "fam" / "ref0" / "raw_mean_0" / "seed0"
    shutil.copytree(finished_run, mixed)
    config = json.loads((mixed / "run_config.json").read_text())
    (mixed / "run_config.json").write_text(json.dumps({**config, "beta": 0.5}))  # another run's run_config.json
    with pytest.raises(SystemExit, match=r"run_config.json: sha256 differs from metadata.json's outputs_sha256"):
        extract_main(["--run-dir", str(mixed), "--out", str(tmp_path / "m.parquet")])
    assert not (tmp_path / "m.parquet").exists()


def test_a_metrics_file_of_an_older_extraction_is_refused_with_the_command_that_re_extracts(finished_run, tmp_path):
    """A metrics file extracted before a run column existed (here `execution`) cannot be pooled with newer ones."""
    frame = run_metrics(finished_run)
    write_metrics(frame, tmp_path / "new.parquet")
    assert set(RUN_COLUMNS) <= set(read_metrics([tmp_path / "new.parquet"])[0].columns)
    older = frame.drop(columns="execution")
    older.attrs = frame.attrs
    write_metrics(older, tmp_path / "old.parquet")
    with pytest.raises(ValueError, match=r"old.parquet lacks the column\(s\) execution: it was extracted by an older version; re-extract"):
        read_metrics([tmp_path / "new.parquet", tmp_path / "old.parquet"])


def test_extraction_refuses_a_run_config_of_the_older_flat_layout(finished_run, tmp_path):
    old = tmp_path / "fam" / "ref0" / "raw_mean_0" / "seed0"
    shutil.copytree(finished_run, old)
    flat = {"model": "shared_discrete", "reconstruction_loss_token_aggregation_mode": "mean", "init_decoder": ""}
    (old / "run_config.json").write_text(json.dumps(flat))
    metadata = json.loads((old / "metadata.json").read_text())
    metadata["outputs_sha256"]["run_config.json"] = sha256_file(old / "run_config.json")  # consistent, so only the layout is wrong
    (old / "metadata.json").write_text(json.dumps(metadata))
    with pytest.raises(SystemExit, match=r"lacks the settings group\(s\) reconstruction, model, run: it was written by an older trainer"):
        extract_main(["--run-dir", str(old), "--out", str(tmp_path / "m.parquet")])
    assert not (tmp_path / "m.parquet").exists()


def copied_run(finished_run, tmp_path) -> Path:
    run = tmp_path / "fam" / "ref0" / "raw_mean_0" / "seed0"
    shutil.copytree(finished_run, run)
    return run


def rewrite(run: Path, name: str, text: str) -> None:
    """Replace one output and record its new hash, so that only its content is wrong."""
    (run / name).write_text(text)
    metadata = json.loads((run / "metadata.json").read_text())
    metadata["outputs_sha256"][name] = sha256_file(run / name)
    (run / "metadata.json").write_text(json.dumps(metadata))


def extract(run: Path, out: Path) -> None:
    extract_main(["--run-dir", str(run), "--out", str(out)])


@pytest.mark.parametrize("finished", ["missing", False, None, ""])
def test_extraction_refuses_a_directory_not_marked_finished(finished_run, tmp_path, finished):
    unfinished = copied_run(finished_run, tmp_path)
    metadata = json.loads((unfinished / "metadata.json").read_text())
    if finished == "missing":
        del metadata["finished"]
    else:
        metadata["finished"] = finished
    (unfinished / "metadata.json").write_text(json.dumps(metadata))
    with pytest.raises(SystemExit, match="metadata.json: finished is .*, not the time the run finished: the run did not finish"):
        extract(unfinished, tmp_path / "m.parquet")


def test_extraction_refuses_a_truncated_model(finished_run, tmp_path):
    run = copied_run(finished_run, tmp_path)
    (run / "model.pt").write_bytes(b"0123456789")
    with pytest.raises(SystemExit, match=r"model.pt: sha256 differs from metadata.json's outputs_sha256"):
        extract(run, tmp_path / "m.parquet")
    assert not (tmp_path / "m.parquet").exists()


@pytest.mark.parametrize(
    "section, key, value, message",
    [
        ("latent_usage", "mutual_information", float("nan"), "latent_usage: mutual_information = nan is not a finite value in"),
        ("latent_usage", "kl", -0.5, "latent_usage: kl = -0.5 is not a finite value in \\[0, inf\\]"),
        ("strategy_separation", "overall", {"nmi": 1.7}, "strategy_separation.overall: nmi = 1.7 is not a finite value in \\[0, 1\\]"),
    ],
)
def test_extraction_refuses_a_metric_that_is_not_finite_or_out_of_range(finished_run, tmp_path, section, key, value, message):
    run = copied_run(finished_run, tmp_path)
    evaluation = json.loads((run / "eval.json").read_text())
    evaluation[section][key] = value if not isinstance(value, dict) else {**evaluation[section][key], **value}
    rewrite(run, "eval.json", json.dumps(evaluation))
    with pytest.raises(SystemExit, match=r"eval.json: " + message):
        extract(run, tmp_path / "m.parquet")


def test_extraction_names_a_missing_section_in_one_line(finished_run, tmp_path):
    run = copied_run(finished_run, tmp_path)
    evaluation = json.loads((run / "eval.json").read_text())
    del evaluation["strategy_separation"]
    rewrite(run, "eval.json", json.dumps(evaluation))
    with pytest.raises(SystemExit, match=r"eval.json lacks the section\(s\) strategy_separation, strategy_separation.overall"):
        extract(run, tmp_path / "m.parquet")


def test_extraction_refuses_a_non_finite_validation_value_and_reads_rows_in_any_key_order(finished_run, tmp_path):
    run = copied_run(finished_run, tmp_path)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    rewrite(run, "metrics.jsonl", "\n".join(json.dumps(row, sort_keys=True) for row in rows) + "\n")
    extract(run, tmp_path / "sorted.parquet")  # sorted keys: still every validation row
    keys = ["scope", "metric", "step"]  # the curve rows follow each row's key order: compare them as a set
    got, want = (
        frame.sort_values(keys).reset_index(drop=True)
        for frame in (pd.read_parquet(tmp_path / "sorted.parquet"), run_metrics(finished_run))
    )
    assert_frame_equal(got, want)
    last = max(i for i, row in enumerate(rows) if row["split"] == "val")
    rows[last]["mutual_information"] = float("inf")
    rewrite(run, "metrics.jsonl", "\n".join(json.dumps(row) for row in rows) + "\n")
    with pytest.raises(SystemExit, match=rf"metrics.jsonl: validation row of step {rows[last]['step']}: mutual_information = inf"):
        extract(run, tmp_path / "m.parquet")


def test_extraction_to_a_folder_or_a_full_disk_fails_in_one_line_naming_the_file(finished_run, tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    with pytest.raises(SystemExit, match=rf"^error: {tmp_path / 'out'}: Is a directory$"):
        extract(finished_run, tmp_path / "out")

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full_disk)
    with pytest.raises(SystemExit, match=rf"^error: {tmp_path / 'm.parquet'}: No space left on device$"):
        extract(finished_run, tmp_path / "m.parquet")
    assert list(tmp_path.glob("*m.parquet*")) == []  # nothing half-written


def test_the_trainer_refuses_a_thread_count_below_one(io_flags, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([*io_flags("mean", tmp_path / "run"), "--threads", "-1"])
    assert not (tmp_path / "run").exists()
    assert "--threads: -1 is not allowed; it must be >= 1" in capsys.readouterr().err


def test_a_finished_run_records_the_hash_of_every_output(finished_run):
    outputs_sha256 = json.loads((finished_run / "metadata.json").read_text())["outputs_sha256"]
    assert outputs_sha256 == {name: sha256_file(finished_run / name) for name in RUN_OUTPUTS if name != "metadata.json"}
    assert not (finished_run / RESUME).exists()


def test_the_same_training_gives_byte_identical_checkpoints(io_flags, data_dir, tmp_path):
    """model.pt records its run_dir, so both trainings use the same one."""
    run, first = tmp_path / "run", tmp_path / "first"
    for _ in range(2):
        if run.exists():
            run.rename(first)
        main([*io_flags("mean", run), *TINY_RUN, "--steps", "3", "--reconstruction-term", "raw"])
    assert (run / "model.pt").read_bytes() == (first / "model.pt").read_bytes()
    for name in ("a", "b"):
        train_zfree(data_dir / "train.parquet", data_dir / "val.parquet", tmp_path / name / "model.pt", TINY)
    assert sha256_file(tmp_path / "a" / "model.pt") == sha256_file(tmp_path / "b" / "model.pt")


def test_aggregation_names_the_file_whose_json_is_broken(finished_run, references, tmp_path):
    extract_main(["--run-dir", str(finished_run), "--out", str(tmp_path / "m.parquet")])
    (tmp_path / "summary.json").write_text('{"train": ')
    (tmp_path / "grid.json").write_text('{"runs": ')
    aggregate = ["aggregate", "--metrics", str(tmp_path / "m.parquet"), "--data-summary", str(tmp_path / "summary.json")]
    aggregate += ["--references", str(references / "mean.json"), "--out-dir", str(tmp_path / "tables")]
    with pytest.raises(SystemExit, match=r"grid.json is not valid JSON"):
        tables_main([*aggregate, "--grid", str(tmp_path / "grid.json")])


@pytest.mark.parametrize(
    "copy_to", ["fam/ref0/raw_mean_0/seed7", "fam/ref0/tok_mean_2/seed0", "fam/ref0/raw_sum_0/seed0", "fam/ref1/raw_mean_0/seed0"]
)
def test_a_run_copied_to_another_seed_term_alpha_mode_or_reference_is_refused_at_extraction(finished_run, tmp_path, copy_to):
    copy = tmp_path / copy_to
    shutil.copytree(finished_run, copy)
    wrong = r"(seed 0 \(path: 7\)|term 'raw' \(path: 'tok'\), alpha 0.0 \(path: 2.0\)|mode 'mean' \(path: 'sum'\)|reference 0 \(path: 1\))"
    with pytest.raises(SystemExit, match=r"run_config.json disagrees with its path in " + wrong):
        extract(copy, tmp_path / "m.parquet")
    assert not (tmp_path / "m.parquet").exists()


def test_a_metrics_file_carries_its_run_s_record(finished_run, tmp_path):
    extract(finished_run, tmp_path / "m.parquet")
    record = json.loads(pq.read_schema(tmp_path / "m.parquet").metadata[b"run_record"])
    metadata = json.loads((finished_run / "metadata.json").read_text())
    assert record["inputs_sha256"] == metadata["inputs_sha256"] and record["seed"] == 0 and record["mode"] == "mean"
    assert record["settings"]["optim.seed"] == 0 and "run.run_dir" not in record["settings"]


def test_a_second_trainer_in_a_run_directory_is_refused_before_it_touches_anything(io_flags, tmp_path):
    run = tmp_path / "fam" / "ref0" / "raw_mean_0" / "seed0"
    run.mkdir(parents=True)
    holder = hold_run_lock(run)
    try:
        with pytest.raises(SystemExit, match=rf"is being trained by PID {holder.pid} on "):
            main([*io_flags("mean", run), *TINY_RUN, "--steps", "3", "--reconstruction-term", "raw"])
        assert sorted(path.name for path in run.iterdir()) == [".train.lock"]  # nothing written, nothing removed
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------- metrics files bound to their runs


def laid_out(finished_run: Path, tmp_path: Path, *copies: str) -> tuple[Path, Path, list[Path]]:
    """finished_run under a results folder's runs/ and its metrics file under metrics/, as the pipeline lays them
    (and under each of `copies`, other metrics paths of the same run): the results folder, the run and the files."""
    results = tmp_path / "results"
    run = results / "runs" / "fam" / "ref0" / "raw_mean_0" / "seed0"
    shutil.copytree(finished_run, run)
    files = [Path(metrics_path(results, "fam/ref0/raw_mean_0/seed0")), *(results / "metrics" / copy for copy in copies)]
    for path in files:
        extract(run, path)
    return results, run, files


def edit_metric(path: Path, metric: str, value: float) -> None:
    """A metrics file with one value changed by hand (its run record kept, as an editor of the table would)."""
    frame = read_metrics([path])[0]
    frame.loc[frame.metric == metric, "value"] = value
    frame.attrs["run_record"] = json.loads(pq.read_schema(path).metadata[b"run_record"])
    write_metrics(frame, path)


def test_a_hand_edited_metrics_file_is_refused_with_the_command_that_re_extracts_it(finished_run, tmp_path):
    results, run, (metrics,) = laid_out(finished_run, tmp_path)
    check_extracted(read_metrics([metrics])[1], results)  # as extracted: nothing to say
    took_up = float(read_metrics([metrics])[0].set_index("metric").value["took_up"])
    edit_metric(metrics, "took_up", 1 - took_up)
    with pytest.raises(ValueError) as refused:
        check_extracted(read_metrics([metrics])[1], results)
    assert str(refused.value).startswith(
        f"{metrics} is not what extracting its run {run} gives today (value of took_up (run): {1 - took_up!r} in the file, "
        f"{took_up!r} from the run); re-extract it: python -m experiments.synthetic_sequences.analysis.records.metrics_files"
    )
    command = shlex.split(str(refused.value).split("re-extract it: ")[1])
    assert command[:3] == ["python", "-m", "experiments.synthetic_sequences.analysis.records.metrics_files"]
    extract_main(command[3:])  # the advice, followed
    check_extracted(read_metrics([metrics])[1], results)


def test_a_nan_written_into_a_metrics_file_is_refused_and_a_nan_endpoint_is_named(finished_run, tmp_path):
    results, run, (metrics,) = laid_out(finished_run, tmp_path)
    edit_metric(metrics, "strategy_information", float("nan"))
    with pytest.raises(ValueError, match=r"value of strategy_information \(overall\): nan in the file, [0-9.e-]+ from the run"):
        check_extracted(read_metrics([metrics])[1], results)
    with pytest.raises(ValueError, match=r"^run fam/ref0/raw_mean_0/seed0: its strategy_information is nan, not a finite number"):
        check_endpoints_finite(read_metrics([metrics])[0])
    frame = read_metrics([metrics])[0]
    with pytest.raises(ValueError, match=r"^run fam/ref0/raw_mean_0/seed0: its took_up is missing, not a finite number"):
        check_endpoints_finite(frame[frame.metric != "took_up"])


def test_a_familys_hybrid_mix_is_read_from_its_runs_records():
    def record(family, term, coefficients=None):
        settings = {"reconstruction.term": term} | ({"reconstruction.hybrid_coefficients": coefficients} if coefficients else {})
        return [{"family": family, "term": term, "settings": settings}]

    records = {
        "a.parquet": record("continuous", "hybrid", {"tokcc": 0.5, "dist": 0.5}),
        "b.parquet": record("discrete", "hybrid", {"tokcc": 0.75, "raw": 0.25}),
        "c.parquet": record("discrete", "raw"),
    }
    assert hybrid_mixes(records) == {"continuous": "tokcc 0.5 + dist 0.5", "discrete": "tokcc 0.75 + raw 0.25"}
    with pytest.raises(
        ValueError, match=r"^d.parquet's run record: a hybrid run whose settings lack reconstruction.hybrid_coefficients; re-extract"
    ):
        hybrid_mixes({**records, "d.parquet": record("discrete", "hybrid")})


def test_several_edited_metrics_files_are_counted_with_the_command_that_re_extracts_them_all(finished_run, tmp_path):
    results, run, files = laid_out(finished_run, tmp_path, "copy.parquet")
    for path in files:
        edit_metric(path, "mutual_information", 7.0)
    first = r"^2 metrics files are not what extracting their runs gives today, the first .*seed0.parquet \(run "
    with pytest.raises(ValueError, match=first):
        check_extracted(read_metrics(files)[1], results)
    with pytest.raises(ValueError, match=r"snakemake --cores 2 tables --forcerun extract_metrics"):
        check_extracted(read_metrics(files)[1], results)


def test_a_metrics_file_whose_run_was_retrained_since_is_refused(finished_run, tmp_path):
    """The run directory holds another training's files now (here: its final evaluation changed and re-sealed)."""
    results, run, (metrics,) = laid_out(finished_run, tmp_path)
    evaluation = json.loads((run / "eval.json").read_text())
    evaluation["latent_usage"]["mutual_information"] += 0.5
    (run / "eval.json").write_text(json.dumps(evaluation))
    metadata = json.loads((run / "metadata.json").read_text())
    metadata["outputs_sha256"]["eval.json"] = sha256_file(run / "eval.json")
    (run / "metadata.json").write_text(json.dumps(metadata))
    with pytest.raises(ValueError, match=r"value of mutual_information \(overall\): .* in the file, .* from the run\); re-extract it"):
        check_extracted(read_metrics([metrics])[1], results)


def test_the_first_difference_names_columns_rows_and_values_and_takes_nan_as_equal_to_nan():
    fresh = pd.DataFrame({"metric": ["a", "b"], "scope": ["overall", "run"], "value": [1.0, float("nan")]})
    assert first_difference(fresh.copy(), fresh) is None
    columns = "columns ['metric', 'scope'] in the file, ['metric', 'scope', 'value'] from the run"
    assert first_difference(fresh.drop(columns="value"), fresh) == columns
    assert first_difference(fresh.iloc[:1], fresh) == "1 rows in the file, 2 from the run"
    assert first_difference(fresh.assign(value=[1.0, 2.0]), fresh) == "value of b (run): 2.0 in the file, nan from the run"
