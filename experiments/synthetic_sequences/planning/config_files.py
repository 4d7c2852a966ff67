"""Config files read strictly: a key written twice in one mapping is refused, naming the key and both lines; and the
config files the project ships (SHIPPED), read by name.

PyYAML, and so snakemake, keeps the last of two equal keys without a word: a `families.discrete:` block written
twice keeps only its second copy, and the merge over config.yaml then quietly restores the default's runs.
Merge keys (`<<: *anchor`) are overrides by design and are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import yaml

MERGE_TAG = "tag:yaml.org,2002:merge"
CONFIGS = Path(__file__).resolve().parents[3] / "config"
DEFAULT_CONFIG = "config.yaml"  # snakemake reads it first; every --configfile merges over it
# the config files the project ships, documented in config/README.md (tests hold it to the files git tracks)
SHIPPED = (
    DEFAULT_CONFIG,
    "calibration.yaml",
    "cold_start.yaml",
    "curve.yaml",
    "curve_design.yaml",
    "note.yaml",
    "per_block.yaml",
    "pilot.yaml",
    "sequential.yaml",
    "smoke.yaml",
)


class DuplicateKeyError(ValueError):
    """A config file that writes one key twice in a mapping."""


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping holding one key twice."""


def construct_strict_mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    lines: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == MERGE_TAG:
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in lines:
            raise DuplicateKeyError(f"key {key!r} is written twice in one mapping (lines {lines[key]} and {line}); keep one")
        lines[key] = line
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_strict_mapping)


def check_config_files(paths: Iterable[str | Path]) -> None:
    """Re-read every config file snakemake loaded with StrictLoader; raises DuplicateKeyError naming the file."""
    for path in paths:
        try:
            yaml.load(Path(path).read_text(), Loader=StrictLoader)  # noqa: S506 - StrictLoader is a SafeLoader
        except DuplicateKeyError as err:
            raise DuplicateKeyError(f"config file {path}: {err}") from None


def integer_schema(schema: dict) -> bool:
    """Whether a schema node takes an integer where a number is given (its own type, or one of its alternatives')."""
    return schema.get("type") == "integer" or any(alternative.get("type") == "integer" for alternative in schema.get("oneOf", ()))


