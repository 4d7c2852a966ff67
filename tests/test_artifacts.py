import json
import os
import stat

import pytest

from core.disentanglement.artifacts import atomic_path, write_json


def test_an_artifact_appears_whole_with_the_permissions_of_a_plain_file(tmp_path):
    old_umask = os.umask(0o022)
    try:
        write_json({"c_base": 1.5}, tmp_path / "reference.json")
    finally:
        os.umask(old_umask)
    path = tmp_path / "reference.json"
    assert json.loads(path.read_text()) == {"c_base": 1.5}
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # readable by the group, as on a shared cluster
    assert [p.name for p in tmp_path.iterdir()] == ["reference.json"]  # no temporary file left


def test_a_failed_write_leaves_neither_the_artifact_nor_a_temporary_file(tmp_path):
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "scores.parquet") as tmp:
        tmp.write_text("half")
        raise RuntimeError("bad input")
    assert list(tmp_path.iterdir()) == []
