"""The mode-matched reference scale c_base^a as a JSON artifact.

    python -m core.disentanglement.reference --scores results/zfree/scores/val.parquet \
        --mode sum --out results/reference/sum.json

c_base^a = E_{i in val}[A_a(b_i)] from validation scores only. The artifact
carries its mode and the sha256 of the scores it came from; read_reference
refuses one whose mode or scores differ from what a run expects, so a sum run
can never divide by a mean-scale reference.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from core.disentanglement.artifacts import sha256_file, write_json
from core.disentanglement.config import AGGREGATION_MODES, AggregationMode, parse_aggregation_mode
from core.disentanglement.losses import aggregate_tokens
from core.disentanglement.scores import read_scores

REFERENCE_SPLIT = "val"


class ReferenceMismatch(ValueError):
    """A reference artifact that does not belong to the run that asked for it."""


def build_reference(scores_path: str | Path, mode: AggregationMode | str) -> dict:
    mode = parse_aggregation_mode(mode)
    scores = read_scores(scores_path)
    if scores.split != REFERENCE_SPLIT:
        raise ReferenceMismatch(
            f"scores file {scores.path} holds the {scores.split!r} split; c_base must come from {REFERENCE_SPLIT!r} records only"
        )
    base_nll, mask = scores.padded()
    per_example = aggregate_tokens(base_nll, mask, mode)  # A_a(b_i), float64
    counts = scores.frame["n"]
    return {
        "mode": mode.value,
        "c_base": float(per_example.mean()),
        "base_aggregate_min": float(per_example.min()),
        "n_examples": len(scores.frame),
        "token_count": {"mean": float(counts.mean()), "min": int(counts.min()), "max": int(counts.max())},
        "split": scores.split,
        "scores": str(scores.path),
        "scores_sha256": sha256_file(scores.path),
        "zfree_checkpoint_sha256": scores.metadata.get("checkpoint_sha256"),
    }


def read_reference(path: str | Path, *, mode: AggregationMode | str, scores_path: str | Path | None = None) -> dict:
    """The artifact at `path`, after checking it was built in `mode` (and from `scores_path`, when given)."""
    mode = parse_aggregation_mode(mode)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"reference artifact {path} does not exist")
    try:
        reference = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ReferenceMismatch(f"reference artifact {path} is not valid JSON: {err}") from err
    missing = [key for key in ("mode", "c_base", "scores_sha256") if key not in reference]
    if missing:
        raise ReferenceMismatch(f"reference artifact {path} lacks {missing}")
    if reference["mode"] != mode.value:
        raise ReferenceMismatch(
            f"reference artifact {path} was built in mode {reference['mode']!r} but the run uses mode {mode.value!r}; "
            f"c_base must be recomputed with the run's mode (reference/{mode.value}.json)"
        )
    if scores_path is not None:
        actual = sha256_file(scores_path)
        if actual != reference["scores_sha256"]:
            raise ReferenceMismatch(
                f"reference artifact {path} came from scores with sha256 {reference['scores_sha256']}, "
                f"but the run was given {scores_path} with sha256 {actual}"
            )
    return reference


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scores", required=True, help="z-free scores of the validation split")
    parser.add_argument("--mode", required=True, help=f"reconstruction_loss_token_aggregation_mode ({', '.join(AGGREGATION_MODES)})")
    parser.add_argument("--out", required=True, help="output JSON artifact")
    args = parser.parse_args(argv)
    try:
        reference = build_reference(args.scores, args.mode)
    except (ValueError, FileNotFoundError) as err:
        sys.exit(f"error: {err}")
    write_json(reference, args.out)
    print(f"c_base[{reference['mode']}] = {reference['c_base']:.6g} over {reference['n_examples']} validation records", file=sys.stderr)


if __name__ == "__main__":
    main()
