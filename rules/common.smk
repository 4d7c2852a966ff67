"""Helpers for every stage: paths under config['results'], CLI flags from config sections, config checks."""

import os

SPLITS = ("train", "val", "test")
SCORED_SPLITS = ("train", "val")


def results(path):
    return f"{config['results']}/{path}"


def cli_flags(section):
    """--key value for every entry of a config section, in the module CLIs' spelling."""
    return " ".join(
        f"--{key.replace('_', '-')} {value}" for key, value in config[section].items()
    )


def zfree_scores():
    return expand(results("zfree/scores/{split}.parquet"), split=SCORED_SPLITS)


def reference_artifacts():
    return expand(results("reference/{mode}.json"), mode=config["reference"]["modes"])


def summary_folder(wildcards, output):
    return os.path.dirname(output.summary)


def check_config():
    """Cross-field rules a JSON schema cannot state; called once at parse time, before any job runs."""
    data = config["data"]
    if data["min_size"] > data["max_size"]:
        raise ValueError(
            f"data.min_size ({data['min_size']}) must be <= data.max_size ({data['max_size']})"
        )
