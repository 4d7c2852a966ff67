"""Train one CVAE run on synthetic sequences and evaluate it on the test split.

    python -m experiments.synthetic_sequences.disentangled.train_disentangled \\
        --train-records results/data/train.parquet --val-records results/data/val.parquet \\
        --test-records results/data/test.parquet --train-scores results/zfree/scores/train.parquet \\
        --val-scores results/zfree/scores/val.parquet --reference results/reference/sum.json \\
        --reconstruction-loss-token-aggregation-mode sum --reconstruction-term dist \\
        --run-dir results/runs/demo/dist_sum_0/seed0

Before anything is written, every input is checked (inputs.py): the reference
artifact's c_base is recomputed from the validation scores in the run's own
mode, and the scores must be of exactly the given records, from one z-free
checkpoint. The run directory receives run_config.json, metrics.jsonl (train
steps and validation evaluations), model.pt, eval.json and, last, metadata.json
(which marks the run finished). A partial run leaves resume.pt, written every
--checkpoint-every steps and on SIGTERM / SIGUSR1 (what Slurm sends before a
time limit); restarting with the same run directory, settings and inputs
resumes from it and ends with the same numbers as an uninterrupted run. A
resume.pt of anything else is set aside (run_state.py) and the run starts fresh.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import MISSING, fields, replace

import torch
from sklearn.metrics import adjusted_mutual_info_score, normalized_mutual_info_score

from core.disentanglement.artifacts import save_torch, sha256_file, write_json
from core.disentanglement.batching import BatchSchedule, step_generator
from core.disentanglement.config import AGGREGATION_MODES, NORMALISED_TERMS, OPTIMISABLE_TERMS
from core.disentanglement.continuous_cvae import ContinuousCVAE
from core.disentanglement.decoder import DecoderConfig, warm_start
from core.disentanglement.latent_configs import ESTIMATORS
from core.disentanglement.losses import aggregate_tokens, concentration_factor
from core.disentanglement.schedule import warmup_cosine
from core.disentanglement.shared_discrete_cvae import SharedDiscreteCVAE
from core.disentanglement.token_weighting import high_surprisal_weights, low_surprisal_weights
from core.disentanglement.zfree import load_decoder
from experiments.synthetic_sequences.disentangled.config import AUXILIARY_TERMS, BATCHING, CONTROLS, MODELS, TrainConfig
from experiments.synthetic_sequences.disentangled.curves import train_diagnostics
from experiments.synthetic_sequences.disentangled.evaluate import evaluate, latent_summary, posterior_pass, shuffled_z_rise
from experiments.synthetic_sequences.disentangled.grid import RESUME_FILE, RUN_OUTPUTS
from experiments.synthetic_sequences.disentangled.inputs import input_hashes, load_inputs
from experiments.synthetic_sequences.disentangled.run_state import (
    METRICS_FILE,
    PARTIAL_METRICS_FILE,
    MetricsLog,
    StopRequested,
    clear_outputs,
    git_commit,
    load_resume,
    now,
    save_resume,
)
from experiments.synthetic_sequences.disentangled.train_step import BATCH_EXTREMES, NonFiniteLoss, objective, train_step

CHOICES = {"model": MODELS, "estimator": ESTIMATORS, "batching": BATCHING, "reconstruction_term": OPTIMISABLE_TERMS, "controls": CONTROLS}
EVAL_BATCH = 128
# batch-level counts and extremes: a validation row takes them from the whole split instead (split_diagnostics)
PER_BATCH_ONLY = ("tokens_mean", "tokens_min", "tokens_max", "reconstruction_to_kl", *BATCH_EXTREMES)

HELP = {
    "train_records": "train split records parquet",
    "val_records": "validation split records parquet",
    "test_records": "test split records parquet (evaluation only)",
    "train_scores": "z-free scores b_{i,t} of the train split",
    "val_scores": "z-free scores of the validation split; must be the ones the reference was built from",
    "reference": "c_base artifact (reference/{mode}.json) built in the run's own aggregation mode",
    "run_dir": "output folder of this run",
    "init_decoder": "z-free checkpoint (results/zfree/model.pt) whose weights start the CVAE decoder: a warm start; "
    "only the latent's input projection starts random. Empty: random initialisation",
    "warm_decoder_lr_factor": "with --init-decoder: the pretrained decoder weights learn at lr x this factor "
    "(the router and the latent projection at lr), so fine-tuning does not first undo what the z-free model learned",
    "model": f"CVAE family ({', '.join(MODELS)})",
    "reconstruction_term": f"optimised reconstruction term ({', '.join(OPTIMISABLE_TERMS)})",
    "reconstruction_loss_token_aggregation_mode": "A_mean (per-example token mean) or A_sum (per-example token sum); "
    "the batch reduction is the example mean either way",
    "token_weight_alpha": "power of the z-free NLL in the token weights (tok, tokcc, tokinv); 0 = uniform",
    "epsilon": "ex-term denominator offset, in the selected mode's units (nats/token for mean, nats/example for sum)",
    "hybrid_coefficients": "for --reconstruction-term hybrid: weighted terms, e.g. tokcc=0.5,dist=0.5; coefficients >= 0, one > 0. "
    "dist, ex, tokcc and tokinv are divided by a reference scale and O(1) in both modes, raw and tok are not "
    "(about mean n_i times larger under sum): a hybrid mixing the two kinds weights its parts differently in mean and in sum",
    "reconstruction_scale": "multiplier of the reconstruction term (the scale control: mean mode x mean token count)",
    "beta": "weight of KL(q(z|x,y) || p(z|x)) (the balance control: sum mode with beta x mean token count)",
    "beta_warmup_steps": "ramp beta linearly from 0 over this many steps (KL annealing; 0 = off)",
    "controls": "none; scale: reconstruction x mean train token count (use with mean); balance: beta x that count (use with sum)",
    "auxiliary_weights": "weights of auxiliary terms, added to the loss as given (negative to encourage), e.g. router_marginal_kl=0.1; "
    + "; ".join(f"{model}: {', '.join(names)}" for model, names in AUXILIARY_TERMS.items()),
    "num_codes": "discrete model: number of codes K shared across tasks",
    "prior": "fixed (uniform codes / N(0, I)) or learned p(z|x)",
    "estimator": "discrete model: enumerate all K codes exactly, or gumbel (straight-through samples)",
    "latent_dim": "continuous model: latent dimensions",
    "latent_samples": "continuous model: reparameterised samples per example",
    "length_groups": "decode each batch in this many length-sorted groups, each padded to its own longest example "
    "(1: the whole batch padded as one; the numbers agree up to float rounding, the padded work shrinks)",
    "batching": f"training batches ({', '.join(BATCHING)}); bucketed pads less but makes batch-marginal terms see one length range",
    "device": "cpu, auto (cuda when available, else cpu with a notice), cuda, cuda:N or mps",
}


def parse_pairs(text: str) -> dict[str, float]:
    """'a=0.5,b=1' -> {'a': 0.5, 'b': 1.0}."""
    pairs = {}
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"{item!r} is not name=value")
        try:
            pairs[name.strip()] = float(value)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"{item!r}: {value!r} is not a number") from err
    return pairs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        required = f.default is MISSING and f.default_factory is MISSING
        default = None if required else (f.default if f.default is not MISSING else f.default_factory())
        help_text = HELP.get(f.name, "") + ("" if required else " (default: %(default)s)")
        kwargs = {"required": required, "default": default, "help": help_text.strip()}
        if f.name == "reconstruction_loss_token_aggregation_mode":
            kwargs["choices"] = AGGREGATION_MODES
        elif f.name in CHOICES:
            kwargs["choices"] = CHOICES[f.name]
        if isinstance(default, dict):
            kwargs["type"] = parse_pairs
            kwargs["default"] = {}
        elif default is not None:
            kwargs["type"] = type(default)
        parser.add_argument(flag, **kwargs)
    return parser


def parse_config(argv: Sequence[str] | None = None) -> tuple[TrainConfig, int | None]:
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    threads = args.pop("threads")
    try:
        return TrainConfig(**args), threads
    except ValueError as err:
        parser.error(str(err))


# ---------------------------------------------------------------- the model


def build_model(config: TrainConfig, vocab_size: int, max_len: int) -> torch.nn.Module:
    decoder_config = DecoderConfig(
        vocab_size=vocab_size, max_len=max_len, d_model=config.d_model, n_layer=config.n_layer, n_head=config.n_head
    )
    model_cls = SharedDiscreteCVAE if config.model == "shared_discrete" else ContinuousCVAE
    return model_cls(decoder_config, config.model_config)


def initial_model(config: TrainConfig, inputs: dict) -> torch.nn.Module:
    """The run's model before its first step: sized for the longest sequence of any split, initialised from the run's seed,
    its decoder warm-started from a z-free checkpoint when --init-decoder names one."""
    torch.manual_seed(config.seed)
    max_len = int(max(b.lengths.max() for b in inputs["batchers"].values())) + 16
    model = build_model(config, len(inputs["records"]["train"].vocab), max_len)
    if config.init_decoder:
        zfree_decoder, _ = load_decoder(config.init_decoder)
        warm_start(model.decoder, zfree_decoder, source=config.init_decoder)
    return model


# ---------------------------------------------------------------- optimiser and device


def parameter_groups(model: torch.nn.Module, config: TrainConfig) -> list[dict]:
    """AdamW groups: a warm-started decoder's pretrained weights learn at lr x warm_decoder_lr_factor, the rest at lr.

    The latent projection is new in a warm start, so it stays with the encoder at the full rate.
    """
    pretrained = [
        parameter
        for name, parameter in model.named_parameters()
        if config.init_decoder and name.startswith("decoder.") and not name.startswith("decoder.latent_projection.")
    ]
    chosen = {id(parameter) for parameter in pretrained}
    rest = [parameter for parameter in model.parameters() if id(parameter) not in chosen]
    groups = [{"params": rest, "lr_factor": 1.0}]
    if pretrained:
        groups.append({"params": pretrained, "lr_factor": config.warm_decoder_lr_factor})
    return groups


def resolve_device(name: str) -> torch.device:
    """`auto` is cuda when available, else cpu (with a notice); a named accelerator must be present."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        print("device auto: no CUDA device is visible to this process; training on cpu", file=sys.stderr, flush=True)
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device: {name!r} is not available (torch sees no CUDA device); use cpu or auto")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device: 'mps' is not available on this machine; use cpu or auto")
    return torch.device(name)


