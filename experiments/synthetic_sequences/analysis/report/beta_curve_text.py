"""verdict.md's section on take-up over beta (comparisons/curve_table.py), for a config with a beta axis: k over the
population of blocks with its interval, the blocks' SD of sum's effect, the parallelism test and the reading per
(family, term, alpha), the fixed-block fit beside them, then observed against fitted take-up per (beta, mode)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from experiments.synthetic_sequences.analysis.comparisons.curve_table import KEYS
from experiments.synthetic_sequences.analysis.records.run_files import plural
from experiments.synthetic_sequences.analysis.statistics.beta_curves import MARGIN
from experiments.synthetic_sequences.analysis.statistics.population_curves import at_search_bound
from experiments.synthetic_sequences.sequential.curve_looks import curve_stops
from experiments.synthetic_sequences.sequential.text import earlier_design_lines

HEADING = "## Take-up over beta: does sum act as mean at another beta?"


def bound(value: float, decimals: str = ".3g") -> str:
    """An interval's end; one the profile did not reach within a factor of 1,000 is open."""
    return format(value, decimals) if 0 < value < math.inf else "open"


def interval(low: float, high: float) -> str:
    return f"[{bound(low)}, {bound(high)}]"


def estimate(value: float) -> str:
    return format(value, ".3g") if math.isfinite(value) else "none (no slope)"


def design_estimate(row: Mapping) -> str:
    """A curve design's k at its stopping look (sequential/curve_looks.curve_stops)."""
    return estimate(math.exp(row["design_log_k"]) if math.isfinite(row["design_log_k"]) else math.nan)


def design_interval(row: Mapping) -> str:
    """A curve design's interval of k at its stopping look's level (sequential/curve_looks.curve_stops)."""
    return interval(math.exp(row["design_log_low"]), math.exp(row["design_log_high"]))


def mode_sd(row: dict) -> str:
    """The SD of sum's effect over blocks; where the fit stopped it at its search bound, said so, with what the runs do
    identify there: its ratio to the slope, the SD of the blocks' shifts in log beta."""
    if at_search_bound(row["sd_mode"]):
        return f"{row['sd_mode']:.2g} (the search bound; in log beta {row['sd_mode'] / abs(row['slope']):.2g})"
    return f"{row['sd_mode']:.2g}"


def spread(row: dict) -> str:
    """The SD of sum's effect over blocks with its interval, whose lower end may be 0 (blocks that agree)."""
    return f"{mode_sd(row)} [{row['sd_mode_low']:.2g}, {bound(row['sd_mode_high'], '.2g')}]"


def curve_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The shift table as the verdict shows it."""
    rows = []
    for row in table.to_dict("records"):
        predicted = row["predicted_k"]
        resolve = f" (about {row['runs_to_resolve']:.0f} runs per beta and mode)" if row["runs_to_resolve"] > 0 else ""
        rows.append(
            {
                **{key: row[key] for key in KEYS},
                "betas": row["betas"],
                "blocks": row["blocks"],
                "runs": row["runs"],
                "k": estimate(row["k"]),
                "95% interval": interval(row["ci_low"], row["ci_high"]),
                "SD of sum's effect over blocks [95%]": spread(row),
                "SD p": row["sd_mode_p"],
                "parallelism p": row["parallel_p"],
                "fixed blocks: k [95%]": f"{estimate(row['fixed_k'])} {interval(row['fixed_low'], row['fixed_high'])}",
                "fixed blocks: parallelism p": row["fixed_parallel_p"],
                "fit p": row["fit_p"],
                "reading": row["reading"] + resolve,
                "scale predicts k": format(predicted, ".3g") if math.isfinite(predicted) else "-",
                "against the prediction": row["against_prediction"],
            }
        )
    return pd.DataFrame(rows)


def cell_lines(cells: pd.DataFrame) -> list[str]:
    """Per (family, term, alpha): took up / runs per beta and mode, the shift model's expected share beside."""
    lines = []
    for key, group in cells.groupby(KEYS, sort=True):
        wide = {}
        for row in group.to_dict("records"):
            wide.setdefault(row["beta"], {})[row["mode"]] = f"{row['took_up']}/{row['runs']} ({row['fitted']:.2f})"
        frame = pd.DataFrame([{"beta": beta, **by_mode} for beta, by_mode in sorted(wide.items())])
        lines += [f"**{key[0]} {key[1]} alpha={key[2]:g}**", "", frame.to_markdown(index=False, floatfmt="g"), ""]
    return lines


