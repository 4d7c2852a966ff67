"""Every check of a config, in the one order they must run, before any job: the plan's first step (plan.Plan.load).

check_loaded runs on the merged config as snakemake loaded it: the files themselves (a key written twice), the merge
(families removed by `null`, a later file's `betas` over an earlier `beta`), the keys that moved, run lists and flags
given as text on the command line, the schema (which also fills its defaults), and counts given as floats.
check_cross_fields runs the rules a JSON schema cannot state, and check_batch_sizes those over the expanded grid.
Each refusal names the field.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import SimpleNamespace

from snakemake.utils import validate

from core.disentanglement.checks import check_heads_divide_width
from experiments.synthetic_sequences.planning.config_files import (
    check_config_files,
    check_flags,
    check_integers,
    check_moved_keys,
    check_run_lists,
    drop_removed_families,
    merge_order,
    settle_family_betas,
)


def check_loaded(config: dict, loaded: Sequence[str], command_line: Sequence[str], schema: str) -> None:
    """The merged config's checks, in order; `loaded`: every file snakemake loaded, `command_line`: its --configfile
    files, `schema`: the config schema's path."""
    check_config_files(loaded)  # a key written twice is refused, not silently the last one
    drop_removed_families(config)  # `name: null` in a later config file removes a family of an earlier one
    settle_family_betas(config, merge_order(loaded, command_line))  # a later file's `betas` replaces an earlier file's `beta`
    check_moved_keys(config)
    check_run_lists(config, schema)  # one line per bad seeds/references value, not the schema's dump
    check_flags(config)
    validate(config, schema)
    check_integers(config, schema)  # JSON Schema takes 2.0 for an integer; a count is refused as a float here


def check_cross_fields(config: dict, references: Sequence[int]) -> None:
    """Cross-field rules a JSON schema cannot state (`references`: the reference blocks the config asks for)."""
    data = config["data"]
    if data["min_size"] > data["max_size"]:
        raise ValueError(f"data.min_size ({data['min_size']}) must be <= data.max_size ({data['max_size']})")
    try:
        check_heads_divide_width(SimpleNamespace(**config["zfree"]))
    except ValueError as err:
        raise ValueError(f"zfree.{err}") from None
    reference = config["reference"]
    if reference["source"] != "entangled" and "checkpoint" in reference:
        raise ValueError(
            f"reference.checkpoint is read only with source: entangled (source is {reference['source']!r}); "
            "remove it or set source: entangled"
        )
    if reference["source"] == "entangled" and data.get("per_block", False):
        raise ValueError(
            "data.per_block: true draws each block its own records, but source: entangled has one checkpoint, trained on "
            "one draw; set data.per_block: false or source: zfree"
        )
    if reference["source"] == "entangled" and len(references) != 1:
        raise ValueError(
            f"references: {config['references']!r} asks for {len(references)} reference blocks, but source: entangled "
            "has one checkpoint, so one block; set references: 1"
        )
    check_results_folder(config["results"])


def check_results_folder(folder: str) -> None:
    """A results folder the workflow can own: not the filesystem root, no '~' (no shell expands it here), no wildcard braces."""
    if os.path.abspath(folder) == "/":
        raise ValueError(f"results: {folder!r} is the filesystem root; give a folder of its own")
    if folder.startswith("~"):
        raise ValueError(f"results: {folder!r} starts with '~', which is not expanded here; write the path out")
    if "{" in folder or "}" in folder:
        raise ValueError(f"results: {folder!r} holds '{{' or '}}', which snakemake reads as wildcards; rename the folder")


def check_batch_sizes(config: dict, specs: Sequence) -> None:
    """A batch cannot hold more records than the train split has: refused rather than silently cut to n_train, which
    run_config.json would not record."""
    n_train = config["data"]["n_train"]
    if config["zfree"]["batch_size"] > n_train:
        raise ValueError(f"zfree.batch_size: {config['zfree']['batch_size']} is more than data.n_train ({n_train}) records")
    for family in sorted({spec.family for spec in specs}):
        batch_size = next(spec for spec in specs if spec.family == family).train_config().optim.batch_size
        if batch_size > n_train:
            raise ValueError(
                f"families.{family}.settings.batch_size: {batch_size} is more than data.n_train ({n_train}) records; "
                "a batch draws each record once"
            )
