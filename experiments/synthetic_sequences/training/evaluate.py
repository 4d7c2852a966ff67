"""Test-split evaluation of a trained CVAE: latent usage, strategy separation, samples per code.

Everything is computed from one pass over the test records in a fixed random
order (so "shuffle z across the batch" mixes strategies and lengths), plus
samples from p(y|x,z) for a fixed set of test prompts under each code (the
K codes of the discrete model; the k-means centroids of E_q[z] for the
continuous one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, normalized_mutual_info_score
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from core.disentanglement.batching import RecordBatcher, SequenceBatch
from core.disentanglement.cvae_output import CVAEOutput
from core.disentanglement.decoder import token_nll
from core.disentanglement.information import continuous_information, discrete_information
from core.disentanglement.losses import posterior_expectation
from core.disentanglement.masking import zero_padding
from core.disentanglement.records import Records
from core.disentanglement.sampling import sample_outputs
from core.disentanglement.training import NonFiniteLoss
from experiments.synthetic_sequences.tasks import EOS, ParseError, parse_output
from experiments.synthetic_sequences.training.latent_usage import continuous_usage, discrete_usage

LENGTH_BUCKETS = 3
BatchScore = Callable[[CVAEOutput, SequenceBatch], dict[str, float]]
# I(z; s) / H(s) of the examples in `rows` against their labels (core.disentanglement.information)
StrategyInformation = Callable[[np.ndarray, np.ndarray], float | None]


@torch.inference_mode()
def posterior_pass(model, batcher: RecordBatcher, batch_size: int, seed: int, device, score: BatchScore | None = None) -> dict:
    """Posterior features, KL, and decoder NLL under q, with each example's own latent and with latents shuffled.

    The records are visited in one fixed random order, so shuffling z within a batch mixes strategies and
    lengths. `score(output, batch)` adds per-batch means (the training objective's parts, say), averaged over
    examples; it sees the same forward pass, so nothing is decoded twice.
    """
    rng = np.random.default_rng([seed, 1])
    shuffle_generator = torch.Generator().manual_seed(seed)
    sample_generator = torch.Generator(device=device).manual_seed(seed)  # the model's noise, independent of any earlier draw
    order = rng.permutation(len(batcher))
    features, logvars, rows = [], [], []
    kl_total, supervised = 0.0, 0
    scored: dict[str, float] = {}
    nll_total = {"expected": 0.0, "own": 0.0, "shuffled": 0.0}  # summed over every supervised token of every example
    for start in range(0, len(order), batch_size):
        batch = batcher.batch(order[start : start + batch_size]).to(device)
        output = model(batch, sample_generator)
        size = len(batch.index)
        rows.append(batch.index.cpu().numpy())
        features.append(output.posterior.cpu().numpy())
        if output.posterior_logvar is not None:
            logvars.append(output.posterior_logvar.cpu().numpy())
        kl_total += output.kl.item() * size
        example_nll = zero_padding(output.token_nll, batch.mask).sum(dim=-1)  # [S, B]
        nll_total["expected"] += posterior_expectation(example_nll, output.sample_weights).sum().item()
        latent = output.mode_latent
        shuffled = latent[torch.randperm(len(latent), generator=shuffle_generator).to(device)]
        for kind, z in (("own", latent), ("shuffled", shuffled)):
            nll_total[kind] += torch.where(batch.mask, token_nll(model.decoder(batch, z), batch.y), 0.0).sum().item()
        supervised += batch.num_supervised
        for name, value in (score(output, batch) if score else {}).items():
            scored[name] = scored.get(name, 0.0) + value * size
    index = np.concatenate(rows)
    restore = np.argsort(index)
    n = len(index)
    return {
        "features": np.concatenate(features)[restore],
        "logvar": np.concatenate(logvars)[restore] if logvars else None,
        "kl": kl_total / n,
        "recon_nll_per_token": nll_total["expected"] / supervised,
        "recon_nll_per_example": nll_total["expected"] / n,
        "nll_per_token": nll_total["own"] / supervised,
        "shuffled_nll_per_token": nll_total["shuffled"] / supervised,
        "nll_per_example": nll_total["own"] / n,
        "shuffled_nll_per_example": nll_total["shuffled"] / n,
        "scored": {name: total / n for name, total in scored.items()},
    }


def probe_accuracy(features: np.ndarray, labels: np.ndarray, seed: int) -> float | None:
    """Held-out accuracy of a linear probe (logistic regression, stratified k-fold, k <= 5)."""
    counts = Counter(labels)
    folds = min(5, min(counts.values()))
    if len(counts) < 2 or folds < 2:
        return None
    probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))  # scaled: near-uniform q still differs
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return float(cross_val_score(probe, features, labels, cv=cv).mean())


def cluster_agreement(labels: np.ndarray, assigned: np.ndarray) -> dict[str, float]:
    """NMI and AMI of the assigned codes (or clusters) against the labels."""
    return {
        "nmi": float(normalized_mutual_info_score(labels, assigned)),
        "ami": float(adjusted_mutual_info_score(labels, assigned)),
    }


def separation(assigned: np.ndarray, features: np.ndarray, strategy: np.ndarray, information: StrategyInformation, seed: int) -> dict:
    """strategy_information from the posterior itself; NMI, AMI and ARI of the argmax codes (or the k-means clusters of
    E_q[z]); the probe's accuracy from the posterior features."""
    rows = np.arange(len(strategy))
    if len(set(strategy)) < 2:
        return {"n": len(strategy), "strategy_information": None, "nmi": None, "ami": None, "ari": None, "probe_accuracy": None}
    return {
        "n": len(strategy),
        "strategy_information": information(rows, strategy),
        **cluster_agreement(strategy, assigned),
        "ari": float(adjusted_rand_score(strategy, assigned)),
        "probe_accuracy": probe_accuracy(features, strategy, seed),
    }


def length_buckets(frame: pd.DataFrame) -> pd.Series:
    """Each record's y-length bucket ('y_length 3-9'): LENGTH_BUCKETS quantile bins of the split's lengths, or one bucket
    per length when the split has fewer distinct lengths than that."""
    if frame["y_length"].nunique() < LENGTH_BUCKETS:
        return frame["y_length"].map(lambda length: f"y_length {length}-{length}")
    buckets = pd.qcut(frame["y_length"], LENGTH_BUCKETS, duplicates="drop")
    return buckets.map(lambda interval: f"y_length {interval.left:.0f}-{interval.right:.0f}").astype(str)


def separation_report(assigned: np.ndarray, features: np.ndarray, information: StrategyInformation, frame: pd.DataFrame, seed: int) -> dict:
    """Strategy separation overall, within each task, within y-length buckets, and against shuffled labels."""
    strategy = frame["strategy"].to_numpy()
    shuffled = np.random.default_rng([seed, 2]).permutation(strategy)

    def within(rows: np.ndarray) -> dict:
        return separation(assigned[rows], features[rows], strategy[rows], lambda sub, labels: information(rows[sub], labels), seed)

    return {
        "overall": separation(assigned, features, strategy, information, seed),
        "shuffled_label_baseline": cluster_agreement(shuffled, assigned),
        "within_task": {task: within(rows) for task, rows in frame.groupby("task").indices.items()},
        "within_length_bucket": {bucket: within(rows) for bucket, rows in frame.groupby(length_buckets(frame), sort=False).indices.items()},
    }


def sample_report(model, latents: torch.Tensor, records: Records, batcher: RecordBatcher, prompts: int, seed: int, device) -> dict:
    """Per code: samples of y for the same test prompts; parse rate, answer accuracy, strategy consistency.

    by_length_bucket pools the codes: the parse rate and answer accuracy of the samples whose prompt's
    reference y falls in each length bucket (a confound: length may go with parse success).
    """
    frame = records.frame
    chosen = np.sort(np.random.default_rng([seed, 3]).choice(len(frame), size=min(prompts, len(frame)), replace=False))
    bucket_of = length_buckets(frame).to_numpy()
    batch = batcher.batch(chosen).to(device)
    generator = torch.Generator(device=device).manual_seed(seed)
    max_new = int(frame["y_length"].max()) + 8
    eos = records.token_id(EOS)
    per_code, by_bucket = [], {}
    for code, latent in enumerate(latents):
        outputs = sample_outputs(
            model.decoder, batch, latent.expand(len(chosen), -1), eos_id=eos, max_new_tokens=max_new, generator=generator
        )
        parsed, correct = [], 0
        for row, y in zip(chosen, outputs, strict=True):
            tally = by_bucket.setdefault(bucket_of[row], {"samples": 0, "parsed": 0, "correct": 0})
            tally["samples"] += 1
            try:
                result = parse_output(frame["task"].iat[row], [records.vocab[t] for t in y])
            except ParseError:
                continue
            is_correct = result.answer == frame["answer"].iat[row]
            parsed.append(result.strategy)
            correct += is_correct
            tally["parsed"] += 1
            tally["correct"] += is_correct
        counts = Counter(parsed)
        majority, majority_count = counts.most_common(1)[0] if counts else (None, 0)
        per_code.append(
            {
                "code": code,
                "parse_rate": len(parsed) / len(chosen),
                "answer_accuracy": correct / len(chosen),
                "majority_strategy": majority,
                "strategy_consistency": majority_count / len(parsed) if parsed else None,
                "strategies": dict(counts),
            }
        )
    consistent = [c["strategy_consistency"] for c in per_code if c["strategy_consistency"] is not None]
    return {
        "prompts": len(chosen),
        "per_code": per_code,
        "parse_rate": float(np.mean([c["parse_rate"] for c in per_code])),
        "answer_accuracy": float(np.mean([c["answer_accuracy"] for c in per_code])),
        "strategy_consistency": float(np.mean(consistent)) if consistent else None,
        "by_length_bucket": {
            bucket: {"samples": t["samples"], "parse_rate": t["parsed"] / t["samples"], "answer_accuracy": t["correct"] / t["samples"]}
            for bucket, t in sorted(by_bucket.items(), key=lambda item: int(item[0].split()[1].split("-")[0]))
        },
    }


class NonFinitePosterior(NonFiniteLoss):
    """The posterior of a split is not finite: the model's weights diverged."""


def latent_summary(passed: dict, num_strategies: int, seed: int) -> tuple[dict, np.ndarray, np.ndarray | None, StrategyInformation]:
    """(usage, the cluster of each example, the k-means centroids or None, strategy information) from a posterior pass.

    The posterior's kind is the model output's (CVAEOutput): a categorical q over codes carries no log-variance, a
    Gaussian one does, whatever family produced it. Categorical: the argmax code, and q itself for the information.
    Gaussian: a k-means of E_q[z] with one cluster per strategy, and the Gaussian posteriors for the information.
    """
    features = passed["features"]
    if not np.isfinite(features).all() or (passed["logvar"] is not None and not np.isfinite(passed["logvar"]).all()):
        raise NonFinitePosterior(f"the posterior of the {len(features)} examples is not finite")
    if passed["logvar"] is None:
        return discrete_usage(features), features.argmax(axis=1), None, lambda rows, labels: discrete_information(features[rows], labels)
    kmeans = KMeans(n_clusters=num_strategies, n_init=10, random_state=seed).fit(features)

    def information(rows: np.ndarray, labels: np.ndarray) -> float | None:
        return continuous_information(features[rows], passed["logvar"][rows], labels, seed)

    return continuous_usage(features, passed["logvar"], seed), kmeans.labels_, kmeans.cluster_centers_, information


def shuffled_z_rise(passed: dict) -> dict:
    """How much the decoder NLL rises when each example gets another example's latent."""
    return {
        "shuffled_z_nll_rise_per_token": passed["shuffled_nll_per_token"] - passed["nll_per_token"],
        "shuffled_z_nll_rise_per_example": passed["shuffled_nll_per_example"] - passed["nll_per_example"],
    }


def evaluate(model, records: Records, batcher: RecordBatcher, *, seed: int, prompts_per_code: int, batch_size: int, device) -> dict:
    model.eval()
    passed = posterior_pass(model, batcher, batch_size, seed, device)
    usage, assigned, centroids, information = latent_summary(passed, records.frame["strategy"].nunique(), seed)
    if centroids is None:
        latents = model.codes(torch.arange(model.config.num_codes, device=device))
    else:
        latents = torch.as_tensor(centroids, dtype=torch.float32, device=device)
    latent_usage = {
        "kl": passed["kl"],
        **usage,
        "recon_nll_per_token": passed["recon_nll_per_token"],
        "recon_nll_per_example": passed["recon_nll_per_example"],
        "nll_per_token": passed["nll_per_token"],
        "shuffled_z_nll_per_token": passed["shuffled_nll_per_token"],
        **shuffled_z_rise(passed),
    }
    return {
        "split": records.split,
        "records": len(records),
        "latent_usage": latent_usage,
        "strategy_separation": separation_report(assigned, passed["features"], information, records.frame, seed),
        "samples": sample_report(model, latents, records, batcher, prompts_per_code, seed, device),
    }
