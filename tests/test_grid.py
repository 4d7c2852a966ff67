import copy
import re
import shlex
from pathlib import Path

import pytest

from core.disentanglement.cli import cli_arguments, flat_values
from core.disentanglement.config import AggregationMode
from experiments.synthetic_sequences.planning.config_docs import merged_config
from experiments.synthetic_sequences.planning.config_files import read_configs
from experiments.synthetic_sequences.planning.grid import RunSpec, expand_grid
from experiments.synthetic_sequences.planning.pairing import check_pairings
from experiments.synthetic_sequences.run_layout import GridError, format_alpha, parse_run_key, parse_run_path, run_key

ROOT = Path(__file__).resolve().parents[1]


def merged_families(name):
    """(families, seeds) of a config file merged over config.yaml as snakemake merges them (config_docs.merged_config)."""
    config = merged_config(read_configs(), name)
    return config["families"], config.get("seeds")


def config_grid(name):
    """The runs a config file asks for."""
    return expand_grid(*merged_families(name))


@pytest.mark.parametrize("config", ["config.yaml", "pilot.yaml", "curve.yaml"])
def test_every_run_key_round_trips_and_no_two_runs_share_a_directory(config):
    specs = config_grid(config)
    assert len({spec.path for spec in specs}) == len(specs)
    for spec in specs:
        assert parse_run_key(spec.key) == (spec.term, spec.mode, spec.alpha, spec.key_beta)
        assert parse_run_path(f"results/runs/{spec.path}") == {
            "family": spec.family,
            "reference": spec.block,
            "term": spec.term,
            "mode": spec.mode,
            "alpha": spec.alpha,
            "seed": spec.seed,
            **({"beta": spec.beta} if spec.beta_axis else {}),
        }
        assert spec.mode in spec.key.split("_")
        assert spec.train_config().mode.value == spec.mode


def test_pilot_holds_the_spec_comparisons():
    specs = config_grid("pilot.yaml")
    main = {(s.model, s.term, s.mode) for s in specs if s.controls == "none"}
    for model in ("shared_discrete", "continuous"):
        for term in ("dist", "tokcc", "hybrid", "raw"):
            assert {(model, term, "mean"), (model, term, "sum")} <= main
    assert {(s.model, s.mode) for s in specs if s.controls == "scale"} == {("shared_discrete", "mean"), ("continuous", "mean")}
    assert {(s.model, s.mode) for s in specs if s.controls == "balance"} == {("shared_discrete", "sum"), ("continuous", "sum")}
    assert all(len({s.seed for s in specs if s.family == f}) >= 3 for f in {s.family for s in specs})


@pytest.mark.parametrize("alpha, text", [(0, "0"), (1, "1"), (0.5, "0.5"), (2.25, "2.25"), (1e-3, "0.001")])
def test_alpha_is_written_canonically(alpha, text):
    assert format_alpha(alpha) == text
    assert run_key("tokcc", "sum", alpha) == f"tokcc_sum_{text}"


@pytest.mark.parametrize("key", ["tokcc_sum", "tok_cc_sum_1", "tokcc_Sum_1", "tokcc_sum_1.0", "kl_mean_0", "raw_mean_x"])
def test_malformed_run_keys_are_refused(key):
    with pytest.raises(GridError):
        parse_run_key(key)


def test_mean_and_sum_runs_never_collide():
    mean = RunSpec("f", 0, "shared_discrete", "dist", AggregationMode.MEAN, 0.0, 0, 1.0, "none")
    total = RunSpec("f", 0, "shared_discrete", "dist", AggregationMode.SUM, 0.0, 0, 1.0, "none")
    other_block = RunSpec("f", 1, "shared_discrete", "dist", AggregationMode.MEAN, 0.0, 0, 1.0, "none")
    assert len({mean.path, total.path, other_block.path}) == 3


BASE = {
    "main": {
        "model": "shared_discrete",
        "seeds": [0],
        "beta": 0.1,
        "settings": {"steps": 10},
        "runs": [{"term": "dist", "modes": ["mean", "sum"]}],
    }
}


def broken(path, value):
    config = copy.deepcopy(BASE)
    target = config
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return config


def hybrid_family(coefficients):
    return {"main": {**BASE["main"], "hybrid": coefficients, "runs": [{"term": "hybrid", "modes": ["mean"]}]}}


