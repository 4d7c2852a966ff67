import math

import numpy as np
import pytest
import torch
from conftest import TINY

from core.disentanglement.batching import RecordBatcher, SpecialTokens, bucketed_batches, collate
from core.disentanglement.decoder import Decoder, DecoderConfig, token_nll
from core.disentanglement.records import RecordsError, read_records, write_records
from core.disentanglement.scores import read_scores
from core.disentanglement.zfree import ZFreeTrainConfig, load_decoder, main, score_records, train_zfree
from experiments.synthetic_sequences.generate import SequenceConfig, generate, generate_split
from experiments.synthetic_sequences.tasks import VOCAB


def test_training_writes_checkpoint_summary_and_log(trained):
    out, summary = trained
    assert (out / "model.pt").is_file() and (out / "model.json").is_file()
    assert len((out / "log.jsonl").read_text().splitlines()) == 2
    assert summary["uniform_nll_per_token"] == pytest.approx(math.log(len(VOCAB)))
    assert summary["val_nll_per_token"] < summary["uniform_nll_per_token"]
    assert not list(out.glob(".*.tmp"))


def test_same_seed_gives_identical_weights_and_scores(data_dir, trained, tmp_path):
    out, _ = trained
    train_zfree(data_dir / "train.parquet", data_dir / "val.parquet", tmp_path / "again.pt", TINY)
    first, second = load_decoder(out / "model.pt")[1]["state_dict"], load_decoder(tmp_path / "again.pt")[1]["state_dict"]
    assert all(torch.equal(first[k], second[k]) for k in first)
    score_records(out / "model.pt", data_dir / "val.parquet", tmp_path / "a.parquet")
    score_records(tmp_path / "again.pt", data_dir / "val.parquet", tmp_path / "b.parquet")
    a, b = read_scores(tmp_path / "a.parquet").frame, read_scores(tmp_path / "b.parquet").frame
    assert all(np.array_equal(x, y) for x, y in zip(a.token_nll, b.token_nll, strict=True))


def test_scores_align_with_records_and_match_unbatched_forward(data_dir, trained, tmp_path):
    out, _ = trained
    score_records(out / "model.pt", data_dir / "val.parquet", tmp_path / "val.parquet", batch_size=17)
    scores, records = read_scores(tmp_path / "val.parquet"), read_records(data_dir / "val.parquet")
    assert scores.split == "val"
    assert scores.frame.id.tolist() == records.frame.id.tolist()
    assert scores.frame.n.tolist() == records.frame.y_length.tolist()
    model, _ = load_decoder(out / "model.pt")
    special = SpecialTokens.from_vocab(records.vocab)
    for i in (0, 5, 77):
        single = collate([records.frame.x[i]], [records.frame.y[i]], [i], special)
        with torch.inference_mode():
            expected = token_nll(model(single), single.y)[0].numpy()
        np.testing.assert_allclose(scores.frame.token_nll[i], expected, rtol=1e-4, atol=1e-5)
    b, mask = scores.padded()
    assert mask.sum(1).tolist() == scores.frame.n.tolist() and bool((b[mask] > 0).all())


def test_padding_never_changes_a_prediction():
    torch.manual_seed(0)
    model = Decoder(DecoderConfig(vocab_size=len(VOCAB), d_model=32, n_layer=2, n_head=2)).eval()
    special = SpecialTokens.from_vocab(VOCAB)
    x, y = [15, 4, 5], [4, 5, 14, 6, 3]
    alone = collate([x], [y], [0], special)
    padded = collate([x, [15] + [4] * 20], [y, [4] * 30], [0, 1], special)
    with torch.inference_mode():
        torch.testing.assert_close(model(alone)[0], model(padded)[0, : len(y)], rtol=1e-5, atol=1e-5)


