"""Config files read strictly: a key written twice in one mapping is refused, naming the key and both lines.

PyYAML, and so snakemake, keeps the last of two equal keys without a word: a `families.discrete:` block written
twice keeps only its second copy, and the merge over config.yaml then quietly restores the default's runs.
Merge keys (`<<: *anchor`) are overrides by design and are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml

MERGE_TAG = "tag:yaml.org,2002:merge"


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
