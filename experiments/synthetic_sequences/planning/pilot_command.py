"""The pilot's own command line, which every command the pipeline prints repeats: the verdict's "train more seeds"
line and each refusal's advice. A command that left out the pilot's config files would plan another pilot (the
default, into results/) instead of extending this one.

Snakemake keeps only the last of repeated `--configfile` flags and of repeated `--config` flags (each takes several
values after one flag), so the command gives every config file after one `--configfile` and every setting after
one `--config`. Torch- and pandas-free: the Snakefile builds it at parse time.

A job whose output must not change with the command line (a design's look: what it decides is its params) takes the
command from the environment instead of its flags: the Snakefile sets PILOT_VARIABLE in its main process, which the
local jobs inherit, so a changed or reordered command line reruns no look.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SEEDS_SETTING = "seeds="
LOCAL = ("--cores", "2")  # how the pipeline's printed commands run snakemake: here, on 2 cores
SLURM = ("--profile", "slurm")  # or with the shipped Slurm profile (slurm/config.yaml)
PILOT_VARIABLE = "SYNTHETIC_SEQUENCES_PILOT"  # the pilot's flags (PilotCommand.flags), for the jobs that take it there


@dataclass(frozen=True)
class PilotCommand:
    """The pilot's --configfile files (as the user gave them, relative to the working directory where they lie under
    it) and --config settings, in their order."""

    configfiles: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()

    @classmethod
    def of_workflow(cls, configfiles: Sequence[str | Path], settings: Sequence[str] | None) -> PilotCommand:
        """From snakemake's workflow.config_settings: the command line's config files and its --config settings."""
        here = Path.cwd()
        resolved = [Path(path).resolve() for path in configfiles]
        shown = tuple(str(path.relative_to(here)) if path.is_relative_to(here) else str(path) for path in resolved)
        return cls(shown, tuple(settings or ()))

    def command(self, *settings: str, targets: Sequence[str] = (), flags: Sequence[str] = (), runner: Sequence[str] = LOCAL) -> str:
        """`snakemake --cores 2 [targets] [flags] --configfile FILE... --config SETTING...`: this pilot's command line,
        with `settings` given after its own (a setting given again replaces the pilot's own of the same key); `runner`
        in place of `--cores 2` (SLURM: the shipped Slurm profile)."""
        keys = {setting.partition("=")[0] for setting in settings}
        kept = [setting for setting in self.settings if setting.partition("=")[0] not in keys]
        words = ["snakemake", *runner, *targets, *flags]
        if self.configfiles:
            words += ["--configfile", *self.configfiles]
        if kept or settings:
            words += ["--config", *kept, *settings]
        return shlex.join(words)

    @classmethod
    def of_flags(cls, args: argparse.Namespace) -> PilotCommand:
        """From a job's --pilot-configfile / --pilot-config flags (add_pilot_flags); a job given neither takes the
        command from PILOT_VARIABLE, where the workflow's main process put it (the default pilot's where it is unset)."""
        if args.pilot_configfile or args.pilot_config:
            return cls(tuple(args.pilot_configfile), tuple(args.pilot_config))
        parser = argparse.ArgumentParser()
        add_pilot_flags(parser)
        exported = parser.parse_args(shlex.split(os.environ.get(PILOT_VARIABLE, "")))
        return cls(tuple(exported.pilot_configfile), tuple(exported.pilot_config))

    def environment(self) -> dict[str, str]:
        """{PILOT_VARIABLE: the flags}: set in the workflow's main process, it reaches the jobs that run there."""
        return {PILOT_VARIABLE: self.flags()}

    def flags(self) -> str:
        """The --pilot-configfile / --pilot-config flags, shell-quoted, that carry this command into the jobs that
        print advice (add_pilot_flags reads them)."""
        words = [word for path in self.configfiles for word in ("--pilot-configfile", path)]
        return shlex.join(words + [word for text in self.settings for word in ("--pilot-config", text)])


def add_pilot_flags(parser: argparse.ArgumentParser) -> None:
    """A job's --pilot-configfile and --pilot-config: the pilot's command line, which its refusals' advice repeats."""
    parser.add_argument(
        "--pilot-configfile", action="append", default=[], metavar="PATH", help="the pilot's own --configfile (repeat the flag)"
    )
    parser.add_argument(
        "--pilot-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the pilot's own --config settings (repeat the flag); the advice and the verdict's suggested commands repeat both",
    )


DEFAULT_PILOT = PilotCommand()  # `snakemake --cores 2` with no --configfile and no --config