def test_latent_conditions_every_prediction_and_is_checked():
    torch.manual_seed(0)
    special = SpecialTokens.from_vocab(VOCAB)
    batch = collate([[15, 4]], [[4, 3]], [0], special)
    conditioned = Decoder(DecoderConfig(vocab_size=len(VOCAB), d_model=32, n_layer=1, n_head=2, latent_dim=3))
    a = conditioned(batch, torch.tensor([[1.0, 0.0, 0.0]]))
    b = conditioned(batch, torch.tensor([[0.0, 1.0, 0.0]]))
    assert (a - b).abs().amax(-1).min() > 0
    with pytest.raises(ValueError, match="latent_dim=3 got latent=None"):
        conditioned(batch)
    with pytest.raises(ValueError, match="latent_dim=0"):
        Decoder(DecoderConfig(vocab_size=len(VOCAB), d_model=32, n_layer=1, n_head=2))(batch, torch.zeros(1, 3))


def test_bucketing_keeps_padding_small(data_dir):
    records = read_records(data_dir / "train.parquet")
    batcher = RecordBatcher(records.frame, SpecialTokens.from_vocab(records.vocab))
    assert batcher.padding_share(32) < 0.15
    batches = bucketed_batches(batcher.lengths, 32, np.random.default_rng(0))
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(batcher)))


def test_checkpoint_problems_are_clear_errors(data_dir, trained, tmp_path):
    out, _ = trained
    with pytest.raises(FileNotFoundError, match="missing.pt does not exist"):
        load_decoder(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt could not be loaded"):
        load_decoder(tmp_path / "junk.pt")
    checkpoint = torch.load(out / "model.pt", weights_only=True)
    torch.save({**checkpoint, "decoder_config": {**checkpoint["decoder_config"], "d_model": 48}}, tmp_path / "mismatch.pt")
    with pytest.raises(ValueError, match="mismatch.pt: weights do not match"):
        load_decoder(tmp_path / "mismatch.pt")
    torch.save({"state_dict": checkpoint["state_dict"]}, tmp_path / "bare.pt")
    with pytest.raises(ValueError, match="bare.pt lacks"):
        load_decoder(tmp_path / "bare.pt")


def test_scoring_refuses_records_in_another_vocabulary_and_writes_nothing(data_dir, trained, tmp_path):
    out, _ = trained
    frame = generate_split(SequenceConfig(n_val=10), "val")
    write_records(frame, tmp_path / "other.parquet", vocab=[*VOCAB, "EXTRA"], split="val", metadata={})
    with pytest.raises(RecordsError, match="other.parquet has a vocabulary of 24 tokens that differs from checkpoint"):
        score_records(out / "model.pt", tmp_path / "other.parquet", tmp_path / "scores.parquet")
    assert not list(tmp_path.glob("*scores.parquet*"))


def test_cli_reports_errors_without_traceback(tmp_path, capsys):
    with pytest.raises(SystemExit, match="records file .*nope.parquet does not exist"):
        main(
            [
                "train",
                "--train",
                str(tmp_path / "nope.parquet"),
                "--val",
                str(tmp_path / "nope.parquet"),
                "--checkpoint",
                str(tmp_path / "m.pt"),
            ]
        )
    with pytest.raises(SystemExit, match="steps: 0 is not allowed"):
        main(["train", "--train", "a", "--val", "b", "--checkpoint", str(tmp_path / "m.pt"), "--steps", "0"])
    assert not (tmp_path / "m.pt").exists()


@pytest.mark.slow
def test_default_size_model_learns_far_below_uniform(tmp_path):
    generate(SequenceConfig(seed=0, n_train=2000, n_val=300, n_test=40), tmp_path)  # n_test: the least evaluation takes
    config = ZFreeTrainConfig(seed=0, steps=600, batch_size=64, eval_every=600)
    summary = train_zfree(tmp_path / "train.parquet", tmp_path / "val.parquet", tmp_path / "model.pt", config)
    assert summary["val_nll_per_token"] < 0.5 * summary["uniform_nll_per_token"]
