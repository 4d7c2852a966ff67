"""config/README.md, generated: every config key with its type, default, allowed values and meaning, and the shipped
configs, so that the reference and the schema cannot drift apart.

    python -m experiments.synthetic_sequences.planning.config_docs           # rewrite config/README.md
    python -m experiments.synthetic_sequences.planning.config_docs --check   # exit 1 if it is not what it would write

What it reads:
  config/schema/config.schema.yaml  every key's `description` (properties, a map's entries, a list's items); a last
                                    sentence `Default: <value>.` is what the code uses when no config file sets the key
  config/config.yaml                the value the embedded default sets, which every other config file merges over
  the trainer's settings            the names, defaults and help text of a family's `settings:` (training/settings.py)
  the shipped configs               each file's leading comment block: a `# purpose: <what it is for>` line and a
                                    `# measured: <wall> at <commit> (<runs; machine, command>)` or
                                    `# measured: not measured` line; its runs are counted by the grid's own code;
                                    a user's own config file beside them is not documented, and not read
Torch- and pandas-free; of snakemake, it imports only its config merge.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass
from pathlib import Path

import yaml
from snakemake.utils import update_config

from core.disentanglement.artifacts import atomic_path
from core.disentanglement.cli import flat_fields
from experiments.synthetic_sequences.planning.config_files import CONFIGS, DEFAULT_CONFIG, drop_removed_families, read_configs
from experiments.synthetic_sequences.planning.grid import expand_grid
from experiments.synthetic_sequences.training.settings import MODEL_NAMES, TrainConfig

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "config" / "schema" / "config.schema.yaml"
OUTPUT = CONFIGS / "README.md"
COMMAND = "python -m experiments.synthetic_sequences.planning.config_docs"
DEFAULT = " Default: "  # the description's last sentence that states the code's default
PLACEHOLDERS = {"families": "<name>", "hybrid": "<term>"}  # a map's entry in a key path, by the map's name
HEADER = re.compile(r"^# (purpose|measured): (.+)$", re.MULTILINE)
# a schema keyword and how the allowed-values column says it
CONSTRAINTS = {
    "minimum": ">= {}",
    "exclusiveMinimum": "> {}",
    "maximum": "<= {}",
    "minLength": "at least {} character",
    "pattern": "matches `{}`",
    "minItems": "at least {} item",
    "uniqueItems": "no repeats",
    "minProperties": "at least {} entry",
}
COLUMNS = ("type", "default", "allowed values", "meaning")  # after the key's own column
PYTHON_TYPES = {"int": "integer", "float": "number", "str": "string", "dict[str, float]": "mapping of names to numbers"}


@dataclass(frozen=True)
class Key:
    """One key of the schema: its dotted path (`families.<name>.runs[].term`), its schema node, whether it is required."""

    path: str
    node: Mapping
    required: bool = False

    @property
    def meaning(self) -> str:
        return self.node.get("description", "").partition(DEFAULT)[0].removesuffix(".")

    @property
    def default(self) -> str:
        """The code's default as the description states it; '' where it states none."""
        return self.node.get("description", "").partition(DEFAULT)[2].removesuffix(".")


def schema_keys(node: Mapping, path: str = "") -> Iterator[Key]:
    """Every key below a schema node, depth first: its properties, a map's entries (`<name>`) and a list's items (`[]`).
    The alternatives of a oneOf are forms of one key, not keys."""
    required = set(node.get("required", ()))
    for name, child in node.get("properties", {}).items():
        child_path = f"{path}.{name}" if path else name
        yield Key(child_path, child, name in required)
        yield from schema_keys(child, child_path)
    if isinstance(node.get("additionalProperties"), dict):
        entry = f"{path}.{PLACEHOLDERS.get(path.rsplit('.', 1)[-1], '<key>')}"
        yield Key(entry, node["additionalProperties"])
        yield from schema_keys(node["additionalProperties"], entry)
    if isinstance(node.get("items"), dict):
        yield Key(f"{path}[]", node["items"])
        yield from schema_keys(node["items"], f"{path}[]")


def flow(value: object) -> str:
    """A value as YAML writes it on one line: `[sort, count]`, `0.003`, `results`."""
    return yaml.safe_dump(value, default_flow_style=True, width=1000).removesuffix("...\n").strip()


