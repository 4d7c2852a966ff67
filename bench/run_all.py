"""Every benchmark in one run: figures against targets, a results file, the scaling plot, bench/README.md's table.

    bench/run_all                 # about 8 minutes on 2 cores
    python -m bench.run_all --out /tmp/bench   # write the results elsewhere and leave README.md alone

Writes <out>/latest.json (machine, commands, figures, curves) and <out>/scaling.png,
and with the default --out rewrites the results section of bench/README.md.
Exits 1 when any target is missed, after writing everything.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from bench import dag, lockstep, losses, pilot, tables, term_costs, trainer, zfree
from bench.common import REPO, BenchResult, machine, print_result
from experiments.synthetic_sequences.planning.slurm_jobs import slurm_client_without_controller

BENCHMARKS = (losses, term_costs, zfree, trainer, lockstep, tables, dag, pilot)
DEFAULT_OUT = REPO / "bench" / "results"
README = REPO / "bench" / "README.md"
SECTION = re.compile(r"(<!-- results:begin -->\n).*(<!-- results:end -->)", re.S)


def plot_scaling(results: list[BenchResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("snakemake -n (dry run)", {k: v for r in results for k, v in r.curves.items() if k.startswith("dry run")}),
        ("tables: extract every run + aggregate", {k: v for r in results for k, v in r.curves.items() if k.startswith("tables")}),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (title, curves) in zip(axes, panels, strict=True):
        for name, curve in curves.items():
            ax.plot(curve["runs"], curve["seconds"], marker="o", label=name.split(": ", 1)[1])
        if curves:
            first = next(iter(curves.values()))
            runs, seconds = first["runs"], first["seconds"]
            ax.plot(runs, [seconds[-1] * r / runs[-1] for r in runs], ":", color="grey", label="linear through the last point")
        ax.set(xscale="log", yscale="log", xlabel="runs in the grid", ylabel="seconds", title=title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown_table(results: list[BenchResult]) -> str:
    lines = ["| benchmark | figure | measured | target | met | note |", "|---|---|---|---|---|---|"]
    for result in results:
        for f in result.figures:
            target = f"{f.target}{'' if f.unit in ('x', '%', '') else ' ' + f.unit}" if f.target else ""
            met = {True: "yes", False: "**no**", None: ""}[f.met]
            lines.append(f"| {f.benchmark} | {f.name} | {f.formatted()} | {target} | {met} | {f.note} |")
    return "\n".join(lines)


def results_section(results: list[BenchResult], host: dict, total_s: float) -> str:
    commands = "\n".join(f"    {r.command}   # {r.seconds:.0f} s" for r in results)
    gpu = host["gpu"] or "no GPU"
    return (
        f"Latest `bench/run_all`: {host['date']}, commit {host['git_commit']}, {total_s / 60:.1f} minutes.\n"
        f"Machine: {host['cpu']}, {host['cores']} cores, {host['memory_gib']} GiB, {gpu}; "
        f"Python {host['python']}, torch {host['torch']}.\n\n"
        f"{commands}\n\n{markdown_table(results)}\n\n![scaling curves](results/scaling.png)\n"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if slurm_client_without_controller():
        print(
            "warning: Slurm's client is installed but no controller answers, so every snakemake start waits ~10 s in the "
            "slurm plugin and the DAG and pilot figures include that wait; start one (scripts/slurm-test-cluster/start) "
            "or run on a machine without the client",
            file=sys.stderr,
        )
    started = time.perf_counter()
    results = []
    for module in BENCHMARKS:
        print(f"# {module.__name__}", file=sys.stderr, flush=True)
        result = module.measure()
        print_result(result)
        results.append(result)
    total_s = time.perf_counter() - started
    host = machine()

    args.out.mkdir(parents=True, exist_ok=True)
    record = {"machine": host, "seconds": total_s, "results": [r.to_dict() for r in results]}
    (args.out / "latest.json").write_text(json.dumps(record, indent=2) + "\n")
    plot_scaling(results, args.out / "scaling.png")
    if args.out.resolve() == DEFAULT_OUT.resolve():
        text = README.read_text()
        if not SECTION.search(text):
            raise SystemExit(f"{README} lacks the <!-- results:begin --> / <!-- results:end --> markers")
        README.write_text(SECTION.sub(lambda m: m.group(1) + results_section(results, host, total_s) + m.group(2), text))
    missed = [f"{f.benchmark}: {f.name}" for r in results for f in r.figures if f.met is False]
    print(f"\nall benchmarks: {total_s / 60:.1f} minutes; results in {args.out}", file=sys.stderr)
    if missed:
        print("missed targets:\n  " + "\n  ".join(missed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
