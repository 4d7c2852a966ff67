import json

import pytest

from core.disentanglement.artifacts import sha256_file
from core.disentanglement.config import AggregationMode
from core.disentanglement.scale_artifact import ScaleArtifactMismatch, build_scale_artifact, main, read_scale_artifact
from core.disentanglement.scores import read_scores, write_scores

MEAN, SUM = AggregationMode.MEAN, AggregationMode.SUM


@pytest.mark.parametrize("mode", list(AggregationMode))
def test_c_base_is_the_validation_mean_of_the_mode_aggregate(scored, mode):
    reference = build_scale_artifact(scored / "val.parquet", mode)
    arrays = [list(map(float, a)) for a in read_scores(scored / "val.parquet").frame.token_nll]
    per_example = [sum(a) / len(a) if mode == "mean" else sum(a) for a in arrays]
    assert reference["mode"] == mode
    assert reference["c_base"] == pytest.approx(sum(per_example) / len(per_example), rel=1e-12)
    assert reference["base_aggregate_min"] == pytest.approx(min(per_example), rel=1e-12)
    assert reference["n_examples"] == len(arrays)
    assert reference["token_count"]["max"] == max(map(len, arrays))


def test_sum_scale_is_about_mean_scale_times_token_count(scored):
    mean, total = build_scale_artifact(scored / "val.parquet", MEAN), build_scale_artifact(scored / "val.parquet", SUM)
    assert total["c_base"] > 2 * mean["c_base"]
    assert total["token_count"] == mean["token_count"]


def test_the_scale_artifact_refuses_training_scores(scored):
    with pytest.raises(ScaleArtifactMismatch, match="holds the 'train' split; c_base must come from 'val'"):
        build_scale_artifact(scored / "train.parquet", MEAN)


@pytest.fixture
def mean_artifact(scored, tmp_path):
    main(["--scores", str(scored / "val.parquet"), "--mode", "mean", "--out", str(tmp_path / "mean.json")])
    return tmp_path / "mean.json"


def edited(artifact, tmp_path, **changes):
    """A copy of the artifact with some fields changed by hand."""
    path = tmp_path / "edited.json"
    path.write_text(json.dumps({**json.loads(artifact.read_text()), **changes}))
    return path


def test_the_scale_artifact_of_the_runs_own_mode_and_scores_is_read(scored, mean_artifact):
    reference = read_scale_artifact(mean_artifact, mode=MEAN, scores_path=scored / "val.parquet")
    assert reference["mode"] == "mean" and reference["c_base"] == build_scale_artifact(scored / "val.parquet", MEAN)["c_base"]


def test_a_mean_artifact_given_to_a_sum_run_is_refused(scored, mean_artifact):
    with pytest.raises(ScaleArtifactMismatch, match=r"mean.json: mode: built in mode 'mean' but the run uses mode 'sum'"):
        read_scale_artifact(mean_artifact, mode=SUM, scores_path=scored / "val.parquet")


def test_a_mean_artifact_relabelled_sum_is_refused_by_the_recomputed_c_base(scored, mean_artifact, tmp_path):
    """The issue's case: one field changed ("mode": "sum") and a sum run trained on the mean-scale c_base."""
    relabelled = edited(mean_artifact, tmp_path, mode="sum")
    refusal = r"edited.json: c_base: .* disagrees with .* recomputed from .*val.parquet in mode 'sum'"
    with pytest.raises(ScaleArtifactMismatch, match=refusal):
        read_scale_artifact(relabelled, mode=SUM, scores_path=scored / "val.parquet")


@pytest.mark.parametrize("factor", [100.0, 1 + 1e-6])
def test_a_hand_edited_c_base_is_refused(scored, mean_artifact, tmp_path, factor):
    c_base = json.loads(mean_artifact.read_text())["c_base"]
    with pytest.raises(ScaleArtifactMismatch, match=r"edited.json: c_base: .* disagrees"):
        read_scale_artifact(edited(mean_artifact, tmp_path, c_base=c_base * factor), mode=MEAN, scores_path=scored / "val.parquet")


def test_an_artifact_of_other_scores_or_another_checkpoint_is_refused(scored, mean_artifact, tmp_path):
    scores = read_scores(scored / "val.parquet")
    rescored = tmp_path / "val.parquet"  # the same NLLs, from a checkpoint with another hash
    write_scores(scores.frame, rescored, split="val", metadata={**scores.metadata, "checkpoint_sha256": "0" * 64})
    with pytest.raises(ScaleArtifactMismatch, match=r"mean.json: scores_sha256: came from scores with sha256 .* but the run was given"):
        read_scale_artifact(mean_artifact, mode=MEAN, scores_path=rescored)
    other_checkpoint = edited(mean_artifact, tmp_path, scores_sha256=sha256_file(rescored))
    with pytest.raises(ScaleArtifactMismatch, match=r"edited.json: zfree_checkpoint_sha256 .* is not that of the checkpoint that scored"):
        read_scale_artifact(other_checkpoint, mode=MEAN, scores_path=rescored)


def test_an_unreadable_or_incomplete_artifact_is_refused(scored, tmp_path):
    (tmp_path / "broken.json").write_text(json.dumps({"mode": "mean"}))
    with pytest.raises(ScaleArtifactMismatch, match="broken.json lacks"):
        read_scale_artifact(tmp_path / "broken.json", mode=MEAN, scores_path=scored / "val.parquet")
    (tmp_path / "truncated.json").write_text('{"mode": "me')
    with pytest.raises(ScaleArtifactMismatch, match="truncated.json is not valid JSON"):
        read_scale_artifact(tmp_path / "truncated.json", mode=MEAN, scores_path=scored / "val.parquet")


def test_cli_refuses_unknown_mode_and_writes_nothing(scored, tmp_path):
    with pytest.raises(SystemExit, match=r"'Sum' is not allowed; allowed values: mean, sum"):
        main(["--scores", str(scored / "val.parquet"), "--mode", "Sum", "--out", str(tmp_path / "ref.json")])
    assert not list(tmp_path.iterdir())
