"""A training run's inputs, read and checked before anything is written to its run directory.

Nothing is taken on trust: the records, the z-free scores of the train and val
splits, the c_base file (whose c_base is recomputed from the val scores
in the run's own mode) and the warm-start checkpoint. Each refusal is one line
that names the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from core.disentanglement.artifacts import sha256_file
from core.disentanglement.batching import RecordBatcher, SpecialTokens
from core.disentanglement.records import Records, RecordsError, read_records
from core.disentanglement.scale_artifact import read_scale_artifact
from core.disentanglement.scores import check_scores_of, read_scores
from experiments.synthetic_sequences.splits import SCORED_SPLITS, SPLITS
from experiments.synthetic_sequences.training.settings import INPUT_PATHS, TrainConfig


def input_hashes(config: TrainConfig) -> dict[str, str]:
    """sha256 of every input file the run was given: what its metadata records and what a resume must match."""
    return {name: sha256_file(getattr(config.run, name)) for name in INPUT_PATHS if getattr(config.run, name)}


def check_one_checkpoint(scores: dict) -> None:
    """Train and val scores must come from one z-free checkpoint: the reference is built from the val scores, the
    token weights of training from the train scores."""
    train, val = (scores[split] for split in SCORED_SPLITS)
    hashes = {split: scores[split].metadata.get("checkpoint_sha256") for split in SCORED_SPLITS}
    if None in hashes.values():
        unnamed = next(scores[split].path for split, digest in hashes.items() if digest is None)
        raise RecordsError(f"scores file {unnamed}: provenance lacks checkpoint_sha256; was it written by 'zfree score'?")
    if hashes["train"] != hashes["val"]:
        raise RecordsError(
            f"scores file {train.path}: checkpoint_sha256 {hashes['train'][:12]}... differs from {val.path}'s "
            f"{hashes['val'][:12]}...; train and val must be scored by one z-free checkpoint"
        )


def check_one_block(config: TrainConfig, scores: dict, sha256: dict[str, str]) -> None:
    """Every input of the run's own reference block: scores of the z-free model of seed `zfree_seed`, and a warm start
    from the very checkpoint that scored them (its sha256, from the run's input hashes). The c_base file is bound
    to the val scores by read_scale_artifact."""
    val = scores["val"]
    recorded = val.metadata.get("zfree_seed")
    if recorded is not None and recorded != config.run.zfree_seed:
        raise RecordsError(
            f"scores file {val.path}: scored by the z-free model of seed {recorded}, but this run belongs to reference "
            f"block {config.run.zfree_seed}; a run reads its own block's scores, c_base and warm start only"
        )
    if config.run.init_decoder and sha256["init_decoder"] != val.metadata["checkpoint_sha256"]:
        raise RecordsError(
            f"init_decoder: {config.run.init_decoder} is not the z-free checkpoint that scored {val.path} "
            f"(sha256 {val.metadata['checkpoint_sha256'][:12]}...); a run warm-starts from its own block's model"
        )


@dataclass(frozen=True)
class RunInputs:
    scale: dict  # the checked c_base file (core/disentanglement/scale_artifact.py)
    records: dict[str, Records]  # by split
    batchers: dict[str, RecordBatcher]
    base: dict[str, tuple[torch.Tensor, torch.Tensor]]  # scored split -> z-free NLL b [N, T] and its mask
    sha256: dict[str, str]  # input_hashes: what the run's metadata records and a resume must match

    @property
    def mean_train_tokens(self) -> float:
        return float(self.records["train"].frame["y_length"].mean())


def load_inputs(config: TrainConfig) -> RunInputs:
    """Every input, read and checked; raises (FileNotFoundError, ValueError) before the run directory is touched."""
    for name in INPUT_PATHS:
        if getattr(config.run, name) and not Path(getattr(config.run, name)).is_file():
            raise FileNotFoundError(f"{name}: {getattr(config.run, name)} does not exist")
    sha256 = input_hashes(config)
    splits = {split: read_records(getattr(config.run, f"{split}_records")) for split in SPLITS}
    for split, records in splits.items():
        if records.split != split:
            raise RecordsError(f"records file {records.path}: split is {records.split!r}, but it was given as the {split!r} split")
        if records.vocab != splits["train"].vocab:
            raise RecordsError(f"records file {records.path}: vocab differs from that of {splits['train'].path}")
    scores = {split: read_scores(getattr(config.run, f"{split}_scores")) for split in SCORED_SPLITS}
    for split in SCORED_SPLITS:
        check_scores_of(scores[split], splits[split], split)
    check_one_checkpoint(scores)
    check_one_block(config, scores, sha256)
    scale = read_scale_artifact(config.run.reference, mode=config.mode, scores_path=config.run.val_scores)
    special = SpecialTokens.from_vocab(splits["train"].vocab)
    return RunInputs(
        scale=scale,
        records=splits,
        batchers={split: RecordBatcher(records.frame, special) for split, records in splits.items()},
        base={split: scores[split].padded(dtype=torch.float32) for split in SCORED_SPLITS},
        sha256=sha256,
    )