def type_of(node: Mapping) -> str:
    if "oneOf" in node:
        return " or ".join(type_of(alternative) for alternative in node["oneOf"])
    kind = node.get("type", "string" if "enum" in node else "any")
    return f"array of {type_of(node['items'])}" if kind == "array" and "items" in node else kind


def allowed(node: Mapping) -> str:
    """The values a node allows: its enum, bounds, pattern and sizes, a map's key names, each oneOf alternative's."""
    if "oneOf" in node:
        return "; or ".join(alternative_allowed(alternative) for alternative in node["oneOf"])
    parts = [", ".join(f"`{value}`" for value in node["enum"])] if "enum" in node else []
    parts += [text.format(node[keyword]) for keyword, text in CONSTRAINTS.items() if keyword in node]
    if "enum" in node.get("propertyNames", {}):
        parts.append("keys: " + ", ".join(f"`{name}`" for name in node["propertyNames"]["enum"]))
    return ", ".join(parts)


def alternative_allowed(alternative: Mapping) -> str:
    """One form of a oneOf key, a list's items included (they are no key of their own)."""
    items = f", each {allowed(alternative['items'])}" if "items" in alternative else ""
    return f"{type_of(alternative)}: {allowed(alternative)}{items}"


def config_value(config: Mapping, path: str) -> object | None:
    """The value config/config.yaml sets at a dotted key path; None where it sets none or the key is a map's entry."""
    value = config
    for name in path.split("."):
        if not isinstance(value, Mapping) or name not in value:
            return None
        value = value[name]
    return value


def default_cell(key: Key, default_config: Mapping) -> str:
    parts = ["required"] if key.required else []
    parts += [key.default] if key.default else []
    value = config_value(default_config, key.path)
    if value is not None and not isinstance(value, Mapping):
        parts.append(f"config/config.yaml: `{flow(value)}`")
    return "; ".join(parts)


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(part) for part in row) + " |" for row in rows] + [""]


def key_table(keys: list[Key], default_config: Mapping) -> list[str]:
    rows = [(f"`{key.path}`", type_of(key.node), default_cell(key, default_config), allowed(key.node), key.meaning) for key in keys]
    return table(("key", *COLUMNS), rows)


def schema_sections(schema: Mapping, default_config: Mapping) -> list[str]:
    """A table of the top-level keys that hold one value, then a section per top-level object: it and its keys."""
    keys = list(schema_keys(schema))
    top = [key for key in keys if "." not in key.path and "[" not in key.path]
    lines = ["## Top-level keys", "", *key_table([key for key in top if key.node.get("type") != "object"], default_config)]
    for section in (key for key in top if key.node.get("type") == "object"):
        inside = [key for key in keys if key.path == section.path or key.path.startswith(f"{section.path}.")]
        lines += [f"## `{section.path}`", "", *key_table(inside, default_config)]
    return lines


def field_default(field) -> str:
    return f"`{flow(field.default if field.default is not MISSING else field.default_factory())}`"


def trainer_settings(schema: Mapping) -> list[str]:
    """The trainer settings a family's `settings:` takes (the schema's list of names), with the trainer's own defaults
    and help text."""
    fields = dict(flat_fields(TrainConfig))
    names = schema["properties"]["families"]["additionalProperties"]["properties"]["settings"]["propertyNames"]["enum"]
    rows = [
        (
            f"`{name}`",
            PYTHON_TYPES.get(fields[name].type, fields[name].type),
            field_default(fields[name]),
            ", ".join(f"`{choice}`" for choice in fields[name].metadata["choices"] or ()),
            fields[name].metadata["help"],
        )
        for name in names
    ]
    intro = (
        "Each is a flag of `experiments.synthetic_sequences.training.train_disentangled`, checked by the trainer's own "
        "validation when the Snakefile is parsed; the grid sets the run's term, mode, alpha, seed, beta, controls, hybrid "
        "coefficients and paths itself. A model family's latent settings apply to that family only. The registered model "
        f"families (`families.<name>.model`): {', '.join(f'`{name}`' for name in MODEL_NAMES)}."
    )
    return ["## Trainer settings (`families.<name>.settings.<setting>`)", "", intro, "", *table(("setting", *COLUMNS), rows)]