# ---------------------------------------------------------------- evaluation on validation


def split_diagnostics(base: tuple[torch.Tensor, torch.Tensor], config: TrainConfig) -> dict:
    """Token counts n_i and the extremes of A_a(b_i), kappa_i^a and eta_i^a over a whole split (no model involved)."""
    b, mask = base
    counts = mask.sum(dim=1).float()
    mode, alpha = config.mode, config.token_weight_alpha
    kappa = concentration_factor(b, high_surprisal_weights(b, mask, alpha), mask, mode)
    eta = concentration_factor(b, low_surprisal_weights(b, mask, alpha), mask, mode)
    return {
        "tokens_mean": counts.mean().item(),
        "tokens_min": counts.min().item(),
        "tokens_max": counts.max().item(),
        "base_aggregate_min": aggregate_tokens(b, mask, mode).min().item(),
        "kappa_min": kappa.min().item(),
        "kappa_max": kappa.max().item(),
        "eta_min": eta.min().item(),
        "eta_max": eta.max().item(),
    }


@torch.inference_mode()
def validation_metrics(model, inputs: dict, settings: dict, seed: int, device) -> dict:
    """One point of the learning curves, on the whole validation split.

    The training objective's parts (example-weighted over batches), the reconstruction NLL under q per token
    and per example (one scale for mean and sum runs), latent usage (KL, I(x;z), codes used or active units,
    the NLL rise when z is shuffled) and strategy separation (NMI, AMI of the codes or a k-means of E_q[z]).
    """
    model.eval()
    records, batcher, (base_nll, _) = inputs["records"]["val"], inputs["batchers"]["val"], inputs["base"]["val"]

    def score(output, batch) -> dict[str, float]:
        _, metrics = objective(output, base_nll[batch.index.cpu(), : batch.mask.shape[1]].to(device), batch.mask, **settings)
        return {name: value for name, value in metrics.items() if value is not None and name not in PER_BATCH_ONLY}

    passed = posterior_pass(model, batcher, EVAL_BATCH, seed, device, score=score)
    strategy = records.frame["strategy"].to_numpy()
    usage, assigned, _ = latent_summary(model, passed, len(set(strategy)), seed)
    result = passed["scored"]
    beta_kl = result["beta_kl"]
    recon = settings["reconstruction"].reconstruction_scale * result["reconstruction_objective"]
    return {
        **result,
        "reconstruction_to_kl": recon / beta_kl if beta_kl > 0 else None,
        "recon_nll_per_token": passed["recon_nll_per_token"],
        "recon_nll_per_example": passed["recon_nll_per_example"],
        **{name: value for name, value in usage.items() if name != "code_shares"},
        **shuffled_z_rise(passed),
        "nmi": float(normalized_mutual_info_score(strategy, assigned)),
        "ami": float(adjusted_mutual_info_score(strategy, assigned)),
    }


