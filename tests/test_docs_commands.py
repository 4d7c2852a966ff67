"""Every fenced shell command in README.md, config/README.md and docs/ works as written.

A command in a ```bash block is one of: the README's set-up or test command, which .ci/run runs; a snakemake
invocation, which snakemake's own parser reads here and `snakemake -n` accepts in the slow test; a module's command
line, whose --help runs. Anything else (a placeholder path, sbatch, a shell pipeline) sits in a ```bash illustrative
block, which GitHub still renders as bash.
"""

import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", ROOT / "config" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^[ \t]*```(?P<info>[^\n`]*)\n(?P<body>.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
SHELLS = {"bash", "sh", "shell"}
ILLUSTRATIVE = "illustrative"
NOT_EXECUTING = {"--report", "--lint", "--rulegraph", "--dag", "--filegraph", "--summary", "--detailed-summary"}


def fenced_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) of every command in a shell block not marked illustrative; `a && b` gives two commands."""
    found = []
    for document in DOCUMENTS:
        if not document.exists():
            continue
        text = document.read_text()
        for fence in FENCE.finditer(text):
            language, *flags = fence["info"].split() or [""]
            if language not in SHELLS or ILLUSTRATIVE in flags:
                continue
            line = text[: fence.start()].count("\n") + 2
            body = fence["body"].replace("\\\n", " ")
            for offset, command in enumerate(body.splitlines()):
                words = shlex.split(command, comments=True)
                for start, end in split_on(words, "&&"):
                    if start < end:
                        found.append((f"{document.relative_to(ROOT)}:{line + offset}", words[start:end]))
    return found


def split_on(words: list[str], separator: str) -> list[tuple[int, int]]:
    """Index ranges of the pieces of words between separators."""
    cuts = [-1, *(i for i, word in enumerate(words) if word == separator), len(words)]
    return [(left + 1, right) for left, right in itertools.pairwise(cuts)]


def ci_commands() -> list[list[str]]:
    """What .ci/run executes: its lines as argv, pip's --quiet dropped, its run_pytest as python -m pytest."""
    commands = []
    for line in (ROOT / ".ci" / "run").read_text().splitlines():
        words = [word for word in shlex.split(line, comments=True) if word != "--quiet"]
        if words[:1] == ["run_pytest"]:
            words = ["python", "-m", "pytest", *words[1:]]
        if words and not words[0].endswith(("()", "{", "}")):
            commands.append(words)
    return commands


def kind(argv: list[str]) -> str:
    if argv[:1] == ["snakemake"]:
        return "snakemake"
    if argv[:2] == ["python", "-m"] and argv[2:3] != ["pytest"]:
        return "module"
    return "ci"


COMMANDS = fenced_commands()


def test_the_documents_have_commands_to_check():
    assert {kind(argv) for _, argv in COMMANDS} >= {"snakemake", "ci"}, COMMANDS


@pytest.mark.parametrize(("where", "argv"), [c for c in COMMANDS if kind(c[1]) == "ci"], ids=lambda value: str(value))
def test_a_set_up_or_test_command_is_one_that_ci_runs(where, argv):
    assert argv in ci_commands(), f"{where}: {shlex.join(argv)} is not run by .ci/run; mark its block `bash {ILLUSTRATIVE}`"


@pytest.mark.parametrize(("where", "argv"), [c for c in COMMANDS if kind(c[1]) == "snakemake"], ids=lambda value: str(value))
def test_a_snakemake_command_parses_and_names_files_that_exist(where, argv):
    from snakemake.cli import get_argument_parser

    arguments = get_argument_parser().parse_args(argv[1:])
    for path in [*(arguments.configfile or []), *(arguments.profile or [])]:
        assert (ROOT / path).exists(), f"{where}: {path} does not exist"


@pytest.mark.parametrize("module", sorted({c[1][2] for c in COMMANDS if kind(c[1]) == "module"}) or [None], ids=lambda value: str(value))
def test_a_modules_command_line_exists(module):
    if module is None:
        pytest.skip("no module command lines in the documents")
    run = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


def dry_run_argv(argv: list[str], results: Path) -> list[str]:
    """The command as `snakemake -n` into a scratch results folder; report, lint and graph flags dropped."""
    words, skip = [], False
    for word in argv[1:]:
        if skip:
            skip = False
            continue
        if word in NOT_EXECUTING:
            skip = word == "--report"
            continue
        words.append(word)
    if "--config" in words:  # one --config: the scratch folder joins its values
        at = words.index("--config") + 1
        return [*words[:at], f"results={results}", *words[at:], "-n"]
    return [*words, "--config", f"results={results}", "-n"]


@pytest.mark.slow
@pytest.mark.parametrize(("where", "argv"), [c for c in COMMANDS if kind(c[1]) == "snakemake"], ids=lambda value: str(value))
def test_a_snakemake_command_is_accepted_by_a_dry_run(where, argv, tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", *dry_run_argv(argv, tmp_path / "results")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"{where}: {shlex.join(argv)}\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
