import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
import yaml
from test_plan import Wildcards, load

from bench.step import train_step
from core.disentanglement.batching import RecordBatcher, SpecialTokens
from core.disentanglement.cli import flat_values
from core.disentanglement.config import ReconstructionConfig
from core.disentanglement.decoder import Decoder, DecoderConfig, warm_start
from core.disentanglement.records import read_records
from core.disentanglement.scores import read_scores
from core.disentanglement.training import NonFiniteLoss
from experiments.synthetic_sequences.run_layout import RESUME, RUN_OUTPUTS, at_beta, format_alpha, run_directory
from experiments.synthetic_sequences.training.model_setup import build_model, parameter_groups
from experiments.synthetic_sequences.training.train_disentangled import main, parse_config
from experiments.synthetic_sequences.training.train_step import Objective, objective

ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = ["--d-model", "32", "--n-layer", "1", "--n-head", "2", "--num-codes", "3", "--latent-dim", "3", "--batch-size", "32"]
FAST = ["--eval-prompts-per-code", "4", "--eval-every", "10", "--log-every", "1", "--threads", "1"]


@pytest.fixture(scope="module")
def batch_and_base(data_dir, scored):
    records = read_records(data_dir / "train.parquet")
    batcher = RecordBatcher(records.frame, SpecialTokens.from_vocab(records.vocab))
    index = list(range(24))
    batch = batcher.batch(index)
    base, _ = read_scores(scored / "train.parquet").padded(dtype=torch.float32)
    return batch, base[index, : batch.mask.shape[1]], len(records.vocab)


def tiny_config(model, *extra):
    [config], *_ = parse_config(
        ["--train-records", "a", "--val-records", "b", "--test-records", "c", "--train-scores", "d", "--val-scores", "e"]
        + ["--reference", "f", "--run-dir", "g", "--model", model, *TINY_MODEL[:-2], *extra]
    )
    return config


def tiny_model(model, vocab_size, length_groups=8):
    torch.manual_seed(0)
    return build_model(tiny_config(model, "--length-groups", str(length_groups)), vocab_size, 96)


SETTINGS = {"c_base": 1.3, "beta": 0.7, "auxiliary_weights": {}}


def spec(reconstruction, **changes):
    return Objective(reconstruction=reconstruction, **{**SETTINGS, **changes})


@pytest.mark.parametrize("model_name", ["shared_discrete", "continuous"])
def test_mode_flips_only_the_reconstruction_family(batch_and_base, model_name):
    batch, base, vocab_size = batch_and_base
    model = tiny_model(model_name, vocab_size)
    output = model(batch, torch.Generator().manual_seed(0))
    results = {}
    for mode in ("mean", "sum"):
        reconstruction = ReconstructionConfig(term="tokcc", reconstruction_loss_token_aggregation_mode=mode, token_weight_alpha=1.0)
        results[mode] = objective(output, base, batch.mask, spec(reconstruction))[1]
    auxiliary = ["kl", "beta_kl", *output.auxiliary]
    assert {k: results["mean"][k] for k in auxiliary} == {k: results["sum"][k] for k in auxiliary}
    assert results["sum"]["reconstruction_loss"] > 2 * results["mean"]["reconstruction_loss"]
    assert results["mean"]["tokens_mean"] == results["sum"]["tokens_mean"]


@pytest.mark.parametrize("model_name", ["shared_discrete", "continuous"])
def test_the_auxiliary_terms_add_the_same_amount_to_the_loss_in_both_modes(batch_and_base, model_name):
    """loss(with auxiliary weights) - loss(without) is sum_k w_k aux_k, in mean and in sum alike.

    This test fails under the mutation that scales the auxiliary contribution by the batch's mean n_i under sum
    (`loss = loss + weight * output.auxiliary[name] * (counts.mean() if reconstruction.mode == "sum" else 1)` in
    train_step.objective): the sum-mode difference is then about 11 times the mean-mode one on this batch.
    """
    batch, base, vocab_size = batch_and_base
    model = tiny_model(model_name, vocab_size)
    output = model(batch, torch.Generator().manual_seed(0))
    weights = {name: 0.3 * (i + 1) * (-1) ** i for i, name in enumerate(output.auxiliary)}
    expected = sum(weight * output.auxiliary[name].item() for name, weight in weights.items())
    assert abs(expected) > 0.01
    for mode in ("mean", "sum"):
        reconstruction = ReconstructionConfig(term="raw", reconstruction_loss_token_aggregation_mode=mode)
        with_auxiliary = objective(output, base, batch.mask, spec(reconstruction, auxiliary_weights=weights))
        without = objective(output, base, batch.mask, spec(reconstruction))
        assert with_auxiliary[0].item() - without[0].item() == pytest.approx(expected, rel=1e-4), mode