@pytest.mark.parametrize(
    "config, message",
    [
        (broken(("main", "runs"), [{"term": "dist", "modes": ["Sum"]}]), "'Sum' is not allowed; allowed values: mean, sum"),
        (
            broken(("main", "runs"), [{"term": "kl", "modes": ["mean"]}]),
            "families.main.runs[0].term: 'kl' is not allowed; allowed values: raw, dist",
        ),
        (
            broken(("main", "runs"), [{"term": "dist", "alpha": 1, "modes": ["mean"]}]),
            "families.main: token_weight_alpha: 1.0 has no effect on term 'dist'",
        ),
        (broken(("main", "runs"), [{"term": "tokcc", "alpha": -1, "modes": ["mean"]}]), "must be a finite number >= 0"),
        (broken(("main", "seeds"), []), "families.main.seeds: at least one seed is needed"),
        (
            broken(("main", "runs"), [{"term": "dist", "modes": ["mean"]}, {"term": "dist", "modes": ["mean"]}]),
            "duplicate run key main/ref0/dist_mean_0",
        ),
        (broken(("main", "settings"), {"stepz": 10}), "families.main.settings: ['stepz'] are not trainer settings"),
        (broken(("main", "settings"), {"num_codes": 1}), "num_codes: 1 is not allowed"),
        # the trainer's own validation, run at parse time: types and ranges, named by field
        (broken(("main", "settings"), {"steps": 10.7}), "families.main: steps: 10.7 is not allowed; it must be an integer"),
        (broken(("main", "settings"), {"steps": "ten"}), "families.main: steps: 'ten' is not allowed; it must be an integer"),
        (broken(("main", "settings"), {"lr": True}), "lr: True is not allowed; it must be a finite number"),
        (broken(("main", "settings"), {"weight_decay": -1}), "weight_decay: -1 is not allowed; it must be >= 0"),
        (broken(("main", "settings"), {"grad_clip": -1}), "grad_clip: -1 is not allowed; it must be > 0"),
        (broken(("main", "settings"), {"grad_clip": 0}), "grad_clip: 0 is not allowed; it must be > 0"),
        (broken(("main", "settings"), {"warmup_steps": -5}), "warmup_steps: -5 is not allowed; it must be >= 0"),
        (broken(("main", "settings"), {"device": "tpu"}), "device: 'tpu' is not allowed; allowed values: cpu, auto, cuda, cuda:N, mps"),
        (broken(("main", "settings"), {"device": "cpu --seed 5 --steps 3"}), "device: 'cpu --seed 5 --steps 3' is not allowed"),
        (broken(("main", "settings"), {"auxiliary_weights": {"posterior_entropy": "x"}}), "auxiliary_weights: {'posterior_entropy': 'x'}"),
        (hybrid_family({"dist": -1}), "hybrid_coefficients.dist: -1 is not allowed; it must be a finite number >= 0"),
        (hybrid_family({"dist": 0, "raw": 0}), "hybrid_coefficients: every coefficient is 0"),
        (broken(("main", "controls"), "scale"), "families.main.control_of: a family with controls 'scale' needs control_of"),
        (broken(("main", "runs"), [{"term": "hybrid", "modes": ["mean"]}]), "families.main.hybrid: runs[0] uses term 'hybrid'"),
        ({"bad_name": BASE["main"]}, "family names are 1-64 letters, digits and '-'"),
        ({}, "the config defines no family"),
    ],
)
def test_bad_grids_name_the_field(config, message):
    with pytest.raises(GridError) as info:
        expand_grid(config)
    assert message in str(info.value)


def test_controls_run_only_in_their_own_mode():
    config = copy.deepcopy(BASE)
    config["main-scale"] = {**BASE["main"], "controls": "scale", "control_of": "main", "runs": [{"term": "raw", "modes": ["sum"]}]}
    with pytest.raises(GridError, match="a 'scale' control family runs mode 'mean' only"):
        expand_grid(config)


@pytest.mark.parametrize("device", ["cpu", "auto", "cuda", "cuda:1", "mps"])
def test_every_documented_device_passes_the_parse_time_check(device):
    (spec, *_) = expand_grid(broken(("main", "settings"), {"device": device}))
    assert flat_values(spec.train_config())["device"] == device
    assert ("device" in spec.settings) == (device != "cpu")  # written at its default, it is no flag of the job


def test_every_value_reaches_the_shell_as_one_argument():
    """...and in the order of the flags' names and of a mapping's keys, however the config orders them."""
    arguments = {"device": "cpu --seed 5", "out_dir": "results with space/x", "tasks": ["sort", "it's"]}
    arguments |= {"hybrid": {"tokcc": 0.5, "dist": 0.25}, "stop_at_take_up": True}
    assert shlex.split(cli_arguments(arguments)) == [
        *("--device", "cpu --seed 5", "--hybrid", "dist=0.25,tokcc=0.5", "--out-dir", "results with space/x"),
        *("--stop-at-take-up", "true", "--tasks", "sort", "it's"),
    ]
    assert cli_arguments(dict(reversed(arguments.items()))) == cli_arguments(arguments)


