"""The verdict: for each family, term and alpha, does sum change I(x;z) and NMI, and which confound accounts for it.

Read from the paired contrasts (contrasts.py), with a smallest effect of interest m per metric (MARGINS):

  effect of sum (sum - mean interval):
    higher / lower   the interval excludes 0
    no change        the interval lies inside [-m, +m]
    inconclusive     neither (or fewer than 2 seeds): `seeds_to_resolve` gives how many seeds would, at the
                     observed mean difference and paired sd, either exclude 0 or fit inside [-m, +m]
  each control C (scale, balance) for an effect that is higher / lower, from the sum - C interval:
    accounts         inside [-m, +m]: C reproduces sum's value
    falls short      excludes 0 on the effect's side: sum goes beyond what C reproduces
    overshoots       excludes 0 on the other side: C goes beyond sum
    unclear          neither
  accounted_for: `scale`, `balance` or `both` (the controls that account), `neither` (every control run is
    determined and none accounts), `inconclusive` (some control is unclear), `no controls run`.
A verdict that rests on any run not flagged converged says so.
"""

from __future__ import annotations

import math

import pandas as pd

from experiments.synthetic_sequences.disentangled.contrasts import arms, seeds_to_resolve

VERDICT_METRICS = ("mutual_information", "nmi")
MARGINS = {"mutual_information": 0.05, "nmi": 0.05}  # smallest effect of interest: nats of I(x;z); NMI units
LABELS = {"mutual_information": "I(x;z)", "nmi": "NMI"}
CONTROL_ARMS = ("scale", "balance")
COLUMNS = [
    "family",
    "term",
    "alpha",
    "metric",
    "n",
    "sum_minus_mean",
    "ci_low",
    "ci_high",
    "effect",
    "accounted_for",
    "seeds_to_resolve",
    "runs",
    "unconverged_runs",
    "verdict",
]


def classify_effect(row, margin: float) -> str:
    if row["n"] < 2 or not math.isfinite(row["ci_low"]):
        return "inconclusive"
    if row["ci_low"] > 0:
        return "higher"
    if row["ci_high"] < 0:
        return "lower"
    if -margin <= row["ci_low"] and row["ci_high"] <= margin:
        return "no change"
    return "inconclusive"


def control_status(row, effect: str, margin: float) -> str:
    """How the sum - C interval places control C against an effect that is `higher` or `lower`."""
    kind = classify_effect(row, margin)
    if kind == "no change":
        return "accounts"
    if kind == "inconclusive":
        return "unclear"
    return "falls short" if kind == effect else "overshoots"


def accounted_for(statuses: dict[str, str]) -> str:
    if not statuses:
        return "no controls run"
    if "unclear" in statuses.values():
        return "inconclusive"
    accounting = [kind for kind in CONTROL_ARMS if statuses.get(kind) == "accounts"]
    if len(accounting) == 2:
        return "both"
    return accounting[0] if accounting else "neither"


def interval_text(row) -> str:
    if not math.isfinite(row["ci_low"]):
        return f"{row['delta']:+.3f} (n={row['n']}, no interval)"
    return f"{row['delta']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}]"


def judge(effect_row: dict, control_rows: dict[str, dict], margin: float) -> dict:
    """effect, each control's status, accounted_for and seeds_to_resolve for one sum - mean contrast and its controls."""
    effect = classify_effect(effect_row, margin)
    if effect not in ("higher", "lower"):
        needed = seeds_to_resolve(effect_row["delta"], effect_row["sd"], margin) if effect == "inconclusive" else math.nan
        return {"effect": effect, "statuses": {}, "accounted_for": "-", "seeds_to_resolve": needed}
    statuses = {kind: control_status(row, effect, margin) for kind, row in control_rows.items()}
    unclear = [seeds_to_resolve(control_rows[k]["delta"], control_rows[k]["sd"], margin) for k, s in statuses.items() if s == "unclear"]
    return {
        "effect": effect,
        "statuses": statuses,
        "accounted_for": accounted_for(statuses),
        "seeds_to_resolve": max(unclear, default=math.nan),
    }