@pytest.mark.parametrize("mode", ["mean", "sum"])
@pytest.mark.parametrize("model_name", ["shared_discrete", "continuous"])
def test_alpha_zero_gives_tok_raw_and_tokcc_dist_the_same_loss(batch_and_base, mode, model_name):
    batch, base, vocab_size = batch_and_base
    model = tiny_model(model_name, vocab_size)
    output = model(batch, torch.Generator().manual_seed(0))
    losses = {}
    for term in ("raw", "tok", "dist", "tokcc"):
        reconstruction = ReconstructionConfig(term=term, reconstruction_loss_token_aggregation_mode=mode, token_weight_alpha=0.0)
        losses[term] = objective(output, base, batch.mask, spec(reconstruction))[0].item()
    assert losses["tok"] == pytest.approx(losses["raw"], rel=1e-6)
    assert losses["tokcc"] == pytest.approx(losses["dist"], rel=1e-6)


@pytest.mark.parametrize("model_name", ["shared_discrete", "continuous"])
def test_length_grouped_decoding_matches_one_padded_batch(batch_and_base, model_name):
    """Decoding in length groups changes the padded work, not the loss or its gradients."""
    batch, base, vocab_size = batch_and_base
    lengths = batch.sequence_mask().sum(dim=1)
    assert lengths.max() - lengths.min() >= 10  # the groups really pad to different lengths
    reconstruction = ReconstructionConfig(term="tokcc", reconstruction_loss_token_aggregation_mode="sum", token_weight_alpha=1.0)
    results = {}
    for groups in (1, 5):
        model = tiny_model(model_name, vocab_size, length_groups=groups)
        output = model(batch, torch.Generator().manual_seed(0))
        loss, metrics = objective(output, base, batch.mask, spec(reconstruction))
        loss.backward()
        real = output.token_nll[:, batch.mask]
        results[groups] = (real.detach(), metrics, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    (nll_one, metrics_one, grads_one), (nll_grouped, metrics_grouped, grads_grouped) = results[1], results[5]
    torch.testing.assert_close(nll_grouped, nll_one, rtol=1e-5, atol=1e-5)
    assert metrics_grouped.keys() == metrics_one.keys()
    for name, value in metrics_one.items():
        assert metrics_grouped[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
    assert grads_grouped.keys() == grads_one.keys()
    for name, grad in grads_one.items():
        torch.testing.assert_close(grads_grouped[name], grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("model_name", ["shared_discrete", "continuous"])
def test_warm_start_copies_the_zfree_decoder_and_keeps_the_latent_projection(model_name):
    model = tiny_model(model_name, vocab_size=20)
    torch.manual_seed(1)
    zfree = Decoder(DecoderConfig(vocab_size=20, max_len=40, d_model=32, n_layer=1, n_head=2))
    projection = model.decoder.latent_projection.weight.clone()
    warm_start(model.decoder, zfree)
    source, target = zfree.state_dict(), model.decoder.state_dict()
    for name, tensor in source.items():
        if name == "position_embedding.weight":
            assert torch.equal(target[name][:40], tensor) and len(target[name]) == 96
        else:
            assert torch.equal(target[name], tensor), name
    assert torch.equal(model.decoder.latent_projection.weight, projection)
    with pytest.raises(ValueError, match="init_decoder: .* has d_model 64, the CVAE decoder 32"):
        warm_start(model.decoder, Decoder(DecoderConfig(vocab_size=20, d_model=64, n_layer=1, n_head=2)))


def test_a_warm_started_decoder_learns_at_its_own_rate_and_everything_else_at_lr():
    cold = tiny_config("shared_discrete")
    warm = tiny_config("shared_discrete", "--init-decoder", "zfree.pt", "--warm-decoder-lr-factor", "0.1")
    model = build_model(warm, 20, 96)
    names = {id(p): n for n, p in model.named_parameters()}
    groups = parameter_groups(model.named_parameters(), warm)
    assert [g["lr_factor"] for g in groups] == [1.0, 0.1]
    slow = {names[id(p)] for p in groups[1]["params"]}
    assert slow == {n for n in names.values() if n.startswith("decoder.") and "latent_projection" not in n}
    assert sum(len(g["params"]) for g in groups) == len(names)
    assert [g["lr_factor"] for g in parameter_groups(model.named_parameters(), cold)] == [1.0]


def test_non_finite_loss_stops_before_the_weights_change(batch_and_base):
    batch, base, vocab_size = batch_and_base
    model = tiny_model("shared_discrete", vocab_size)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters())
    poisoned = base.clone()
    poisoned[batch.mask] = float("nan")
    reconstruction = ReconstructionConfig(term="ex")
    with pytest.raises(NonFiniteLoss, match="loss is nan"):
        train_step(model, optimizer, batch, poisoned, generator=None, grad_clip=1.0, spec=spec(reconstruction))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_trainer_refuses_a_reference_of_the_other_mode(io_flags, tmp_path):
    with pytest.raises(SystemExit, match="built in mode 'mean' but the run uses mode 'sum'"):
        main([*io_flags("sum", tmp_path / "run", reference_mode="mean"), *TINY_MODEL, "--steps", "2"])
    assert not (tmp_path / "run").exists()


def test_trainer_refuses_train_scores_given_as_val_scores(io_flags, scored, tmp_path):
    flags = io_flags("mean", tmp_path / "run")
    flags[flags.index("--val-scores") + 1] = str(scored / "train.parquet")
    with pytest.raises(SystemExit, match="train.parquet: split is 'train', but it was given as the 'val' split"):
        main([*flags, *TINY_MODEL, "--steps", "2"])
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--reconstruction-loss-token-aggregation-mode", "Sum"], "--reconstruction-loss-token-aggregation-mode: invalid choice: 'Sum'"),
        (["--reconstruction-term", "dist", "--token-weight-alpha", "1"], "token_weight_alpha: 1.0 has no effect on term 'dist'"),
        (["--auxiliary-weights", "posterior_variance=1"], "'posterior_variance' is not a term of model 'shared_discrete'"),
        (["--reconstruction-term", "hybrid", "--hybrid-coefficients", "kl=1"], "unknown term 'kl'"),
        (["--length-groups", "0"], "length_groups: 0 is not allowed"),
        (["--steps", "10.5"], "--steps: invalid int value: '10.5'"),
        (["--stpes", "10"], "unrecognized arguments: --stpes 10"),
        (["--stop-at-take-up", "yes"], "--stop-at-take-up: 'yes' is not allowed; allowed values: true, false"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(io_flags, tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit):
        main([*io_flags("mean", tmp_path / "run"), *flags])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", sorted(path.name for path in (ROOT / "config").glob("*.yaml")))
def test_the_flags_the_plan_gives_a_chunk_make_each_of_its_runs_its_own_config(tmp_path, name):
    """Every chunk of every shipped config: the trainer reads from the plan's one flag set what the grid validated,
    run by run, to the byte of each setting's JSON (the run's config is written as JSON and hashed)."""
    plan = load(tmp_path, *([] if name == "config.yaml" else [yaml.safe_load((ROOT / "config" / name).read_text())]))
    files = {"train_records": "t", "val_records": "v", "test_records": "x", "train_scores": "a", "val_scores": "b", "reference": "r"}
    paths = [part for setting, path in files.items() for part in (f"--{setting.replace('_', '-')}", path)]
    for runs in plan.chunks.values():
        spec = runs[0]
        chunk = runs[0].chunk_path(plan.seeds_per_job()).rsplit("/seeds", 1)[1]
        key = {"term": spec.term, "mode": str(spec.mode), "alpha": format_alpha(spec.alpha), "at_beta": at_beta(spec.key_beta)}
        wildcards = Wildcards(family=spec.family, reference=str(spec.block), chunk=chunk, **key)
        configs, *_ = parse_config([*paths, *shlex.split(plan.chunk_flags(wildcards))])
        job = {"init_decoder": plan.zfree_checkpoint(spec.block)} if spec.warm_start else {}
        if plan.train_gpus(wildcards) > 0 and "device" not in spec.settings:  # a GPU job's runs take the GPU it holds
            job["device"] = "auto"
        expected = [run.train_config(**files, run_dir=run_directory(plan.config["results"], run.path)).with_settings(**job) for run in runs]
        assert [json.dumps(flat_values(c)) for c in configs] == [json.dumps(flat_values(c)) for c in expected], spec.path


@pytest.mark.slow
@pytest.mark.parametrize("model_name", ["shared_discrete", "continuous"])
def test_short_run_writes_every_artifact(io_flags, tmp_path, model_name):
    run = tmp_path / "run"
    main([*io_flags("sum", run), *TINY_MODEL, *FAST, "--model", model_name, "--steps", "12", "--reconstruction-term", "tokcc"])
    run_config = json.loads((run / "run_config.json").read_text())
    metadata = json.loads((run / "metadata.json").read_text())
    evaluation = json.loads((run / "eval.json").read_text())
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert run_config["reconstruction"]["reconstruction_loss_token_aggregation_mode"] == "sum"
    assert run_config["model"]["model"] == model_name and set(run_config) == {"reconstruction", "objective", "model", "optim", "run"}
    assert metadata["reconstruction_loss_token_aggregation_mode"] == "sum" and metadata["reference"]["mode"] == "sum"
    assert {"git_commit", "torch", "seed", "started", "finished", "device"} <= metadata.keys()
    assert evaluation["reconstruction_loss_token_aggregation_mode"] == "sum"
    assert [r["step"] for r in rows if r["split"] == "train"] == list(range(1, 13))
    assert [r["step"] for r in rows if r["split"] == "val"] == [10, 12]
    for row in rows:
        assert {"reconstruction_loss", "reconstruction_objective", "kl", "beta_kl", "tokens_mean", "tokens_min", "tokens_max"} <= row.keys()
        assert {"base_aggregate_min", "kappa_min", "kappa_max", "eta_min", "eta_max", "reconstruction_to_kl"} <= row.keys()
    curve = {"mutual_information", "nmi", "ami", "shuffled_z_nll_rise_per_token", "recon_nll_per_token", "recon_nll_per_example"}
    for row in (r for r in rows if r["split"] == "val"):
        assert curve | {"codes_used" if model_name == "shared_discrete" else "active_units"} <= row.keys()
        assert row["recon_nll_per_example"] == pytest.approx(row["recon_nll_per_token"] * row["tokens_mean"], rel=1e-4)
    assert 0 <= metadata["timing"]["validation_s"] < metadata["timing"]["train_loop_s"]
    assert set(evaluation["samples"]["by_length_bucket"]) <= set(evaluation["strategy_separation"]["within_length_bucket"])
    usage = evaluation["latent_usage"]
    assert ("codes_used" in usage) == (model_name == "shared_discrete") and ("active_units" in usage) == (model_name == "continuous")
    separation = evaluation["strategy_separation"]
    assert {"overall", "within_task", "within_length_bucket", "shuffled_label_baseline"} <= separation.keys()
    assert set(separation["within_task"]) == {"add", "sort", "count"}
    assert 0 <= evaluation["samples"]["parse_rate"] <= 1
    assert (run / "model.pt").is_file() and not (run / RESUME).exists()


def trainer_command(flags):
    return [sys.executable, "-m", "experiments.synthetic_sequences.training.train_disentangled", *flags]


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["SIGTERM", "SIGINT", "SIGKILL"])
def test_resume_after_a_stop_ends_like_an_uninterrupted_run(io_flags, tmp_path, stop):
    """SIGTERM, and SIGINT (Ctrl-C): the run saves its state at the step it stops. SIGKILL: it resumes from its last
    checkpoint (step 10, say), and the metrics rows it had appended after it are cut from metrics.jsonl before they
    are logged again."""
    common = [*TINY_MODEL, *FAST, "--steps", "40", "--checkpoint-every", "5", "--estimator", "gumbel"]
    straight = subprocess.run(
        trainer_command([*io_flags("sum", tmp_path / "straight"), *common]), cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert straight.returncode == 0, straight.stderr[-2000:]

    interrupted = tmp_path / "interrupted"
    process = subprocess.Popen(trainer_command([*io_flags("sum", interrupted), *common]), cwd=ROOT, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if " step 13/" in line:  # "raw_mean_0 seeds 0 step 13/40 ..."
            process.send_signal(stop)
            break
    process.stderr.read()
    assert process.wait(timeout=300) == (-stop if stop == signal.SIGKILL else 128 + stop)
    assert (interrupted / RESUME).is_file() and not (interrupted / "eval.json").exists()
    if stop == signal.SIGKILL:  # rows after the last checkpoint are in the log, to be cut on resume
        rows_logged = torch.load(interrupted / RESUME, weights_only=False)["rows_logged"]["0"]  # seed 0, the chunk's one seed
        assert (interrupted / "metrics.partial.jsonl").read_text().count("\n") > rows_logged
    for name in RUN_OUTPUTS:  # as snakemake deletes a failed job's declared outputs before its retry
        (interrupted / name).unlink(missing_ok=True)
    resumed = subprocess.run(
        trainer_command([*io_flags("sum", interrupted), *common]), cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming" in resumed.stderr

    assert (interrupted / "eval.json").read_text() == (tmp_path / "straight" / "eval.json").read_text()
    assert (interrupted / "metrics.jsonl").read_text() == (tmp_path / "straight" / "metrics.jsonl").read_text()
    a = torch.load(interrupted / "model.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "straight" / "model.pt", weights_only=False)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    resumed_from = json.loads((interrupted / "metadata.json").read_text())["resumed_from_step"]
    assert resumed_from % 5 == 0 if stop == signal.SIGKILL else resumed_from >= 13  # SIGKILL: a --checkpoint-every step


def mean_train_tokens(records_path) -> float:
    """The train split's mean supervised token count, counted from the parquet's y lists in plain Python."""
    ys = pq.read_table(records_path, columns=["y"]).column("y").to_pylist()
    return sum(len(y) for y in ys) / len(ys)


@pytest.mark.parametrize(("controls", "mode"), [("scale", "mean"), ("balance", "sum")])
def test_a_control_multiplies_its_weight_by_the_train_splits_mean_token_count(io_flags, data_dir, tmp_path, controls, mode):
    run = tmp_path / "run"
    main([*io_flags(mode, run), *TINY_MODEL, *FAST, "--steps", "3", "--controls", controls, "--reconstruction-scale", "2", "--beta", "0.3"])
    tokens = mean_train_tokens(data_dir / "train.parquet")
    resolved = json.loads((run / "metadata.json").read_text())["resolved"]
    assert resolved["mean_train_tokens"] == pytest.approx(tokens, rel=1e-12)
    assert resolved["reconstruction_scale"] == pytest.approx(2 * tokens if controls == "scale" else 2, rel=1e-12)
    assert resolved["beta"] == pytest.approx(0.3 * tokens if controls == "balance" else 0.3, rel=1e-12)
    for row in (json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()):
        if row["split"] == "train":  # the loss the optimiser saw used exactly these weights
            assert row["beta_kl"] == pytest.approx(resolved["beta"] * row["kl"], rel=1e-5, abs=1e-9)
            expected = resolved["reconstruction_scale"] * row["reconstruction_objective"] + row["beta_kl"]
            assert row["loss"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("model_name", ["shared_discrete", "continuous"])
def test_a_diverging_run_stops_on_its_non_finite_loss_alone_and_in_a_chunk(io_flags, tmp_path, model_name):
    """At one seed per job the model is called directly and its input checks can see the values: a blow-up must still
    stop on the non-finite loss, naming the step, with the stopped record and the last good weights, as in a chunk."""
    # the default width: the tiny model of the other tests stays finite in its posterior a step longer than its loss
    diverging = [
        *FAST,
        "--batch-size",
        "32",
        "--num-codes",
        "3",
        "--model",
        model_name,
        "--steps",
        "40",
        "--lr",
        "1000",
        "--grad-clip",
        "1e6",
    ]
    records = {}
    for seeds in (["0"], ["0", "1"]):
        dirs = [str(tmp_path / f"chunk{len(seeds)}" / f"seed{seed}") for seed in seeds]
        flags = [flag for flag in io_flags("mean", dirs[0]) if flag not in ("--run-dir", dirs[0])]
        with pytest.raises(SystemExit) as stop:
            main([*flags, *diverging, "--seed", *seeds, "--run-dir", *dirs])
        message = str(stop.value)
        assert re.fullmatch(
            r"error: seed 0 stopped at step \d+: (loss is (nan|inf)|validation: the posterior .* is not finite)"
            r".*its weights after \d+ steps in .*model\.pt.*",
            message,
        )
        metadata = json.loads((Path(dirs[0]) / "metadata.json").read_text())
        assert "finished" not in metadata and re.match(
            rf"step {metadata['stopped']['step']}: (loss is|validation: the posterior)", metadata["stopped"]["error"]
        )
        assert (Path(dirs[0]) / "model.pt").is_file() and not (Path(dirs[0]) / "eval.json").exists()
        records[len(seeds)] = set(metadata["stopped"])
    assert records[1] == records[2] == {"step", "error", "timing"}