def test_a_top_level_seed_count_or_list_reaches_every_family_that_sets_none():
    config = broken(("main", "seeds"), None)
    del config["main"]["seeds"]

    def seeds(config, default):
        return [spec.seed for spec in expand_grid(config, default) if spec.mode == "mean"]

    assert seeds(config, 3) == [0, 1, 2]
    assert seeds(config, [4, 9]) == [4, 9]
    assert seeds(broken(("main", "seeds"), 2), 10) == [0, 1]  # a family's own seeds win
    with pytest.raises(GridError, match="seeds: no seeds; set a top-level `seeds:`"):
        expand_grid(config)
    with pytest.raises(GridError, match=r"seeds: \[1, 1\] repeats a seed"):
        expand_grid(config, [1, 1])


def test_more_seeds_keep_every_run_of_fewer_seeds_unchanged():
    """Raising the count only adds runs: the runs of seeds 0..2 keep their paths and settings, so nothing retrains."""
    config = broken(("main", "seeds"), None)
    del config["main"]["seeds"]
    few, many = expand_grid(config, 3), expand_grid(config, 10)
    assert [(s.path, s.train_config()) for s in few] == [(s.path, s.train_config()) for s in many if s.seed < 3]


def paired(**control_overrides):
    """BASE's main family with a scale control family that equals it but for `control_overrides`."""
    config = copy.deepcopy(BASE)
    control = {**copy.deepcopy(BASE["main"]), "controls": "scale", "control_of": "main", "runs": [{"term": "dist", "modes": ["mean"]}]}
    config["main-scale"] = {**control, **control_overrides}
    return config


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"beta": 0.5}, "differs in beta of dist alpha=0 (0.5 vs 0.1)"),
        ({"runs": [{"term": "dist", "beta": 0.5, "modes": ["mean"]}]}, "differs in beta of dist alpha=0 (0.5 vs 0.1)"),
        ({"settings": {"steps": 60}}, "differs in settings.steps (60 vs 10)"),
        ({"model": "continuous"}, "differs in model ('continuous' vs 'shared_discrete')"),
        ({"warm_start": True}, "differs in warm_start (True vs False)"),
        ({"seeds": [5]}, "differs in seeds ([5] vs [0])"),
        ({"runs": [{"term": "raw", "modes": ["mean"]}]}, "families.main-scale.runs: raw alpha=0 not run by its main family main"),
    ],
)
def test_a_control_family_must_be_its_main_family_with_one_factor_changed(overrides, message):
    config = paired(**overrides)
    expand_grid(config)  # each family is well formed on its own
    with pytest.raises(GridError, match=re.escape(message)):
        check_pairings(config)


def test_a_main_family_takes_at_most_one_control_family_of_each_kind():
    config = paired()
    config["main-scale2"] = copy.deepcopy(config["main-scale"])
    with pytest.raises(GridError, match="families.main-scale2: main already has a scale control family \\(main-scale\\); keep one"):
        check_pairings(config)


@pytest.mark.parametrize("name", ["config.yaml", "pilot.yaml", "smoke.yaml", "cold_start.yaml"])
def test_the_shipped_configs_pair_their_controls(name):
    check_pairings(*merged_families(name))  # raises GridError naming the field otherwise


def test_a_run_s_own_beta_overrides_its_family_s_and_its_control_pairs_with_it():
    config = paired(beta=0.5)
    config["main"]["runs"] = [{"term": "dist", "beta": 0.5, "modes": ["mean", "sum"]}, {"term": "raw", "modes": ["mean"]}]
    check_pairings(config)  # the control's dist runs at the main family's dist beta, 0.5
    betas = {(spec.family, spec.term, spec.mode): spec.beta for spec in expand_grid(config)}
    assert betas == {
        ("main", "dist", "mean"): 0.5,
        ("main", "dist", "sum"): 0.5,
        ("main", "raw", "mean"): 0.1,  # the family's
        ("main-scale", "dist", "mean"): 0.5,
    }
    assert {spec.path.split("/")[2] for spec in expand_grid(config) if spec.term == "dist"} == {"dist_mean_0", "dist_sum_0"}


def test_a_control_pairs_with_its_main_familys_seeds_in_any_order():
    config = paired(seeds=[1, 0])
    config["main"]["seeds"] = [0, 1]
    check_pairings(config)  # runs pair by seed value: [1, 0] are the main family's [0, 1]
