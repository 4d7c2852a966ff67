"""The sequential design's error rate, power and cost, by simulation through its own decision code.

    python -m bench.sequential_design [--draws 2000] [--looks 5x2 5x3 5x4] [--max-runs-per-arm 20] [--alpha-spending obrien-fleming]

Take-up outcomes are drawn per (arm, reference block, seed) and read look by look with
`analysis.sequential.look_decisions`, the code the pipeline's looks run, on the design given (parsed by
`planning.design.parse_design`, as a config's `design` block is):

  null          every arm at one take-up rate per block (the blocks alike, or differing: 0.1 / 0.5 / 0.9 in turn).
                Family-wise error: the share of pilots in which any planned contrast is decided "raises" or "lowers",
                beside the habit the fixed verdict invites: read Holm at 0.05 at every look, and stop at the first
                "raises" (`naive_decisions`), and beside one fixed reading at the design's largest look.
  alternative   the rates this project measures (mean 0.05, sum 0.7, scale 0.5, balance 0.05 in every block):
                the share of pilots deciding sum - mean "raises", and the runs each arm trained on average, against
                the fixed design of the largest look.
A simulation, not a timing: it prints its table and the command.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from experiments.synthetic_sequences.analysis.sequential import arms_to_train, look_decisions, naive_decisions
from experiments.synthetic_sequences.planning.design import OPEN, Design, parse_design

ARMS = ("mean", "sum", "scale", "balance")
NULLS = {"0.1 in every block": [0.1], "0.3 in every block": [0.3], "0.5 in every block": [0.5], "blocks 0.1 / 0.5 / 0.9": [0.1, 0.5, 0.9]}
MEASURED = {"mean": 0.05, "sum": 0.7, "scale": 0.5, "balance": 0.05}
DIFFERENT = ("raises", "lowers")


def draw_outcomes(rates: dict[str, list[float]], references: int, seeds: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """took_up [references, seeds] per arm; block r's rate is rates[arm][r % len(rates[arm])]."""
    return {arm: rng.random((references, seeds)) < np.resize(np.asarray(rate), references)[:, None] for arm, rate in rates.items()}


def counts_at(outcomes: dict[str, np.ndarray], references: int, seeds: int) -> dict[str, dict[int, tuple[int, int]]]:
    """Every arm's take-up counts by block at a look: its first `references` blocks, the first `seeds` seeds of each."""
    return {arm: {r: (int(took_up[r, :seeds].sum()), seeds) for r in range(references)} for arm, took_up in outcomes.items()}


def sequential_pilot(design: Design, outcomes: dict[str, np.ndarray]) -> tuple[dict, dict[str, int]]:
    """The design's final decisions and the runs each arm trained."""
    decisions, trained, training = {}, dict.fromkeys(outcomes, 0), list(outcomes)
    for look in design.looks:
        for arm in training:
            trained[arm] = look.runs_per_arm
        decisions = look_decisions(counts_at(outcomes, look.references, look.seeds), decisions, design, look.number)
        training = arms_to_train(decisions)
        if not training:
            break
    return decisions, trained


def naive_pilot(design: Design, outcomes: dict[str, np.ndarray]) -> bool:
    """Whether rereading the fixed verdict at each look calls any difference before the last look ends."""
    for look in design.looks:
        if any(decision != OPEN for decision in naive_decisions(counts_at(outcomes, look.references, look.seeds)).values()):
            return True
    return False


def fixed_pilot(design: Design, outcomes: dict[str, np.ndarray]) -> dict[str, str]:
    last = design.looks[-1]
    return naive_decisions(counts_at(outcomes, last.references, last.seeds))


def se(share: float, draws: int) -> float:
    return math.sqrt(max(share * (1 - share), 0.25 / draws) / draws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000, help="simulated pilots per row")
    parser.add_argument("--looks", nargs="+", default=["5x2", "5x3", "5x4"], help="references x seeds per reference at each look")
    parser.add_argument("--max-runs-per-arm", type=int, default=20)
    parser.add_argument("--alpha-spending", default="obrien-fleming")
    args = parser.parse_args()
    looks = [dict(zip(("references", "seeds"), map(int, look.split("x")), strict=True)) for look in args.looks]
    block = {"kind": "sequential", "looks": looks, "alpha_spending": args.alpha_spending, "max_runs_per_arm": args.max_runs_per_arm}
    design = parse_design(block)
    last = design.looks[-1]
    rng = np.random.default_rng(0)
    looks = ", ".join(f"{look.references}x{look.seeds} (alpha {design.increment(look.number, 0.05):.4f})" for look in design.looks)
    print(f"design: {design.alpha_spending}, looks {looks}; {args.draws} pilots per row")
    print("| null: take-up rate | sequential FWER | naive reread FWER | one fixed look at the largest |\n|---|---|---|---|")
    for label, rates in NULLS.items():
        counts = np.zeros(3)
        for _ in range(args.draws):
            outcomes = draw_outcomes(dict.fromkeys(ARMS, rates), last.references, last.seeds, rng)
            decisions, _ = sequential_pilot(design, outcomes)
            counts += [
                any(d.decision in DIFFERENT for d in decisions.values()),
                naive_pilot(design, outcomes),
                any(d in DIFFERENT for d in fixed_pilot(design, outcomes).values()),
            ]
        shares = counts / args.draws
        print(f"| {label} | " + " | ".join(f"{s:.3f} (se {se(s, args.draws):.3f})" for s in shares) + " |")
    power, fixed_power, trained, deciding_look = 0, 0, dict.fromkeys(ARMS, 0), [0] * len(design.looks)
    for _ in range(args.draws):
        outcomes = draw_outcomes({arm: [rate] for arm, rate in MEASURED.items()}, last.references, last.seeds, rng)
        decisions, runs = sequential_pilot(design, outcomes)
        if decisions["sum-mean"].decision == "raises":
            power += 1
            deciding_look[decisions["sum-mean"].look - 1] += 1
        fixed_power += fixed_pilot(design, outcomes)["sum-mean"] == "raises"
        for arm in ARMS:
            trained[arm] += runs[arm]
    rates = ", ".join(f"{arm} {rate}" for arm, rate in MEASURED.items())
    print(f"\nalternative ({rates}):")
    fixed = f"fixed at {last.runs_per_arm} runs per arm {fixed_power / args.draws:.3f}"
    print(f"  P(sum - mean raises): sequential {power / args.draws:.3f}, {fixed}")
    looks_line = ", ".join(f"look {k} {n / args.draws:.3f}" for k, n in enumerate(deciding_look, start=1))
    print(f'  sum - mean decided "raises" at: {looks_line}')
    runs = {arm: total / args.draws for arm, total in trained.items()}
    print("  expected runs per arm: " + ", ".join(f"{arm} {n:.1f}" for arm, n in runs.items()) + f" (fixed: {last.runs_per_arm} each)")
    print(
        f"command: python -m bench.sequential_design --draws {args.draws} --looks {' '.join(args.looks)} "
        f"--max-runs-per-arm {args.max_runs_per_arm} --alpha-spending {args.alpha_spending}"
    )


if __name__ == "__main__":
    main()