def design_lines(looks: Sequence[Mapping]) -> list[str]:
    """A curve design's account: per curve, the look it stopped at and why (or that it is still open), its runs, and
    k with its interval at the look's level (sequential/curve_design.py)."""
    if not looks:
        return []
    design = looks[0]["design"]
    rows = [
        {
            **{key: stop[key] for key in KEYS},
            "stopped": stop["design_stop"],
            "at look": stop["design_look"],
            "runs": stop["design_runs"],
            "look's alpha": stop["design_alpha"],
            "k": design_estimate(stop),
            "interval at the look's level": design_interval(stop),
            "reading at the look's level": stop["design_reading"],
        }
        for stop in curve_stops(looks)
    ]
    return [
        "### The curve design",
        "",
        f"{len(looks)} looks, a budget of {design['budget']} runs per curve, {plural(design['first_blocks'], 'block')} in "
        f"stage 1 and {design['stage_blocks']} new in each stage after, {design['placement']} placement, {design['alpha_spending']} "
        "spending. A curve stops when its parallelism p falls under the look's alpha (beyond scale), when k's interval at "
        f"the look's level lies within a factor of {design['precision']:g} of k (precise)"
        + (", when it reads no shift or a shift" if design["stop_at_reading"] else "")
        + ", or when another stage would pass its budget. Each look's interval and test are at level 1 - its alpha, and "
        "the looks' alphas add up to 0.05: whatever look a curve stopped at, its interval at the look's level covers k and "
        "its reading holds at least 95% of the time (simulated: 94-99%). The table above reads every run at 95% as a fixed "
        "design would: after the design's stops its interval covers k less often (simulated: 90-93%), so the design's "
        "interval and reading are these.",
        "",
        *earlier_design_lines(looks),
        pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3g"),
        "",
        f"Every run the design read, {sum(row['runs'] for row in rows)} in all, one row each with its block, stage, beta, mode "
        "and outcomes: `runs.csv` beside this file, from which every curve above refits. The sections below read only "
        "the betas where both modes ran.",
        "",
    ]


def design_next_line(looks: Sequence[Mapping]) -> str:
    """A curve design's verdict's last line: its own next step, said plainly. Curves that stopped at a reading or a
    precise interval are answered; one still open trains its next stage on the same command; one that ran out of its
    budget unresolved can only be resolved by a design with a larger budget (the budget fixes how each look spends
    alpha: this design cannot grow), in a results folder of its own."""
    stops = curve_stops(looks)
    named = lambda rows: ", ".join(f"{row['family']} {row['term']}" for row in rows)  # noqa: E731
    still_open = [stop for stop in stops if stop["design_stop"].startswith("open")]
    at_budget = [stop for stop in stops if stop["design_stop"] == "budget"]
    if still_open:
        opened = named(still_open)
        return f"The curve design is open after look {len(looks)} ({opened}): rerunning this pilot's command trains its next stage."
    if not at_budget:
        return "Every curve stopped at a decision of the design (table above): its answer stands, and nothing more needs training."
    budget = looks[0]["design"]["budget"]
    return (
        f"{named(at_budget)} stopped at the design's budget of {budget} runs per curve with its interval and reading as "
        "above. The budget sets how each look spends the design's alpha, so this design does not grow: resolving them takes "
        "a new curve design with a larger `design.budget` (and the `references:` its stages then need, which the config "
        "check names), in a results folder of its own. Adding seeds or blocks to this folder is refused."
    )


def beta_curve_section(table: pd.DataFrame, cells: pd.DataFrame, looks: Sequence[Mapping] = ()) -> list[str]:
    """verdict.md's curve section (module docstring), with a curve design's account where its looks are given."""
    lines = [HEADING, ""]
    if table.empty:
        return [*lines, "No (family, term) ran mean and sum at two betas or more: no curve to read.", ""]
    return [
        *lines,
        "k: sum at beta takes up as mean does at k x beta (a shift along log beta, what a change of the reconstruction "
        "scale predicts), read over the population of blocks: a binomial model of the take-up event with each reference "
        "block's own offset and own effect of sum drawn from normal distributions (lme4's `took_up ~ log_beta + sum + "
        "(1 + sum || block)`). Its 95% interval is the profile likelihood's. The SD of sum's effect over blocks (logit "
        "scale; p: the likelihood ratio of SD 0, on the boundary) says how far the blocks disagree about the shift. "
        "Parallelism p: Rao's score test of a mode x log beta slope (p < 0.05: sum changes the curve's shape, beyond "
        "scale). Beside them, as a check, the fit with the blocks that ran as fixed effects, and its goodness of fit (fit "
        "p: the shift model against one rate per (beta, mode)). "
        f"Readings, first that applies: beyond scale; no shift (the interval inside [1/{MARGIN:g}, "
        f"{MARGIN:g}]); a shift (the interval excludes 1); cannot be resolved. Each curve is read at 5% on its own: "
        f"{len(table)} curves, no adjustment across them.",
        "",
        curve_frame(table).to_markdown(index=False, floatfmt=".3g"),
        "",
        *design_lines(looks),
        "<details><summary>Observed against fitted: took up / runs per beta and mode (the fixed-block shift model's expected "
        "share)</summary>",
        "",
        *cell_lines(cells),
        "</details>",
        "",
        "The sections below read each beta as an arm of its own (`<family> b=<beta>`): sum against mean at that beta.",
        "",
    ]
