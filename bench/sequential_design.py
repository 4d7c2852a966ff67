"""The sequential design's error rate, power and cost, by simulation through its own decision code.

    python -m bench.sequential_design [--draws 2000] [--looks 5x2 5x3 5x4] [--max-runs-per-arm 20] [--alpha-spending obrien-fleming]
        [--arms mean sum scale balance] [--alternative mean=0.05 sum=0.7 scale=0.5 balance=0.05]

Take-up outcomes are drawn per (arm, reference block, seed) and read look by look with
`sequential.decisions.look_decisions`, the code the pipeline's looks run, on the design given (parsed by
`sequential.design.parse_design`, as a config's `design` block is):

  null          every arm at one take-up rate per block (the blocks alike, or differing: 0.1 / 0.5 / 0.9 in turn),
                every pair of arms 0.3 (the margin) or more apart (no "equivalent" is true), and a partial null
                (mean = balance, sum = scale, the pairs across 0.68 apart). Family-wise error of either kind: the
                share of pilots in which any contrast is decided falsely, "raises"/"lowers" where the rates are
                equal (or the direction is wrong) or "equivalent" where they lie the margin or more apart; each kind
                apart; beside the habit the fixed verdict invites: read Holm at 0.05 at every look, and stop at the
                first "raises" (`naive_decisions`), and beside one fixed reading at the design's largest look.
  alternative   the rates this project measures for raw (mean 0.05, sum 0.7, scale 0.5, balance 0.05 in every block),
                or those given by --alternative:
                the share of pilots deciding sum - mean "raises", and the runs each arm trained on average, against
                the fixed design of the largest look.
--arms mean sum simulates a term without controls (dist, tokcc, the hybrid: one planned contrast, m = 1); each null
keeps the rates of the arms given. A simulation, not a timing: it prints its table and the command.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping

import numpy as np

from experiments.synthetic_sequences.analysis.comparisons.contrasts import MARGINS
from experiments.synthetic_sequences.analysis.statistics import inference, multiplicity
from experiments.synthetic_sequences.arms import ARMS, TOOK_UP
from experiments.synthetic_sequences.sequential.decisions import Counts, arms_to_train, look_decisions, planned, tested
from experiments.synthetic_sequences.sequential.design import EQUIVALENT, OPEN, Design, parse_design

NULLS = {  # the arms' rates per block
    **{f"all at {rate} in every block": dict.fromkeys(ARMS, [rate]) for rate in (0.1, 0.3, 0.5)},
    "all at blocks 0.1 / 0.5 / 0.9": dict.fromkeys(ARMS, [0.1, 0.5, 0.9]),
    "0.3 apart: mean 0.1, sum 0.4, scale 0.7, balance 1.0": {"mean": [0.1], "sum": [0.4], "scale": [0.7], "balance": [1.0]},
    "partial: mean = balance 0.02, sum = scale 0.7": {"mean": [0.02], "sum": [0.7], "scale": [0.7], "balance": [0.02]},
}
MEASURED = {"mean": 0.05, "sum": 0.7, "scale": 0.5, "balance": 0.05}
DIFFERENT = ("raises", "lowers")


def naive_decisions(arms: Mapping[str, Counts], alpha: float = inference.ALPHA) -> dict[str, str]:
    """What rereading the fixed verdict does at any n: Holm at the full alpha over every planned contrast."""
    results = tested(arms, planned(arms))
    adjusted = multiplicity.adjust([p for _, _, p in results], "holm") if results else []
    decisions = {}
    for (name, (k_a, n_a, k_b, n_b), _), p_adjusted in zip(results, adjusted, strict=True):
        decisions[name] = "raises" if k_a / n_a > k_b / n_b else "lowers"
        if not multiplicity.rejects(p_adjusted, alpha):
            decisions[name] = OPEN
    return decisions


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


def false_kinds(decisions: dict, rates: dict[str, list[float]]) -> tuple[bool, bool]:
    """Whether any decision is a false "raises"/"lowers" (equal rates, or the wrong direction), and whether any is a
    false "equivalent" (rates the margin or more apart), with every block at its arm's first rate."""
    different = equivalent = False
    for name, decision in decisions.items():
        a, b = name.split("-")
        gap = rates[a][0] - rates[b][0]
        label = decision if isinstance(decision, str) else decision.decision
        different |= label in DIFFERENT and (gap == 0 or (label == "raises") != (gap > 0))
        equivalent |= label == EQUIVALENT and abs(gap) >= MARGINS[TOOK_UP] - 1e-12
    return different, equivalent


