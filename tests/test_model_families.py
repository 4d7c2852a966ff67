"""A model family is a module and a registry entry: a toy family registered so trains through the grid and the trainer,
and its runs extract like any other's."""

import json
import subprocess
import sys
from pathlib import Path

from experiments.synthetic_sequences.run_layout import RUN_OUTPUTS, RunLayout

TESTS = Path(__file__).resolve().parent

TRAIN_A_TOY_FAMILY = """
import json, sys
import toy_family
toy_family.register()  # before the trainer's settings are imported, as an entry in registry.py is
from experiments.synthetic_sequences.analysis.records.metrics_files import run_metrics
from experiments.synthetic_sequences.planning.grid import expand_grid
from experiments.synthetic_sequences.training.cvae_run import train

paths, out = json.loads(sys.argv[1]), sys.argv[2]
settings = {"steps": 4, "eval_every": 2, "log_every": 2, "batch_size": 16, "d_model": 32, "n_layer": 1, "n_head": 2,
            "toy_codes": 2, "eval_prompts_per_code": 2}
families = {"toy-fam": {"model": "toy", "beta": 0.1, "settings": settings, "runs": [{"term": "raw", "modes": ["sum"]}]}}
specs = expand_grid(families, 2)
train([spec.train_config(**paths, run_dir=f"{out}/{spec.path}") for spec in specs])
print(json.dumps({spec.path: sorted(set(run_metrics(f"{out}/{spec.path}").metric)) for spec in specs}))
"""


def test_a_registered_toy_family_trains_through_the_grid_and_the_trainer(data_dir, scored, references, tmp_path):
    paths = {
        **{f"{split}_records": str(data_dir / f"{split}.parquet") for split in ("train", "val", "test")},
        **{f"{split}_scores": str(scored / f"{split}.parquet") for split in ("train", "val")},
        "reference": str(references / "sum.json"),
    }
    result = subprocess.run(
        [sys.executable, "-c", TRAIN_A_TOY_FAMILY, json.dumps(paths), str(tmp_path)],
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    extracted = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(extracted) == ["toy-fam/ref0/raw_sum_0/seed0", "toy-fam/ref0/raw_sum_0/seed1"]
    for path, metrics in extracted.items():
        layout = RunLayout(tmp_path / path)
        assert all(layout.outputs[name].is_file() for name in RUN_OUTPUTS)
        model = json.loads(layout.run_config.read_text())["model"]
        assert (model["model"], model["latent"]) == ("toy", {"toy_codes": 2})  # the toy's own settings, and no other family's
        usage = json.loads(layout.evaluation.read_text())["latent_usage"]
        assert usage["codes_used"] <= 2  # its two codes: read as a categorical posterior
        assert {"mutual_information", "strategy_information", "took_up"} <= set(metrics)
