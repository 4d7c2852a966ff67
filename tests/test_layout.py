"""The code stays plain: short functions, short files, and a Snakefile whose parse never imports torch."""

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for folder in ("core", "experiments", "bench") for p in sorted((ROOT / folder).rglob("*.py"))]
MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 300  # in core/ and experiments/


def test_no_function_outside_the_tests_is_longer_than_60_lines():
    long = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long


def test_no_file_in_core_or_experiments_is_longer_than_300_lines():
    long = [
        f"{p.relative_to(ROOT)} ({n})"
        for p in SOURCES
        if p.parts[len(ROOT.parts)] != "bench" and (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    ]
    assert not long


def test_the_snakefile_imports_load_no_torch():
    """What the Snakefile and rules/ import at parse time (read from them, not listed by hand) loads no torch."""
    text = "\n".join(path.read_text() for path in [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))])
    modules = sorted(set(re.findall(r"^(?:from|import) ((?:core|experiments)[\w.]*)", text, re.MULTILINE)))
    assert modules, "no project import found in the Snakefile or rules/"
    probe = "; ".join(f"import {name}" for name in modules) + "; import sys; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False", [line for line in result.stderr.splitlines() if "torch" in line][:5]