def float_counts(value: object, schema: dict, where: str = "") -> Iterator[str]:
    """The keys (dotted, indices in brackets) whose value is a float where the schema asks for an integer.

    JSON Schema counts 2.0 as an integer, so `seeds: 2.0` passes validation and then names chunks `seeds0.0-1.0`:
    a count given as a float is refused here instead."""
    if isinstance(value, float) and integer_schema(schema):
        yield f"{where} = {value!r}"
        return
    for alternative in schema.get("oneOf", ()):
        if alternative.get("type") == "array" and isinstance(value, list):
            yield from float_counts(value, alternative, where)
    if isinstance(value, dict):
        for key, item in value.items():
            node = schema.get("properties", {}).get(key, schema.get("additionalProperties"))
            if isinstance(node, dict):
                yield from float_counts(item, node, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from float_counts(item, schema["items"], f"{where}[{index}]")


def check_integers(config: dict, schema_path: str | Path) -> None:
    """Refuse, naming the keys and values, a count written as a float (`seeds: 2.0`, `seeds_per_job: 2.0`)."""
    found = list(float_counts(config, yaml.safe_load(Path(schema_path).read_text())))
    if found:
        raise ValueError(f"{'; '.join(found)}: a count must be a whole number written without a decimal point (e.g. 2, not 2.0)")


def drop_removed_families(config: dict) -> list[str]:
    """Remove the families a later config file set to null (`discrete-balance: null`); returns their names.

    Snakemake merges config files key by key, so a --configfile cannot otherwise leave out one of config.yaml's
    families: `families: {discrete-scale: null, discrete-balance: null}` runs the default without its controls."""
    families = config.get("families")
    if not isinstance(families, dict):
        return []
    removed = [name for name, spec in families.items() if spec is None]
    for name in removed:
        del families[name]
    return removed


def merge_order(loaded: Iterable[str | Path], command_line: Iterable[str | Path]) -> list[Path]:
    """The config files in the order snakemake merged them: the Snakefile's `configfile:` first, then the command
    line's --configfile files in their order (snakemake lists the command line's first)."""
    given = [Path(path).resolve() for path in command_line]
    return [path for path in (Path(path).resolve() for path in loaded) if path not in given] + given


def settle_family_betas(config: dict, paths: Iterable[str | Path]) -> None:
    """A family's `betas` and `beta` are one setting: where the merged config holds both, the one the last config file
    to set either gave is kept (curve.yaml's `betas` over config.yaml's `beta`); `paths` in merge order (merge_order).
    One file that sets both for a family is refused, naming it."""
    families = config.get("families")
    if not isinstance(families, dict):
        return
    both = [name for name, spec in families.items() if isinstance(spec, dict) and "beta" in spec and "betas" in spec]
    documents = [(path, yaml.safe_load(Path(path).read_text()) or {}) for path in paths] if both else []
    for name in both:
        last = None
        for path, document in documents:
            family = (document.get("families") or {}).get(name) or {}
            given = {key for key in ("beta", "betas") if key in family}
            if len(given) == 2:
                raise ValueError(f"config file {path}: families.{name} sets both beta and betas; keep one (betas: a beta axis)")
            last = given.pop() if given else last
        del families[name]["betas" if last == "beta" else "beta"]


# settings an earlier version of the config read, and where they live now
MOVED_KEYS = {
    ("zfree", "seed"): "the z-free seeds are the top-level `references:` (a count N, seeds 0..N-1, or a list of z-free seeds)",
}


def check_moved_keys(config: dict) -> None:
    """Refuse, before the schema's generic 'additional property' message, a setting that has moved, saying where to."""
    for (section, key), where in MOVED_KEYS.items():
        if isinstance(config.get(section), dict) and key in config[section]:
            raise ValueError(f"{section}.{key}: no longer read; {where}")


RUN_LISTS = {"seeds": "seed", "references": "z-free seed"}  # the top-level keys that take a count or a list


def run_list_problem(value: object, schema: dict, where: str, what: str) -> str | None:
    """One line naming what is wrong with a count-or-list value (RUN_LISTS) and the rule it breaks, or None; the
    bounds are the schema's."""
    count, listed = (next(alt for alt in schema["oneOf"] if alt["type"] == kind) for kind in ("integer", "array"))
    items = listed["items"]
    if isinstance(value, float) or (isinstance(value, list) and any(isinstance(item, float) for item in value)):
        return None  # a count written as a float: check_integers names it, after the schema
    if isinstance(value, bool) or not isinstance(value, int | list):
        return f"{where}: {value!r} is neither a count nor a list of {what}s"
    if isinstance(value, int):
        if not count["minimum"] <= value <= count["maximum"]:
            return f"{where}: {value} is not a count from {count['minimum']} to {count['maximum']}"
        return None
    if text := [item for item in value if isinstance(item, str)]:
        return (
            f"{where}: {value!r} holds text ({text[0]!r}), not whole numbers: snakemake's --config reads a list's items as "
            f"text; give a count ({where}={len(value)}) or write the list in a config file (--configfile)"
        )
    if not value:
        return f"{where}: at least one {what} is needed"
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            return f"{where}: {item!r} in {value!r} is not a whole number"
        if not items["minimum"] <= item <= items["maximum"]:
            return f"{where}: {item} in {value!r} is outside {items['minimum']}..{items['maximum']}"
    if repeated := sorted({item for item in value if value.count(item) > 1}):
        return f"{where}: {value!r} repeats {repeated[0]}; each {what} may appear once"
    return None


def check_run_lists(config: dict, schema_path: str | Path) -> None:
    """Refuse in one line, before the schema's generic message (which dumps the schema), a top-level or family
    `seeds`/`references` the schema would refuse: text from the command line, a repeat, a negative or too large value."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    checks = [(config[key], schema["properties"][key], key, what) for key, what in RUN_LISTS.items() if key in config]
    family_seeds = schema["properties"]["families"]["additionalProperties"]["properties"]["seeds"]
    families = config.get("families") if isinstance(config.get("families"), dict) else {}
    checks += [
        (spec["seeds"], family_seeds, f"families.{name}.seeds", "seed")
        for name, spec in families.items()
        if isinstance(spec, dict) and "seeds" in spec
    ]
    for value, node, where, what in checks:
        if problem := run_list_problem(value, node, where, what):
            raise ValueError(problem)


def check_flags(config: dict, flags: Iterable[str] = ("design_reset",)) -> None:
    """Refuse a yes/no setting given as text: snakemake's --config reads True and False as booleans, but 'true' as text."""
    for flag in flags:
        if isinstance(config.get(flag), str):
            raise ValueError(f"{flag}: {config[flag]!r} is text; write {flag}=True or {flag}=False (capitalised) on the command line")


def read_configs(folder: Path = CONFIGS, names: tuple[str, ...] = SHIPPED) -> dict[str, str]:
    """{name: text} of the shipped config files; one that cannot be read, or is not YAML, is refused by its path."""
    configs = {}
    for name in names:
        path = folder / name
        try:
            configs[name] = path.read_text()
            yaml.safe_load(configs[name])
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
            mark = getattr(error, "problem_mark", None)
            where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
            problem = getattr(error, "problem", None) or " ".join(str(error).split())
            raise ValueError(f"{where}: a shipped config file that cannot be read as YAML: {problem}") from None
    return configs