# ---------------------------------------------------------------- the run


def hybrid_scale_note(config: TrainConfig) -> str | None:
    """A one-line notice when a hybrid mixes terms divided by a reference scale with terms that are not."""
    parts = set(config.hybrid_coefficients)
    normalised, unnormalised = sorted(parts & NORMALISED_TERMS), sorted(parts - NORMALISED_TERMS)
    if not (normalised and unnormalised):
        return None
    return (
        f"note: the hybrid mixes {', '.join(unnormalised)} (in {config.mode} units) with {', '.join(normalised)} "
        "(divided by a reference scale): their relative weight differs between mean and sum by about the mean token count"
    )


def train(config: TrainConfig) -> dict:
    called = time.perf_counter()
    device = resolve_device(config.device)
    inputs = load_inputs(config)  # every check, before anything is written
    inputs_sha256 = input_hashes(config)
    model = initial_model(config, inputs).to(device)
    optimizer = torch.optim.AdamW(parameter_groups(model, config), lr=config.lr, weight_decay=config.weight_decay)
    if note := hybrid_scale_note(config):
        print(note, file=sys.stderr, flush=True)

    run_dir = config.run_path
    run_dir.mkdir(parents=True, exist_ok=True)
    resume_path = run_dir / RESUME_FILE
    resumed = load_resume(resume_path, config.training_settings(), inputs_sha256)
    clear_outputs(run_dir)
    start_step = 0
    if resumed is not None:
        model.load_state_dict(resumed["model"])
        optimizer.load_state_dict(resumed["optimizer"])
        start_step = resumed["step"]
        print(f"resuming {run_dir} from step {start_step}", file=sys.stderr, flush=True)
    log = MetricsLog(run_dir / PARTIAL_METRICS_FILE, keep=resumed["rows_logged"] if resumed is not None else 0)

    reference = inputs["reference"]
    write_json(config.to_dict(), run_dir / "run_config.json")
    metadata = {
        "reconstruction_loss_token_aggregation_mode": config.mode.value,
        "reference": {"path": config.reference, "mode": reference["mode"], "c_base": reference["c_base"]},
        "inputs_sha256": inputs_sha256,
        "git_commit": git_commit(),
        "torch": torch.__version__,
        "seed": config.seed,
        "device": str(device),
        "started": now(),
        "resumed_from_step": start_step or None,
        "parameters": sum(p.numel() for p in model.parameters()),
    }

    mean_train_tokens = float(inputs["records"]["train"].frame["y_length"].mean())
    scale_factor, beta_factor = config.control_factors(mean_train_tokens)
    reconstruction = replace(config.reconstruction, reconstruction_scale=config.reconstruction_scale * scale_factor)
    beta = config.beta * beta_factor
    settings = {
        "reconstruction": reconstruction,
        "c_base": reference["c_base"],
        "beta": beta,
        "auxiliary_weights": config.auxiliary_weights,
    }
    metadata["resolved"] = {
        "controls": config.controls,
        "mean_train_tokens": mean_train_tokens,
        "reconstruction_scale": reconstruction.reconstruction_scale,
        "beta": beta,
    }
    write_json(metadata, run_dir / "metadata.json")
    train_batcher = inputs["batchers"]["train"]
    train_base, _ = inputs["base"]["train"]
    schedule = BatchSchedule(train_batcher.lengths, config.batch_size, config.seed, config.batching)
    stop = StopRequested()
    val_diagnostics = split_diagnostics(inputs["base"]["val"], config)
    started, step, validation_s = time.perf_counter(), start_step, 0.0
    last_saved = start_step if resumed is not None else None
    while step < config.steps:
        index = schedule(step)
        batch = train_batcher.batch(index).to(device)
        for group in optimizer.param_groups:
            group["lr"] = group["lr_factor"] * warmup_cosine(step, config.lr, config.warmup_steps, config.steps)
        settings["beta"] = beta * min(1.0, step / config.beta_warmup_steps) if config.beta_warmup_steps else beta
        try:
            metrics = train_step(
                model,
                optimizer,
                batch,
                train_base[index, : batch.mask.shape[1]].to(device),
                generator=step_generator(config.seed, step, device),
                grad_clip=config.grad_clip,
                **settings,
            )
        except NonFiniteLoss as err:
            kept = (
                f"the last good state (step {last_saved}) is kept in {resume_path}"
                if last_saved is not None
                else "no checkpoint was written yet"
            )
            raise NonFiniteLoss(f"step {step}: {err}; {kept}") from err
        step += 1
        log.append({"split": "train", "step": step, "lr": optimizer.param_groups[0]["lr"], "beta": settings["beta"], **metrics})
        if step % config.log_every == 0 or step == config.steps:
            rate = (step - start_step) / (time.perf_counter() - started)
            print(
                f"step {step}/{config.steps} loss {metrics['loss']:.4f} recon[{config.mode}] {metrics['reconstruction_loss']:.4f} "
                f"kl {metrics['kl']:.4f} ({rate:.1f} steps/s)",
                file=sys.stderr,
                flush=True,
            )
        if step % config.eval_every == 0 or step == config.steps:
            validation_started = time.perf_counter()
            point = validation_metrics(model, inputs, settings, config.seed, device)
            log.append({"split": "val", "step": step, **point, **val_diagnostics})
            validation_s += time.perf_counter() - validation_started
        if step % config.checkpoint_every == 0 or stop.signal is not None:
            save_resume(resume_path, model, optimizer, step, log.rows, config.training_settings(), inputs_sha256)
            last_saved = step
        if stop.signal is not None and step < config.steps:
            print(
                f"received signal {stop.signal} at step {step}: state saved to {resume_path}; rerun to resume", file=sys.stderr, flush=True
            )
            sys.exit(128 + stop.signal)

    loop_s = time.perf_counter() - started
    evaluation = evaluate(
        model,
        inputs["records"]["test"],
        inputs["batchers"]["test"],
        seed=config.seed,
        prompts_per_code=config.eval_prompts_per_code,
        batch_size=EVAL_BATCH,
        device=device,
    )
    evaluation.update(
        model=config.model, reconstruction_term=config.reconstruction_term, reconstruction_loss_token_aggregation_mode=config.mode.value
    )
    save_torch({"model": model.state_dict(), "run_config": config.to_dict(), "max_len": model.decoder.config.max_len}, run_dir / "model.pt")
    rows = log.finish(run_dir / METRICS_FILE)
    write_json(evaluation, run_dir / "eval.json")
    timing = {
        "setup_s": started - called,
        "train_loop_s": loop_s,  # this process's steps, with their validation passes and checkpoints
        "validation_s": validation_s,  # the learning curves' share of train_loop_s
        "train_steps": config.steps - start_step,
        "evaluation_s": time.perf_counter() - started - loop_s,
    }
    diagnostics = train_diagnostics([row for row in rows if row["split"] == "train"])
    # written last: `finished` and the outputs' hashes mark a complete run directory (tables extract checks both)
    outputs_sha256 = {name: sha256_file(run_dir / name) for name in RUN_OUTPUTS if name != "metadata.json"}
    finished = {"finished": now(), "timing": timing, "train_diagnostics": diagnostics, "outputs_sha256": outputs_sha256}
    write_json({**metadata, **finished}, run_dir / "metadata.json")
    resume_path.unlink(missing_ok=True)
    return evaluation


def main(argv: Sequence[str] | None = None) -> None:
    config, threads = parse_config(argv)
    if threads:
        torch.set_num_threads(threads)
    try:
        evaluation = train(config)
    except (ValueError, FileNotFoundError, NonFiniteLoss) as err:
        sys.exit(f"error: {err}")
    overall = evaluation["strategy_separation"]["overall"]
    baseline = evaluation["strategy_separation"]["shuffled_label_baseline"]
    print(
        f"test: strategy NMI {overall['nmi']:.3f} (shuffled labels {baseline['nmi']:.3f}), probe accuracy {overall['probe_accuracy']:.3f}, "
        f"KL {evaluation['latent_usage']['kl']:.3f}, samples parse {evaluation['samples']['parse_rate']:.2f}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