def se(share: float, draws: int) -> float:
    return math.sqrt(max(share * (1 - share), 0.25 / draws) / draws)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000, help="simulated pilots per row")
    parser.add_argument("--looks", nargs="+", default=["5x2", "5x3", "5x4"], help="references x seeds per reference at each look")
    parser.add_argument("--max-runs-per-arm", type=int, default=20)
    parser.add_argument("--alpha-spending", default="obrien-fleming")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS, help="the arms of the simulated term")
    parser.add_argument("--alternative", nargs="+", default=[f"{arm}={rate}" for arm, rate in MEASURED.items()], help="arm=rate")
    args = parser.parse_args()
    if not {"mean", "sum"} <= set(args.arms):
        parser.error("--arms: a term has at least the mean and the sum arm")
    args.rates = {arm: float(rate) for arm, rate in (item.split("=") for item in args.alternative)}
    if set(args.rates) != set(args.arms):
        parser.error(f"--alternative: give a rate for each of --arms {' '.join(args.arms)}")
    return args


def main() -> None:
    args = parse_args()
    alternative = args.rates
    looks = [dict(zip(("references", "seeds"), map(int, look.split("x")), strict=True)) for look in args.looks]
    block = {"kind": "sequential", "looks": looks, "alpha_spending": args.alpha_spending, "max_runs_per_arm": args.max_runs_per_arm}
    design = parse_design(block)
    last = design.looks[-1]
    rng = np.random.default_rng(0)
    looks = ", ".join(f"{look.references}x{look.seeds} (alpha {design.increment(look.number, 0.05):.4f})" for look in design.looks)
    print(f"design: {design.alpha_spending}, looks {looks}; {args.draws} pilots per row")
    print(
        "| null | sequential: any false decision | false raises/lowers | false equivalent | naive reread FWER | "
        "one fixed look at the largest |\n|---|---|---|---|---|---|"
    )
    for label, every_rate in NULLS.items():
        rates = {arm: every_rate[arm] for arm in args.arms}
        counts = np.zeros(5)
        for _ in range(args.draws):
            outcomes = draw_outcomes(rates, last.references, last.seeds, rng)
            decisions, _ = sequential_pilot(design, outcomes)
            different, equivalent = false_kinds(decisions, rates)
            counts += [
                different or equivalent,
                different,
                equivalent,
                naive_pilot(design, outcomes),
                false_kinds(fixed_pilot(design, outcomes), rates)[0],
            ]
        cells = [f"{share:.4f} (se {se(share, args.draws):.4f})" for share in counts / args.draws]
        if len({tuple(rate) for rate in rates.values()}) > 1:
            cells[3] = "-"  # naive_pilot counts any difference called: an error only where every arm is alike
        print(f"| {label} | " + " | ".join(cells) + " |")
    power, fixed_power, trained, deciding_look = 0, 0, dict.fromkeys(args.arms, 0), [0] * len(design.looks)
    for _ in range(args.draws):
        outcomes = draw_outcomes({arm: [rate] for arm, rate in alternative.items()}, last.references, last.seeds, rng)
        decisions, runs = sequential_pilot(design, outcomes)
        if decisions["sum-mean"].decision == "raises":
            power += 1
            deciding_look[decisions["sum-mean"].look - 1] += 1
        fixed_power += fixed_pilot(design, outcomes)["sum-mean"] == "raises"
        for arm in args.arms:
            trained[arm] += runs[arm]
    rates = ", ".join(f"{arm} {rate}" for arm, rate in alternative.items())
    print(f"\nalternative ({rates}):")
    fixed = f"fixed at {last.runs_per_arm} runs per arm {fixed_power / args.draws:.3f}"
    print(f"  P(sum - mean raises): sequential {power / args.draws:.3f}, {fixed}")
    looks_line = ", ".join(f"look {k} {n / args.draws:.3f}" for k, n in enumerate(deciding_look, start=1))
    print(f'  sum - mean decided "raises" at: {looks_line}')
    runs = {arm: total / args.draws for arm, total in trained.items()}
    print("  expected runs per arm: " + ", ".join(f"{arm} {n:.1f}" for arm, n in runs.items()) + f" (fixed: {last.runs_per_arm} each)")
    print(
        f"command: python -m bench.sequential_design --draws {args.draws} --looks {' '.join(args.looks)} "
        f"--max-runs-per-arm {args.max_runs_per_arm} --alpha-spending {args.alpha_spending} --arms {' '.join(args.arms)} "
        f"--alternative {' '.join(args.alternative)}"
    )


if __name__ == "__main__":
    main()
