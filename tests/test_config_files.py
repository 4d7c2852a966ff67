"""Config files are read strictly: a key written twice is refused; merge keys and aliases still read."""

import re
from pathlib import Path

import pytest
import yaml

from experiments.synthetic_sequences.planning.config_files import (
    SHIPPED,
    DuplicateKeyError,
    check_config_files,
    check_integers,
    drop_removed_families,
)

ROOT = Path(__file__).resolve().parents[1]


def test_every_shipped_config_file_reads_strictly():
    check_config_files([ROOT / "config" / name for name in SHIPPED])


def test_a_nested_key_written_twice_is_refused_with_both_lines(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("families:\n  discrete: {steps: 1}\n  other: 2\n  discrete:\n    steps: 3\n")
    with pytest.raises(DuplicateKeyError, match=rf"config file {path}: key 'discrete' is written twice in one mapping \(lines 2 and 4\)"):
        check_config_files([path])


def test_a_merge_key_override_is_not_a_duplicate(tmp_path):
    path = tmp_path / "c.yaml"
    text = "base: &base {steps: 1, lr: 0.1}\nfamily:\n  <<: *base\n  steps: 5\n"
    path.write_text(text)
    check_config_files([path])
    assert yaml.safe_load(text)["family"] == {"steps": 5, "lr": 0.1}


SCHEMA = Path(__file__).resolve().parents[1] / "config" / "schema" / "config.schema.yaml"


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"seeds": 2.0}, "seeds = 2.0"),
        ({"seeds_per_job": 2.0}, "seeds_per_job = 2.0"),
        ({"seeds": [0, 1.0]}, "seeds[1] = 1.0"),
        ({"data": {"n_test": 50.0}}, "data.n_test = 50.0"),
        ({"families": {"f": {"seeds": 3.0}}}, "families.f.seeds = 3.0"),
        ({"resources": {"train_run": {"runtime": 15.0}}}, "resources.train_run.runtime = 15.0"),
    ],
)
def test_a_count_written_as_a_float_is_refused_naming_its_key(config, named):
    with pytest.raises(ValueError, match=re.escape(named) + r".*a count must be a whole number"):
        check_integers(config, SCHEMA)


def test_numbers_that_may_be_floats_and_true_integers_pass():
    check_integers({"seeds": 2, "data": {"length_overlap": 0.5, "n_test": 50}, "families": {"f": {"beta": 1.0, "seeds": [0, 1]}}}, SCHEMA)


def test_a_family_set_to_null_in_a_later_config_file_is_removed():
    config = {"families": {"main": {"model": "m"}, "main-scale": None, "main-balance": None}}
    assert drop_removed_families(config) == ["main-scale", "main-balance"]
    assert config == {"families": {"main": {"model": "m"}}}