def sentence(where: str, metric: str, effect_row: dict, control_rows: dict[str, dict], judged: dict, runs: int, unconverged: int) -> str:
    label, effect = LABELS[metric], judged["effect"]
    verb = {"higher": f"raises {label}", "lower": f"lowers {label}", "no change": f"does not change {label}"}.get(
        effect, f"may or may not change {label}"
    )
    text = f"{where}: sum {verb}: sum - mean {interval_text(effect_row)}, n={effect_row['n']} seeds"
    if judged["statuses"]:
        details = "; ".join(f"sum - {kind} {interval_text(control_rows[kind])}: {status}" for kind, status in judged["statuses"].items())
        text += f". Accounted for by: {judged['accounted_for']} ({details})"
    elif effect in ("higher", "lower"):
        text += ". No control was run, so scale and length weighting cannot be told apart"
    needed = judged["seeds_to_resolve"]
    if not math.isnan(needed):
        text += f". Inconclusive: {'more than 1000' if needed == math.inf else int(needed)} seeds would resolve it at the observed sd"
    if unconverged:
        text += f". Rests on {unconverged} of {runs} runs not flagged converged"
    return text + "."


def verdict_table(runs: pd.DataFrame, contrasts: pd.DataFrame, control_of: dict[str, str]) -> pd.DataFrame:
    """One row per (main family, term, alpha, verdict metric) with a sum - mean contrast; see the module docstring."""
    rows = []
    family_arms = arms(runs, control_of)
    index = contrasts.set_index(["family", "term", "alpha", "comparison", "metric"]).sort_index()
    effects = contrasts[(contrasts.comparison == "sum-mean") & contrasts.metric.isin(VERDICT_METRICS)]
    for effect_row in effects.to_dict("records"):
        family, term, alpha, metric = effect_row["family"], effect_row["term"], effect_row["alpha"], effect_row["metric"]
        control_rows = {
            kind: index.loc[(family, term, alpha, f"sum-{kind}", metric)].to_dict()
            for kind in CONTROL_ARMS
            if (family, term, alpha, f"sum-{kind}", metric) in index.index
        }
        judged = judge(effect_row, control_rows, MARGINS[metric])
        names = ("mean", "sum", *control_rows)
        involved = pd.concat(arm[(arm.term == term) & (arm.alpha == alpha)] for name, arm in family_arms[family].items() if name in names)
        unconverged = int((involved["converged"] < 1).sum()) if "converged" in involved else 0
        where = f"{family} {term} alpha={alpha:g}"
        rows.append(
            {
                "family": family,
                "term": term,
                "alpha": alpha,
                "metric": metric,
                "n": effect_row["n"],
                "sum_minus_mean": effect_row["delta"],
                "ci_low": effect_row["ci_low"],
                "ci_high": effect_row["ci_high"],
                "effect": judged["effect"],
                "accounted_for": judged["accounted_for"],
                "seeds_to_resolve": judged["seeds_to_resolve"],
                "runs": len(involved),
                "unconverged_runs": unconverged,
                "verdict": sentence(where, metric, effect_row, control_rows, judged, len(involved), unconverged),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def markdown(frame: pd.DataFrame, floatfmt: str) -> str:
    """A Markdown table with '-' where a value is missing (an interval from one seed, say) rather than 'nan'."""
    return frame.astype(object).where(frame.notna(), None).to_markdown(index=False, floatfmt=floatfmt, missingval="-")


def verdict_markdown(verdict: pd.DataFrame) -> str:
    """The verdict for a reader: the rule, then one sentence per family, term, alpha and metric, then the table."""
    rule = __doc__.split("\n\n", 1)[1].strip()
    lines = ["# Verdict: does token-sum change latent usage and strategy separation?", "", "```", rule, "```", ""]
    lines += [f"- {text}" for text in verdict["verdict"]] or ["- no family has both a mean and a sum run: nothing to compare"]
    shown = verdict.drop(columns=["verdict"])
    lines += ["", markdown(shown, floatfmt=".3g") if not shown.empty else ""]
    return "\n".join(lines) + "\n"
