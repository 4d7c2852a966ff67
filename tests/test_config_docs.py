"""config/README.md is generated from the schema and the config files: it is current, every key is described, every
shipped config is listed, and every default it states is the one the code applies."""

import ast
import functools
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from snakemake.common.configfile import load_configfile
from snakemake.utils import update_config

from experiments.synthetic_sequences.arms import TAKE_UP
from experiments.synthetic_sequences.generate import SequenceConfig
from experiments.synthetic_sequences.planning import config_docs
from experiments.synthetic_sequences.planning.config_docs import (
    COMMAND,
    current,
    header_fields,
    merged_config,
    schema_keys,
)
from experiments.synthetic_sequences.planning.config_files import SHIPPED, drop_removed_families, read_configs
from experiments.synthetic_sequences.planning.endpoints import declared_primary
from experiments.synthetic_sequences.planning.grid import expand_grid, family_seeds, resolve_blocks, run_betas
from experiments.synthetic_sequences.sequential.curve_design import parse_curve_design
from experiments.synthetic_sequences.sequential.design import parse_design

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "config" / "README.md"
SCHEMA = yaml.safe_load((ROOT / "config" / "schema" / "config.schema.yaml").read_text())
# where the rules' defaults are applied: the plan (planning/plan*.py) and the rules that ask it
PLANNING = ROOT / "experiments" / "synthetic_sequences" / "planning"
RULES = "\n".join(path.read_text() for path in [*sorted(PLANNING.glob("plan*.py")), *sorted((ROOT / "rules").glob("*.smk"))])


def test_config_readme_is_what_the_schema_and_the_config_files_give():
    assert README.read_text() == current(), f"config/README.md is out of date; regenerate it: {COMMAND}"


def test_the_cli_writes_the_file_and_check_refuses_a_stale_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(config_docs, "OUTPUT", tmp_path / "README.md")
    monkeypatch.setattr(config_docs, "ROOT", tmp_path)
    assert config_docs.main(["--check"]) == 1  # no file yet
    assert config_docs.main([]) == 0
    assert (tmp_path / "README.md").read_text() == current()
    assert config_docs.main(["--check"]) == 0
    (tmp_path / "README.md").write_text(current().replace("| 40 |", "| 41 |"))
    assert config_docs.main(["--check"]) == 1
    assert f"README.md is not what the schema and the config files give; regenerate it: {COMMAND}" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["README.md"]  # no temporary file left


def test_the_shipped_list_is_the_config_files_git_tracks():
    git = subprocess.run(["git", "ls-files", ":(glob)config/*.yaml"], cwd=ROOT, capture_output=True, text=True)
    if git.returncode != 0:
        pytest.skip("not a git checkout: nothing says which config files are tracked")
    assert sorted(Path(line).name for line in git.stdout.split()) == sorted(SHIPPED)


def test_a_users_own_config_file_beside_the_shipped_ones_is_neither_read_nor_documented(tmp_path):
    for name, text in read_configs().items():
        (tmp_path / name).write_text(text)
    (tmp_path / "mine.yaml").write_text("families: [not, a, map\n")  # not even YAML
    assert read_configs(tmp_path) == read_configs()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("results: r\nfamilies:\n  a: [1\n  b: 2\n", r"pilot.yaml, line 4, column 4: a shipped config file that cannot be read as YAML: "),
        (b"\xff\xfe", r"pilot.yaml: a shipped config file that cannot be read as YAML: 'utf-8' codec can't decode"),
        (None, r"pilot.yaml: a shipped config file that cannot be read as YAML: \[Errno 2\] No such file"),
    ],
)
def test_a_shipped_config_that_cannot_be_read_is_named_in_one_line(tmp_path, monkeypatch, capsys, text, said):
    for name, content in read_configs().items():
        if name != "pilot.yaml":
            (tmp_path / name).write_text(content)
    if isinstance(text, bytes):
        (tmp_path / "pilot.yaml").write_bytes(text)
    elif text is not None:
        (tmp_path / "pilot.yaml").write_text(text)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(tmp_path))}/{said}"):
        read_configs(tmp_path)
    monkeypatch.setattr(config_docs, "read_configs", functools.partial(read_configs, tmp_path))
    assert config_docs.main(["--check"]) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert re.match(rf"^{re.escape(str(tmp_path))}/{said}", err)


def described_nodes(node, where="config"):
    """(where, node) of every key schema: properties, a map's entries and a list's items, at every level."""
    for name, child in node.get("properties", {}).items():
        yield f"{where}.{name}", child
        yield from described_nodes(child, f"{where}.{name}")
    for keyword in ("additionalProperties", "items"):
        if isinstance(node.get(keyword), dict):
            yield f"{where}.{keyword}", node[keyword]
            yield from described_nodes(node[keyword], f"{where}.{keyword}")


def test_every_key_of_the_schema_at_every_level_has_a_description():
    nodes = list(described_nodes(SCHEMA))
    assert [where for where, node in nodes if not str(node.get("description", "")).strip()] == []
    assert len(nodes) == len(list(schema_keys(SCHEMA)))  # and the reference lists every one


def test_every_shipped_config_is_listed_with_its_purpose_runs_and_wall():
    section = README.read_text().split("## Shipped configs")[1].split("\n## ")[0]
    for name, text in read_configs().items():
        header = header_fields(name, text)
        row = next((line for line in section.splitlines() if line.startswith(f"| `config/{name}` |")), None)
        assert row is not None, f"config/{name} is not in config/README.md's shipped configs; regenerate it: {COMMAND}"
        assert header["purpose"] in row and header["measured"] in row
        assert header["measured"] == "not measured" or re.search(r" at [0-9a-f]{7,40}\b", header["measured"]), name


