"""Config files are read strictly: a key written twice is refused; merge keys and aliases still read."""

from pathlib import Path

import pytest
import yaml

from experiments.synthetic_sequences.planning.config_files import DuplicateKeyError, check_config_files

ROOT = Path(__file__).resolve().parents[1]


def test_every_shipped_config_file_reads_strictly():
    check_config_files(sorted((ROOT / "config").glob("*.yaml")))


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
