import json

import pytest

from core.disentanglement.reference import ReferenceMismatch, build_reference, main, read_reference
from core.disentanglement.scores import read_scores


@pytest.mark.parametrize("mode", ["mean", "sum"])
def test_c_base_is_the_validation_mean_of_the_mode_aggregate(scored, mode):
    reference = build_reference(scored / "val.parquet", mode)
    arrays = [list(map(float, a)) for a in read_scores(scored / "val.parquet").frame.token_nll]
    per_example = [sum(a) / len(a) if mode == "mean" else sum(a) for a in arrays]
    assert reference["mode"] == mode
    assert reference["c_base"] == pytest.approx(sum(per_example) / len(per_example), rel=1e-12)
    assert reference["base_aggregate_min"] == pytest.approx(min(per_example), rel=1e-12)
    assert reference["n_examples"] == len(arrays)
    assert reference["token_count"]["max"] == max(map(len, arrays))


def test_sum_scale_is_about_mean_scale_times_token_count(scored):
    mean, total = build_reference(scored / "val.parquet", "mean"), build_reference(scored / "val.parquet", "sum")
    assert total["c_base"] > 2 * mean["c_base"]
    assert total["token_count"] == mean["token_count"]


def test_reference_refuses_training_scores(scored):
    with pytest.raises(ReferenceMismatch, match="holds the 'train' split; c_base must come from 'val'"):
        build_reference(scored / "train.parquet", "mean")


def test_read_reference_refuses_mode_and_scores_mismatch(scored, tmp_path):
    main(["--scores", str(scored / "val.parquet"), "--mode", "mean", "--out", str(tmp_path / "mean.json")])
    assert read_reference(tmp_path / "mean.json", mode="mean", scores_path=scored / "val.parquet")["mode"] == "mean"
    with pytest.raises(ReferenceMismatch, match="built in mode 'mean' but the run uses mode 'sum'"):
        read_reference(tmp_path / "mean.json", mode="sum")
    with pytest.raises(ReferenceMismatch, match="came from scores with sha256 .* but the run was given .*train.parquet"):
        read_reference(tmp_path / "mean.json", mode="mean", scores_path=scored / "train.parquet")
    (tmp_path / "broken.json").write_text(json.dumps({"mode": "mean"}))
    with pytest.raises(ReferenceMismatch, match="lacks"):
        read_reference(tmp_path / "broken.json", mode="mean")


def test_cli_refuses_unknown_mode_and_writes_nothing(scored, tmp_path):
    with pytest.raises(SystemExit, match=r"'Sum' is not allowed; allowed values: mean, sum"):
        main(["--scores", str(scored / "val.parquet"), "--mode", "Sum", "--out", str(tmp_path / "ref.json")])
    assert not list(tmp_path.iterdir())
