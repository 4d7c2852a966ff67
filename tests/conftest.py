import subprocess
import sys

import pytest

from core.disentanglement.scale_artifact import main as scale_artifact_main
from core.disentanglement.zfree import ZFreeTrainConfig, score_records, train_zfree
from experiments.synthetic_sequences.generate import SequenceConfig, generate

# seed 0: the reference block (ref0) of the runs the tests train and extract
TINY = ZFreeTrainConfig(seed=0, steps=60, batch_size=32, eval_every=30, d_model=32, n_layer=1, n_head=2)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    generate(SequenceConfig(seed=0, n_train=400, n_val=120, n_test=60), out)
    return out


@pytest.fixture(scope="module")
def trained(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("zfree")
    summary = train_zfree(data_dir / "train.parquet", data_dir / "val.parquet", out / "model.pt", TINY, out / "log.jsonl")
    return out, summary


@pytest.fixture(scope="module")
def scored(data_dir, trained, tmp_path_factory):
    """z-free scores of the train and val splits."""
    out = tmp_path_factory.mktemp("scores")
    for split in ("train", "val"):
        score_records(trained[0] / "model.pt", data_dir / f"{split}.parquet", out / f"{split}.parquet")
    return out


@pytest.fixture(scope="module")
def references(scored, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    for mode in ("mean", "sum"):
        scale_artifact_main(["--scores", str(scored / "val.parquet"), "--mode", mode, "--out", str(out / f"{mode}.json")])
    return out


@pytest.fixture(scope="module")
def io_flags(data_dir, scored, references):
    def flags(mode, run_dir, reference_mode=None):
        return [
            *("--train-records", str(data_dir / "train.parquet"), "--val-records", str(data_dir / "val.parquet")),
            *("--test-records", str(data_dir / "test.parquet"), "--train-scores", str(scored / "train.parquet")),
            *("--val-scores", str(scored / "val.parquet"), "--reference", str(references / f"{reference_mode or mode}.json")),
            *("--reconstruction-loss-token-aggregation-mode", mode, "--run-dir", str(run_dir)),
        ]

    return flags


LOCK_HOLDER = "import sys, time; from pathlib import Path; from experiments.synthetic_sequences.training.run_lock import run_lock\n"
LOCK_HOLDER += "with run_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)\n"


def hold_run_lock(run_dir) -> subprocess.Popen:
    """Another process holding run_dir's trainer lock (kill it when done)."""
    process = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process
