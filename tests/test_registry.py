"""The term and model registries are the one source: the schema, the rules, the CLI and the docs agree with them."""

import re
from pathlib import Path

import pytest
import yaml

from core.disentanglement import losses
from core.disentanglement.config import AGGREGATION_MODES, NORMALISED_TERMS, OPTIMISABLE_TERMS, RECONSTRUCTION_TERMS, TOKEN_WEIGHTED_TERMS
from core.disentanglement.registry import HYBRID, MODELS, TERMS
from experiments.synthetic_sequences.planning.grid import SETTABLE_FIELDS, expand_grid
from experiments.synthetic_sequences.run_layout import GridError
from experiments.synthetic_sequences.training.settings import CONTROLS, ModelConfig, TrainConfig
from experiments.synthetic_sequences.training.train_disentangled import build_parser

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((ROOT / "config" / "schema" / "config.schema.yaml").read_text())
FAMILY = SCHEMA["properties"]["families"]["additionalProperties"]["properties"]


def test_term_lists_are_built_from_the_registry():
    assert RECONSTRUCTION_TERMS == ("raw", "dist", "ex", "tok", "tokcc", "tokinv")
    assert OPTIMISABLE_TERMS == (*RECONSTRUCTION_TERMS, HYBRID)
    assert TOKEN_WEIGHTED_TERMS == {"tok", "tokcc", "tokinv"}
    assert NORMALISED_TERMS == {"dist", "ex", "tokcc", "tokinv"}
    assert all("_" not in name for name in OPTIMISABLE_TERMS)  # a run key term_mode_alpha must parse back


def test_a_family_of_no_registered_model_is_refused_naming_the_registered_ones():
    assert "enum" not in FAMILY["model"]  # a new family is a module and a registry entry, not a schema edit too
    families = {"f": {"model": "transformer", "runs": [{"term": "raw", "modes": ["mean"]}]}}
    with pytest.raises(GridError, match=r"model: 'transformer' is not allowed; allowed values: shared_discrete, continuous"):
        expand_grid(families, 1)


def test_the_schema_enums_are_the_registries():
    assert FAMILY["controls"]["enum"] == list(CONTROLS)
    assert FAMILY["hybrid"]["propertyNames"]["enum"] == list(TERMS)
    run = FAMILY["runs"]["items"]["properties"]
    assert run["term"]["enum"] == list(OPTIMISABLE_TERMS)
    assert run["modes"]["items"]["enum"] == list(AGGREGATION_MODES)
    assert FAMILY["settings"]["propertyNames"]["enum"] == list(SETTABLE_FIELDS)


def test_the_trainer_cli_offers_the_registries_as_choices():
    actions = {action.dest: action for action in build_parser()._actions}
    assert actions["reconstruction_term"].choices == OPTIMISABLE_TERMS
    assert actions["reconstruction_loss_token_aggregation_mode"].choices == AGGREGATION_MODES
    assert actions["model"].choices == tuple(MODELS)
    assert actions["controls"].choices == CONTROLS
    assert all(action.help for name, action in actions.items() if name != "help"), "every flag has its help text"


def test_every_rule_takes_its_run_wildcard_constraints_from_the_registries():
    """One global wildcard_constraints block (rules/common.smk) built from the registries and the grid's family pattern."""
    common = (ROOT / "rules" / "common.smk").read_text()
    block = common[common.index("wildcard_constraints:") :].split("\n\n")[0]
    for line in ("family=FAMILY_PATTERN", "term=TERM_PATTERN", "mode=MODE_PATTERN"):
        assert line in block
    for rule in sorted((ROOT / "rules").glob("*.smk")):
        assert not re.search(r'(mode|term|family)=r?"', rule.read_text()), f"{rule.name} writes its own run wildcard pattern"


def test_each_model_family_has_its_registered_latent_settings():
    defaults = ModelConfig()
    for name, model in MODELS.items():
        assert type(getattr(defaults, name)) is model.config_class
    shared = {"prior", "encoder_layers", "length_groups"}  # one flag each, so both families must default alike
    assert {getattr(defaults.shared_discrete, f) for f in shared} == {getattr(defaults.continuous, f) for f in shared}


def test_one_flag_per_setting_and_the_glossary_holds_every_term():
    names = [action.dest for action in build_parser()._actions]
    assert len(names) == len(set(names))
    config = TrainConfig.from_flat(
        {
            **dict.fromkeys(("train_records", "val_records", "test_records"), "r"),
            **dict.fromkeys(("train_scores", "val_scores", "reference", "run_dir"), "s"),
        }
    )
    assert TrainConfig.from_flat(config.flat()) == config  # the flat mapping round-trips
    for name, term in TERMS.items():
        assert re.search(rf"^\s+{name}\s+{re.escape(term.formula)}", losses.__doc__, re.MULTILINE), name
        assert f"`{name}`" in (ROOT / "README.md").read_text(), f"README glossary lacks {name}"
