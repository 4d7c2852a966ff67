"""The mode-matched reference scale c_base^a as a JSON artifact.

    python -m core.disentanglement.scale_artifact --scores results/zfree/scores/val.parquet \
        --mode sum --out results/reference/sum.json

c_base^a = E_{i in val}[A_a(b_i)] from validation scores only. The artifact
carries its mode and the sha256 of the scores it came from; read_scale_artifact
recomputes c_base from the run's own validation scores in the run's own mode
and refuses an artifact that disagrees in any of them, so a sum run can never
divide by a mean-scale (or hand-edited) reference.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from core.disentanglement.artifacts import sha256_file, write_json
from core.disentanglement.config import AGGREGATION_MODES, AggregationMode, check_aggregation_mode, parse_aggregation_mode
from core.disentanglement.losses import aggregate_tokens, reference_scale
from core.disentanglement.scores import read_scores

REFERENCE_SPLIT = "val"
C_BASE_TOLERANCE = 1e-9  # relative: the recomputation repeats the same float64 sums, so only JSON's round trip may differ


class ScaleArtifactMismatch(ValueError):
    """A c_base file that does not belong to the run that asked for it."""


def build_scale_artifact(scores_path: str | Path, mode: AggregationMode) -> dict:
    mode = check_aggregation_mode(mode)
    scores = read_scores(scores_path)
    if scores.split != REFERENCE_SPLIT:
        raise ScaleArtifactMismatch(
            f"scores file {scores.path} holds the {scores.split!r} split; c_base must come from {REFERENCE_SPLIT!r} records only"
        )
    base_nll, mask = scores.padded()
    c_base = float(reference_scale(base_nll, mask, mode))  # float64 throughout
    if not c_base > 0:
        raise ScaleArtifactMismatch(f"scores file {scores.path}: token_nll is 0 everywhere, so c_base is 0 and no term can divide by it")
    counts = scores.frame["n"]
    return {
        "mode": mode.value,
        "c_base": c_base,
        "base_aggregate_min": float(aggregate_tokens(base_nll, mask, mode).min()),
        "n_examples": len(scores.frame),
        "token_count": {"mean": float(counts.mean()), "min": int(counts.min()), "max": int(counts.max())},
        "split": scores.split,
        "scores": str(scores.path),
        "scores_sha256": sha256_file(scores.path),
        "zfree_checkpoint_sha256": scores.metadata.get("checkpoint_sha256"),
        "zfree_seed": scores.metadata.get("zfree_seed"),  # its reference block (None for an entangled run's checkpoint)
    }


def read_scale_artifact(path: str | Path, *, mode: AggregationMode, scores_path: str | Path) -> dict:
    """The artifact at `path`, checked rather than trusted: c_base^a is recomputed from `scores_path` in `mode`, and the
    artifact's mode, scores sha256, z-free checkpoint sha256 and c_base (relative 1e-9) must agree with the recomputation.

    Every refusal is one line naming the file and the field.
    """
    mode = check_aggregation_mode(mode)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"c_base file {path} does not exist")
    try:
        reference = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ScaleArtifactMismatch(f"c_base file {path} is not valid JSON: {err}") from err
    missing = [key for key in ("mode", "c_base", "scores_sha256", "zfree_checkpoint_sha256") if key not in reference]
    if not isinstance(reference, dict) or missing:
        raise ScaleArtifactMismatch(f"c_base file {path} lacks {missing or 'a JSON object'}")
    if reference["mode"] != mode.value:
        raise ScaleArtifactMismatch(
            f"c_base file {path}: mode: built in mode {reference['mode']!r} but the run uses mode {mode.value!r}; "
            f"c_base must be recomputed with the run's mode (reference/{mode.value}.json)"
        )
    expected = build_scale_artifact(scores_path, mode)
    if reference["scores_sha256"] != expected["scores_sha256"]:
        raise ScaleArtifactMismatch(
            f"c_base file {path}: scores_sha256: came from scores with sha256 {reference['scores_sha256']}, "
            f"but the run was given {scores_path} with sha256 {expected['scores_sha256']}"
        )
    if reference["zfree_checkpoint_sha256"] != expected["zfree_checkpoint_sha256"]:
        raise ScaleArtifactMismatch(
            f"c_base file {path}: zfree_checkpoint_sha256 {reference['zfree_checkpoint_sha256']} is not that of "
            f"the checkpoint that scored {scores_path} ({expected['zfree_checkpoint_sha256']})"
        )
    c_base = reference["c_base"]
    if not isinstance(c_base, int | float) or not math.isclose(c_base, expected["c_base"], rel_tol=C_BASE_TOLERANCE, abs_tol=0.0):
        raise ScaleArtifactMismatch(
            f"c_base file {path}: c_base: {c_base!r} disagrees with {expected['c_base']!r} recomputed from {scores_path} "
            f"in mode {mode.value!r} (relative tolerance {C_BASE_TOLERANCE:g}); rebuild the artifact"
        )
    return reference


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scores", required=True, help="z-free scores of the validation split")
    parser.add_argument("--mode", required=True, help=f"reconstruction_loss_token_aggregation_mode ({', '.join(AGGREGATION_MODES)})")
    parser.add_argument("--out", required=True, help="output JSON artifact")
    args = parser.parse_args(argv)
    try:
        reference = build_scale_artifact(args.scores, parse_aggregation_mode(args.mode, "--mode"))
    except (ValueError, FileNotFoundError) as err:
        sys.exit(f"error: {err}")
    write_json(reference, args.out)
    print(f"c_base[{reference['mode']}] = {reference['c_base']:.6g} over {reference['n_examples']} validation records", file=sys.stderr)


if __name__ == "__main__":
    main()
