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


def project_imports(path: Path) -> set[str]:
    """The project modules a source file imports (core.*, experiments.*), as dotted names of modules."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from package import module`
    return {name for name in names if name.split(".")[0] in ("core", "experiments")}


def module_graph() -> dict[str, set[str]]:
    modules = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for folder in ("core", "experiments")
        for p in sorted((ROOT / folder).rglob("*.py"))
    }
    graph = {}
    for name, path in modules.items():
        graph[name] = {imported for imported in project_imports(path) if imported in modules and imported != name}
    return graph


def test_no_import_cycles():
    graph, cycles, done = module_graph(), [], set()

    def visit(name: str, stack: list[str]) -> None:
        if name in stack:
            cycles.append(" -> ".join(stack[stack.index(name) :] + [name]))
            return
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*stack, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert not cycles


PACKAGE = "experiments.synthetic_sequences"
# The rooms, lowest first: a module imports from its own room and the rooms below it, never above. A module's room is
# the longest prefix that names it; modules in no room (run_layout, arms, metrics, generate, ...) are shared by all.
# The trainer is a room apart: it and the analysis never read each other.
LAYERS = (
    "training.settings",  # a run's settings: what the planner turns into command lines
    "planning",  # the grid, its chunks, the bindings, the draws: torch- and pandas-free
    "analysis.records",  # what a run wrote, read and checked
    "analysis.statistics",  # tests, intervals, the shift fit: data in, numbers out
    "analysis.comparisons",  # the contrasts between arms and their readings, as codes
    "sequential",  # the sequential design: its looks decide with the comparisons
    "analysis.report",  # words and figures, the design's text included
    "analysis.tables",  # the tables' CLI: every room above, composed
    "planning.plan",  # the plan the Snakefile loads: every stage's questions, the design's looks among them
)
APART = "training"


def room_of(module: str) -> str | None:
    name = module.removeprefix(f"{PACKAGE}.")
    rooms = [room for room in (*LAYERS, APART) if name == room or name.startswith(f"{room}.")]
    return max(rooms, key=len, default=None)


def test_imports_run_one_way_through_the_rooms():
    wrong = []
    for name, imported in module_graph().items():
        room = room_of(name)
        if not name.startswith(PACKAGE) or room is None:
            continue
        for target in imported:
            other = room_of(target)
            if other is None or other == room:
                continue
            if room == APART or other == APART:
                allowed = room == APART and other == "training.settings"
            else:
                allowed = LAYERS.index(other) < LAYERS.index(room)
            if not allowed:
                wrong.append(f"{name} ({room}) imports {target} ({other})")
    assert not wrong


def test_every_room_of_the_analysis_holds_at_most_ten_modules_and_says_what_it_holds():
    packages = [ROOT / "experiments/synthetic_sequences" / name for name in ("analysis", "sequential")]
    packages += [path for path in packages[0].iterdir() if (path / "__init__.py").exists()]
    crowded = [f"{path.name}: {n}" for path in packages if (n := len([p for p in path.glob("*.py") if p.name != "__init__.py"])) > 10]
    silent = [path.name for path in packages if not ast.get_docstring(ast.parse((path / "__init__.py").read_text()))]
    assert not crowded and not silent, (crowded, silent)


def test_the_shared_modules_load_no_torch_or_pandas():
    """What the Snakefile and every rule may import: the planner, the run layout, the metric registry, the settings."""
    modules = [f"{PACKAGE}.{name}" for name in ("planning.grid", "planning.chunks", "planning.bindings", "planning.slurm_jobs")]
    modules += [f"{PACKAGE}.{name}" for name in ("run_layout", "metrics", "splits", "training.settings")]
    probe = "; ".join(f"import {name}" for name in modules) + "; import sys; print('torch' in sys.modules, 'pandas' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False False"


def test_the_run_directory_and_the_metric_names_have_one_home():
    """No module but run_layout spells a run file's name, and no list of metric names is kept outside the registry."""
    from experiments.synthetic_sequences.run_layout import PARTIAL_METRICS_LOG, RESUME, RUN_OUTPUTS

    spelled = []
    for path in SOURCES:
        if path.parts[len(ROOT.parts)] == "bench" or path.name == "run_layout.py":
            continue
        text = path.read_text()
        spelled += [f"{path.relative_to(ROOT)}: {name}" for name in (*RUN_OUTPUTS, PARTIAL_METRICS_LOG, RESUME) if f'"{name}"' in text]
    assert not spelled