def test_a_config_without_its_header_lines_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"config/x.yaml: its leading comment block has no `# measured: \.\.\.` line"):
        header_fields("x.yaml", "# purpose: a test\nresults: r\n# measured: 1 s at abcdef0\n")  # not in the leading block


# an overlay that sets one family's settings: config.yaml's families share theirs through a YAML anchor
ONE_FAMILY = "families:\n  discrete: {settings: {steps: 100}}\n  discrete-balance: null\n"


def test_config_files_merge_as_snakemake_merges_them(tmp_path):
    (tmp_path / "one_family.yaml").write_text(ONE_FAMILY)
    configs = {**read_configs(), "one_family.yaml": ONE_FAMILY}
    for name in configs:
        expected = {}  # snakemake's Workflow.configfile: config.yaml into the empty config, the --configfile over it
        update_config(expected, load_configfile(ROOT / "config" / "config.yaml"))
        update_config(expected, load_configfile(ROOT / "config" / name if name != "one_family.yaml" else tmp_path / name))
        drop_removed_families(expected)
        assert merged_config(configs, name) == expected, name
    assert merged_config(configs, "one_family.yaml")["families"]["discrete-scale"]["settings"]["steps"] == 400


def rule_defaults(function):
    """{key: default} of every `function("key", default)` call in the plan and rules/*.smk, each key's calls agreeing."""
    found = {}
    for key, value in re.findall(rf'{function}\("(\w+)", ([^()]+)\)', RULES):
        assert found.setdefault(key, ast.literal_eval(value)) == ast.literal_eval(value), key
    return found


def grid_defaults():
    """The run a family of only its required keys trains: the grid's defaults of the optional ones."""
    families = {"f": {"model": "shared_discrete", "runs": [{"term": "raw", "modes": ["mean"]}]}}
    return expand_grid(families, 1)[0], declared_primary(families)


def curve_default():
    """The curve design of only its required keys."""
    return parse_curve_design({"kind": "curve", "first_blocks": 1, "stage_blocks": 1, "budget": 10}, 1)


# every key whose description states a value as its default (`Default: <value>.`), and the value the code applies
CODE_DEFAULTS = {
    "references": lambda: len(resolve_blocks(None)),
    "seeds_per_job": lambda: rule_defaults(r"config\.get")["seeds_per_job"],
    "chunk_training": lambda: rule_defaults(r"config\.get")["chunk_training"],
    "design_reset": lambda: rule_defaults(r"config\.get")["design_reset"],
    "design": lambda: {"kind": "fixed"} if parse_design(None) is None and parse_design({"kind": "fixed"}) is None else None,
    "design.alpha_spending": lambda: (
        parse_design({"kind": "sequential", "looks": [{"references": 1, "seeds": s} for s in (1, 2)], "max_runs_per_arm": 2}).alpha_spending
    ),
    "design.precision": lambda: curve_default().precision,
    "design.placement": lambda: curve_default().placement,
    "design.stop_at_reading": lambda: curve_default().stop_at_reading,
    "data.tasks": lambda: list(SequenceConfig().tasks),
    "data.per_block": lambda: rule_defaults(r'config\["data"\]\.get')["per_block"],
    "families.<name>.beta": lambda: grid_defaults()[0].beta,
    "families.<name>.warm_start": lambda: grid_defaults()[0].warm_start,
    "families.<name>.controls": lambda: grid_defaults()[0].controls,
    "families.<name>.settings": lambda: dict(grid_defaults()[0].settings),
    "families.<name>.runs[].alpha": lambda: grid_defaults()[0].alpha,
    "families.<name>.runs[].primary": lambda: TAKE_UP if grid_defaults()[1] == {} else None,
    "resources.train_run.runtime": lambda: rule_defaults("train_resource")["runtime"],
    "resources.train_run.mem_mb": lambda: rule_defaults("train_resource")["mem_mb"],
    "resources.train_run.gpus": lambda: rule_defaults("train_resource")["gpus"],
}
STATED = {key.path: key.default for key in schema_keys(SCHEMA) if key.default}


def test_every_value_stated_as_a_default_is_checked_against_the_code():
    assert sorted(path for path, default in STATED.items() if default.startswith("`")) == sorted(CODE_DEFAULTS)


@pytest.mark.parametrize("path", sorted(CODE_DEFAULTS))
def test_a_stated_default_is_the_one_the_code_applies(path):
    stated = yaml.safe_load(re.match(r"`([^`]*)`", STATED[path]).group(1))
    assert stated == CODE_DEFAULTS[path](), f"{path}: the schema says {stated!r}; fix its description, then run {COMMAND}"


def test_the_defaults_stated_in_words_are_the_codes():
    assert STATED["families.<name>.seeds"] == "the top-level seeds" and family_seeds({}, 3, "f") == [0, 1, 2]
    assert STATED["families.<name>.runs[].beta"] == "the family's beta (or betas)" and run_betas({"beta": 0.3}, {}) == ([0.3], False)
    assert run_betas({"betas": [0.1, 0.2]}, {}) == ([0.1, 0.2], True)
    assert STATED["families.<name>.runs[].betas"] == "the family's" and run_betas({"betas": [0.1]}, {"beta": 0.5}) == ([0.5], False)
    assert STATED["families.<name>.gpus"] == "resources.train_run.gpus"
    assert '.get("gpus", self.train_resource("gpus", 0))' in RULES