def merged_config(configs: Mapping[str, str], *names: str) -> dict:
    """Config files (`configs`: name -> text) merged in order over config/config.yaml as snakemake's
    Workflow.configfile merges them, with the families they set to null removed: each file is merged into the empty
    config by snakemake's own update_config, which builds new maps, so a map that YAML anchors share between families
    is not shared after it."""
    config = {}
    for loaded in dict.fromkeys((DEFAULT_CONFIG, *names)):
        update_config(config, yaml.safe_load(configs[loaded]))
    drop_removed_families(config)
    return config


def runs_of(configs: Mapping[str, str], name: str) -> str:
    """The runs a config file trains, counted by the grid's code; under a sequential design the most it trains."""
    config = merged_config(configs, name)
    count = len(expand_grid(config["families"], config.get("seeds"), config.get("references")))
    return f"up to {count}" if (config.get("design") or {}).get("kind") == "sequential" else str(count)


def header_fields(name: str, text: str) -> dict[str, str]:
    """The `# purpose:` and `# measured:` lines of a config file's leading comment block."""
    block = re.match(r"(?:#.*\n)*", text).group(0)
    found = dict(HEADER.findall(block))
    if missing := [field for field in ("purpose", "measured") if field not in found]:
        raise ValueError(f"config/{name}: its leading comment block has no `# {missing[0]}: ...` line ({__name__} reads it)")
    return found


def shipped_configs(configs: Mapping[str, str]) -> list[str]:
    """One row per config file, config/config.yaml first."""
    names = [DEFAULT_CONFIG, *sorted(name for name in configs if name != DEFAULT_CONFIG)]
    rows = []
    for name in names:
        header = header_fields(name, configs[name])
        rows.append((f"`config/{name}`", header["purpose"], runs_of(configs, name), header["measured"]))
    intro = (
        "Each file's purpose and measured wall are its own leading comment's `# purpose:` and `# measured:` lines. Its "
        "runs are counted from the file merged over `config/config.yaml`, with the grid's own code "
        "(`planning/grid.py`); under a sequential design an arm trains the next look's runs only while its contrast is "
        "open, so the count is the most it trains."
    )
    return ["## Shipped configs", "", intro, "", *table(("file", "purpose", "runs", "measured wall"), rows)]


def render(schema: Mapping, configs: Mapping[str, str]) -> str:
    """config/README.md from the schema and the config files' texts ({file name: text}, config.yaml among them)."""
    intro = [
        "# Config reference",
        "",
        f"<!-- Generated by `{COMMAND}` from config/schema/config.schema.yaml; do not edit. -->",
        "",
        "Generated from `config/schema/config.schema.yaml`, the trainer's settings and the config files' leading "
        f"comments by `{COMMAND}`: edit those and rerun it (`--check` says whether this file is current; "
        "tests/test_config_docs.py fails when it is not).",
        "",
        "Every key is checked against the schema before any job runs. Snakemake reads `config/config.yaml` first and "
        "merges every `--configfile` over it key by key (families by name; `<name>: null` removes one). In the default "
        "column, a value alone is what the code uses when no config file sets the key, and `config/config.yaml:` the "
        "value the embedded default sets, which every other config file keeps unless it sets its own. `<name>` stands "
        "for a family's name, `<term>` for a term's, `[]` for each item of a list.",
        "",
    ]
    default_config = yaml.safe_load(configs[DEFAULT_CONFIG])
    lines = intro + shipped_configs(configs) + schema_sections(schema, default_config) + trainer_settings(schema)
    return "\n".join(lines).rstrip("\n") + "\n"


def current() -> str:
    """What config/README.md should hold now."""
    return render(yaml.safe_load(SCHEMA.read_text()), read_configs())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1, writing nothing, if config/README.md is out of date")
    args = parser.parse_args(argv)
    try:
        text = current()
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(ROOT)} is not what the schema and the config files give; regenerate it: {COMMAND}", file=sys.stderr)
            return 1
        return 0
    with atomic_path(OUTPUT) as tmp:
        tmp.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
