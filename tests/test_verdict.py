"""The verdict rule on constructed run tables whose answer is known."""

import re

import pandas as pd
import pytest

from experiments.synthetic_sequences.analysis.comparisons.contrasts import contrast_table
from experiments.synthetic_sequences.analysis.comparisons.takeup_table import arm_table
from experiments.synthetic_sequences.analysis.report.cross_term import (
    ACROSS,
    DESIGN_DECISION,
    TERM_LABEL,
    cross_term_table,
    holm_across,
    planned_contrasts,
)
from experiments.synthetic_sequences.analysis.report.verdict import verdict_table
from experiments.synthetic_sequences.analysis.report.verdict_text import verdict_markdown
from experiments.synthetic_sequences.analysis.statistics import inference, stratified
from experiments.synthetic_sequences.sequential.decisions import look_groups
from experiments.synthetic_sequences.sequential.design import parse_design
from experiments.synthetic_sequences.sequential.look_files import look_document

CONTROL_OF = {"main-scale": "main", "main-balance": "main"}
ARMS = {"mean": ("main", "none", "mean"), "sum": ("main", "none", "sum"), "scale": ("main-scale", "scale", "mean")}
ARMS["balance"] = ("main-balance", "balance", "sum")
BUDGET = 1500


def arm_runs(arm: str, took_up: int, seeds: int, *, mi: float = 0.8, information: float = 0.4, onset: float = 600.0) -> list[dict]:
    """`seeds` runs of `arm`, the first `took_up` of which take up the latent at `onset` with final I(x;z) `mi`; the
    rest stay at 0 and are censored at the budget. A run that took up has strategy information `information`."""
    family, controls, mode = ARMS[arm]
    rows = []
    for seed in range(seeds):
        up = seed < took_up
        rows.append(
            {
                "family": family,
                "reference": 0,
                "numerics": "AVX2 kernels, a test CPU, 1 thread, float32, torch 2.13.0+cpu, eager, 1 seed per pass",
                "execution": "sequential, 2 seeds per process",
                "model": "shared_discrete",
                "controls": controls,
                "term": "raw",
                "mode": mode,
                "alpha": 0.0,
                "beta": 0.05,
                "seed": seed,
                "took_up": float(up),
                "onset_step": onset + 150 * (seed % 3) if up else float(BUDGET),
                "onset_observed": float(up),
                "budget_step": float(BUDGET),
                "mutual_information": mi + 0.01 * (seed % 4) if up else 0.0,
                "strategy_information": information + 0.01 * (seed % 4) if up else 0.0,
                "converged": 1.0,
            }
        )
    return rows


def runs(*arms: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([row for arm in arms for row in arm])


def verdict(table: pd.DataFrame) -> dict[str, dict]:
    rows = verdict_table(table, contrast_table(table, CONTROL_OF), CONTROL_OF)
    return {row["endpoint"]: row for row in rows.to_dict("records")}


def test_take_up_of_every_sum_seed_and_no_mean_seed_reads_raises_take_up():
    lines = verdict(runs(arm_runs("mean", 0, 10), arm_runs("sum", 10, 10)))
    takeup = lines["take-up"]
    assert takeup["reading"] == "raises" and "sum raises take-up" in takeup["verdict"]
    assert "mean 0/10, sum 10/10" in takeup["verdict"] and (takeup["n_a"], takeup["n_b"]) == (10, 10)
    assert takeup["estimate"] == 1.0 and takeup["p_adjusted"] < 0.001
    assert "No control was run" in takeup["verdict"]
    assert lines["onset"]["reading"] == "earlier"
    assert lines["separation"]["reading"] == "raises"
    # mean never took up: magnitude has no seed pair in which both took up, and says so
    assert lines["magnitude"]["reading"] == "not comparable" and "nothing to pair" in lines["magnitude"]["verdict"]


def test_identical_arms_read_no_difference():
    arms = [arm_runs(arm, 10, 10) for arm in ("mean", "sum", "scale", "balance")]
    lines = verdict(runs(*arms))
    assert {name: line["reading"] for name, line in lines.items()} == {
        "take-up": "no difference",
        "onset": "cannot be told apart",
        "magnitude": "no difference",
        "separation": "no difference",
    }
    assert all(line["scale"] == "-" and line["balance"] == "-" for line in lines.values())  # no effect: no shares


def test_two_of_three_against_none_of_three_cannot_be_resolved_at_n_3_and_says_the_smallest_p():
    lines = verdict(runs(arm_runs("mean", 0, 3), arm_runs("sum", 2, 3)))
    takeup = lines["take-up"]
    assert takeup["reading"] == "cannot be resolved"
    assert "cannot be resolved at n = 3 per arm" in takeup["verdict"]
    assert takeup["smallest_p"] == pytest.approx(1 / 32)  # Boschloo's p for 3/3 vs 0/3: max over pi of 2 pi^3 (1-pi)^3
    assert "the smallest p boschloo can give at this n is 0.031" in takeup["verdict"]
    assert takeup["seeds_needed"] > 3 and f"about {int(takeup['seeds_needed'])} seeds per arm" in takeup["verdict"]


def test_with_five_planned_contrasts_no_outcome_at_n_3_can_reach_0_05_under_holm():
    arms = [arm_runs("mean", 0, 3), arm_runs("sum", 3, 3), arm_runs("scale", 0, 3), arm_runs("balance", 0, 3)]
    takeup = verdict(runs(*arms))["take-up"]
    assert takeup["reading"] == "cannot be resolved"
    assert "(0.16 under Holm over 5 contrasts), so no outcome at this n reaches 0.05" in takeup["verdict"]


def test_a_scale_control_equal_to_sum_reproduces_all_of_it():
    arms = [arm_runs("mean", 0, 10), arm_runs("sum", 10, 10), arm_runs("scale", 10, 10), arm_runs("balance", 0, 10)]
    takeup = verdict(runs(*arms))["take-up"]
    assert (takeup["reading"], takeup["scale"], takeup["balance"]) == ("raises", "all of it", "none of it")
    assert "Scale reproduces all of it" in takeup["verdict"] and "balance reproduces none of it" in takeup["verdict"]


def test_a_control_halfway_between_mean_and_sum_reproduces_part_of_it():
    arms = [arm_runs("mean", 0, 20), arm_runs("sum", 20, 20), arm_runs("scale", 10, 20)]
    lines = verdict(runs(*arms))
    assert (lines["take-up"]["reading"], lines["take-up"]["scale"]) == ("raises", "part of it")
    assert lines["take-up"]["balance"] == "-"  # not run


def test_an_interval_that_excludes_0_inside_the_margin_reads_below_the_smallest_effect_of_interest():
    mean = arm_runs("mean", 10, 10, information=0.40)
    total = arm_runs("sum", 10, 10, information=0.42)  # +0.02 on every seed: the interval is [0.02, 0.02]
    separation = verdict(runs(mean, total))["separation"]
    assert separation["ci_low"] > 0 and separation["ci_high"] < 0.05
    assert separation["reading"] == "below the smallest effect of interest"
    assert "raises" not in separation["verdict"]


def test_magnitude_is_read_among_the_seeds_that_took_up_in_both_arms():
    mean = arm_runs("mean", 7, 10, mi=0.4)
    total = arm_runs("sum", 10, 10, mi=0.9)
    magnitude = verdict(runs(mean, total))["magnitude"]
    assert (magnitude["n_a"], magnitude["n_b"]) == (7, 7) and magnitude["estimate"] == pytest.approx(0.5)
    # the exact sign-flip p is 2/2^7; Benjamini-Hochberg with strategy information (p = 1) doubles it, still < 0.05
    assert magnitude["p"] == pytest.approx(2 / 128) and magnitude["p_adjusted"] == pytest.approx(4 / 128)
    assert magnitude["reading"] == "raises"


def test_no_table_has_an_all_nan_row_and_every_line_names_its_runs():
    arms = [arm_runs("mean", 0, 3), arm_runs("sum", 2, 3), arm_runs("scale", 1, 3), arm_runs("balance", 0, 3)]
    table = runs(*arms)
    contrasts = contrast_table(table, CONTROL_OF)
    lines = verdict_table(table, contrasts, CONTROL_OF)
    for frame in (contrasts, lines, arm_table(table, CONTROL_OF)):
        assert not frame.empty and not frame.isna().all(axis=1).any()
    assert lines.runs.str.contains("mean: main/ref0/raw_mean_0 seeds 0-2; sum: main/ref0/raw_sum_0 seeds 0-2").all()
    text = verdict_markdown(lines, table, CONTROL_OF)
    assert text.startswith("# Verdict") and text.count("\n- ") == 4
    assert re.search(r"\|\s+seed \| mean\s+\| sum\s+\| scale\s+\| balance", text)
    assert "censored @1500" in text and "took up @600" in text
    assert text.rstrip().splitlines()[-1].startswith("Seeds needed for the unresolved take-up and separation lines: about")
    assert "snakemake --cores 2 --config seeds=" in text


@pytest.mark.parametrize("arms", [("sum",), ("mean", "scale")])
def test_no_verdict_without_a_mean_and_a_sum_run(arms):
    table = runs(*[arm_runs(arm, 1, 3) for arm in arms])
    assert verdict_table(table, contrast_table(table, CONTROL_OF), CONTROL_OF).empty


def test_an_unclear_control_share_says_how_many_seeds_would_tell():
    arms = [arm_runs("mean", 1, 10), arm_runs("sum", 10, 10), arm_runs("scale", 10, 10), arm_runs("balance", 5, 10)]
    table = runs(*arms)
    lines = verdict_table(table, contrast_table(table, CONTROL_OF), CONTROL_OF)
    takeup = lines[lines.endpoint == "take-up"].iloc[0]
    assert (takeup["reading"], takeup["scale"], takeup["balance"]) == ("raises", "all of it", "unclear")
    assert "how much of it balance reproduces is unclear" in takeup["verdict"]
    assert takeup["seeds_needed"] > 10 and f"about {int(takeup['seeds_needed'])} seeds per arm would tell" in takeup["verdict"]
    last = verdict_markdown(lines, table, CONTROL_OF).rstrip().splitlines()[-1]
    assert f"--config seeds={int(lines.seeds_needed.max())}`" in last
    # the same runs read as a curve design's: its last line is the design's own next step, never a seeds line
    from experiments.synthetic_sequences.sequential.curve_design import parse_curve_design
    from experiments.synthetic_sequences.sequential.look_files import look_document

    decision = {"decision": "budget", "look": 2, "runs": 40, "alpha": 0.03, "log_k": 0.0, "log_low": -1.0, "log_high": 1.0}
    group = {"family": "f", "term": "raw", "alpha": 0.0, "decisions": {"curve": decision | {"reading": "cannot be resolved"}}}
    design = parse_curve_design({"kind": "curve", "first_blocks": 1, "stage_blocks": 1, "budget": 40}, 1)
    looks = [look_document(k, design, [group | {"train_next": [], "next_betas": {}}], {}, None, [], spans={}) for k in (1, 2)]
    last = verdict_markdown(lines, table, CONTROL_OF, curve_looks=looks).rstrip().splitlines()[-1]
    assert last.startswith("f raw stopped at the design's budget of 40 runs per curve") and "seeds=" not in last


def test_a_family_with_one_control_names_the_absent_one_on_the_line_and_above_it():
    table = runs(arm_runs("mean", 0, 10), arm_runs("sum", 10, 10), arm_runs("scale", 10, 10))
    control_of = {"main-scale": "main"}
    contrasts = contrast_table(table, control_of)
    lines = verdict_table(table, contrasts, control_of)
    takeup = lines[lines.endpoint == "take-up"].iloc[0]
    assert takeup["reading"] == "raises" and takeup["scale"] == "all of it" and takeup["balance"] == "-"
    assert "Scale reproduces all of it" in takeup["verdict"] and "no balance control was run" in takeup["verdict"]
    page = verdict_markdown(lines, table, control_of)
    assert "Controls not run: balance. " in page and "`controls: balance` and `control_of: main`" in page
    every_arm = runs(*(arm_runs(arm, 10, 10) for arm in ARMS))
    both = verdict_table(every_arm, contrast_table(every_arm, CONTROL_OF), CONTROL_OF)
    assert "Controls not run" not in verdict_markdown(both, every_arm, CONTROL_OF)


def test_no_onset_in_either_arm_is_said_once():
    lines = verdict(runs(arm_runs("mean", 0, 4), arm_runs("sum", 0, 4)))
    text = lines["onset"]["verdict"]
    assert "so there is no onset to compare" in text and text.count("no onset") == 1


def blocked_runs(arm: str, took_up: list[int], seeds: int, **kwargs) -> list[dict]:
    """arm_runs in each reference block: block r's first took_up[r] seeds take up the latent."""
    return [{**row, "reference": block} for block, k in enumerate(took_up) for row in arm_runs(arm, k, seeds, **kwargs)]


def test_blocks_are_compared_within_and_pooled_and_the_line_gives_each_blocks_count():
    table = runs(blocked_runs("mean", [0, 0, 0], 4), blocked_runs("sum", [3, 2, 4], 4))
    contrasts = contrast_table(table, CONTROL_OF)
    row = contrasts[(contrasts.metric == "took_up") & (contrasts.comparison == "sum-mean")].iloc[0]
    assert row["test"] == "exact stratified by reference" and row["references"] == 3
    assert row["p"] == pytest.approx(stratified.exact_stratified_p([(3, 4, 0, 4), (2, 4, 0, 4), (4, 4, 0, 4)]), rel=1e-9)
    onset = contrasts[(contrasts.metric == "onset_step") & (contrasts.comparison == "sum-mean")].iloc[0]
    assert onset["test"] == "log-rank stratified by reference"
    lines = verdict(table)
    assert "sum 9/12 (ref0 3/4, ref1 2/4, ref2 4/4)" in lines["take-up"]["verdict"] and lines["take-up"]["reading"] == "raises"
    page = verdict_markdown(verdict_table(table, contrasts, CONTROL_OF), table, CONTROL_OF)
    assert "Over 3 z-free references (z-free seeds 0, 1, 2) and up to 4 seeds each, on this data draw" in page
    assert "| ref2        |      3 |" in page  # the per-seed table names each run's block


def test_blocks_that_disagree_are_named_on_the_take_up_line():
    table = runs(blocked_runs("mean", [1, 9, 1], 10), blocked_runs("sum", [9, 1, 9], 10))
    assert "The references disagree on it (Breslow-Day p = " in verdict(table)["take-up"]["verdict"]


def test_one_block_keeps_the_tests_of_a_pipeline_without_blocks():
    table = runs(arm_runs("mean", 2, 10), arm_runs("sum", 7, 10))
    contrasts = contrast_table(table, CONTROL_OF).set_index(["comparison", "metric", "subset"])
    assert contrasts.loc[("sum-mean", "took_up", "all"), "p"] == pytest.approx(inference.boschloo_p(7, 10, 2, 10), rel=1e-12)
    mean, total = (table[table["mode"] == mode] for mode in ("mean", "sum"))
    logrank = inference.logrank_p(total.onset_step, total.onset_observed, mean.onset_step, mean.onset_observed)
    assert contrasts.loc[("sum-mean", "onset_step", "all"), "p"] == pytest.approx(logrank, rel=1e-12)
    assert contrasts.loc[("sum-mean", "mutual_information", "all"), "interval"] == "paired t"


def test_the_seeds_line_names_lines_that_no_search_resolves():
    """The branches of the last line past MAX_SEEDS (a NameError on bda694d: no test had reached them)."""
    from experiments.synthetic_sequences.analysis.report.verdict_text import DECISIVE_ENDPOINTS, seeds_line

    table = runs(arm_runs("mean", 2, 10), arm_runs("sum", 7, 10))
    endpoints = list(DECISIVE_ENDPOINTS)[:1] * 2
    some = seeds_line(pd.DataFrame({"endpoint": endpoints, "seeds_needed": [30.0, float("inf")]}), table)
    assert f"Some lines would need more than {inference.MAX_SEEDS}." in some and "--config seeds=30" in some
    none = seeds_line(pd.DataFrame({"endpoint": endpoints, "seeds_needed": [float("inf")] * 2}), table)
    assert none.startswith(f"No seed count up to {inference.MAX_SEEDS} per arm resolves")


def test_the_seeds_line_over_blocks_sizes_seeds_per_block_and_says_when_the_estimate_is_not_above_the_runs():
    """5 blocks x 2 seeds (10 per arm): 23 runs per arm is 5 blocks x ceil(23 / 5) = 5 seeds; an estimate of 8 is
    below the 10 run; every line resolved says so with the runs per arm."""
    from experiments.synthetic_sequences.analysis.report.verdict_text import seeds_line

    table = runs(blocked_runs("mean", [1, 0, 0, 1, 0], 2), blocked_runs("sum", [2, 1, 1, 2, 1], 2))
    line = seeds_line(pd.DataFrame({"endpoint": ["take-up", "separation"], "seeds_needed": [23.0, 12.0]}), table)
    assert "about 23 per arm, 5 references x 5 seeds (now 10: 5 x 2)" in line and "`snakemake --cores 2 --config seeds=5`" in line
    below = seeds_line(pd.DataFrame({"endpoint": ["take-up"], "seeds_needed": [8.0]}), table)
    assert "The estimate is not above the seeds run" in below and "snakemake" not in below
    resolved = seeds_line(pd.DataFrame({"endpoint": ["take-up", "onset"], "seeds_needed": [float("nan"), 40.0]}), table)
    assert resolved == "Every take-up and separation line is resolved at the runs trained (10 per arm at most)."


def test_the_seeds_line_repeats_the_pilots_own_command_line_with_seeds_raised():
    """A per-block pilot's verdict must not send its reader to the default pilot: its --configfile files and --config
    settings come back in the command, every file after one --configfile and seeds set in the same --config flag
    (snakemake keeps only the last of a repeated flag), the pilot's own seeds replaced."""
    from experiments.synthetic_sequences.analysis.report.verdict_text import seeds_command, seeds_line
    from experiments.synthetic_sequences.planning.pilot_command import PilotCommand

    pilot = PilotCommand(("config/per_block.yaml", "my overlay.yaml"), ("results=results/pb", "seeds=2"))
    command = "snakemake --cores 2 --configfile config/per_block.yaml 'my overlay.yaml' --config results=results/pb seeds=5"
    assert seeds_command(5, pilot) == command
    table = runs(blocked_runs("mean", [1, 0, 0, 1, 0], 2), blocked_runs("sum", [2, 1, 1, 2, 1], 2))
    assert f"`{command}`" in seeds_line(pd.DataFrame({"endpoint": ["take-up"], "seeds_needed": [23.0]}), table, pilot)


def test_the_reread_warning_offers_a_way_that_fits_the_pilot():
    """The default pilot has a sequential twin to run; another pilot is told to declare a design; a beta axis, which a
    sequential design refuses, is offered none."""
    from experiments.synthetic_sequences.analysis.report.verdict_text import reread_warning
    from experiments.synthetic_sequences.planning.pilot_command import PilotCommand

    default = reread_warning(PilotCommand(), beta_axis=False)
    assert default.endswith("run the sequential design instead: `snakemake --cores 2 --configfile config/sequential.yaml`.")
    own = reread_warning(PilotCommand(("config/per_block.yaml",)), beta_axis=False)
    assert own.endswith("give this pilot a sequential design (config/sequential.yaml's `design:` block, in a results folder of its own).")
    curve = reread_warning(PilotCommand(("config/curve.yaml",)), beta_axis=True)
    assert "on a beta axis a curve design holds it (config/curve_design.yaml's `design:` block" in curve and "snakemake" not in curve


def test_a_seed_that_rose_and_fell_back_and_arms_under_other_numerics_are_named():
    """A seed whose I(x;z) crossed the threshold and fell back by the end is not counted as a take-up, and says so; arms
    trained under different numerics are named arm by arm, with the jobs they ran in."""
    from experiments.synthetic_sequences.analysis.report.verdict_text import numerics_line, seed_cell

    run = {"took_up": 0, "onset_observed": 1, "onset_step": 450.0, "mutual_information": 0.05, "strategy_information": 0.2}
    assert seed_cell(run) == "rose @450, fell back · I 0.050 · SI 0.200"
    mean, total = arm_runs("mean", 1, 2), arm_runs("sum", 1, 2)
    for row in total:
        row["numerics"] = "default kernels, another CPU, 1 thread, float32, torch 2.13.0+cpu, eager, 1 seed per pass"
    line = numerics_line({"mean": pd.DataFrame(mean), "sum": pd.DataFrame(total)})
    assert line.startswith("Numerics differ between the runs, so a difference between arms may be one of floats: mean: AVX2")
    assert "; sum: default kernels" in line and line.endswith("Jobs: sequential, 2 seeds per process.")


def test_a_take_up_line_sized_by_the_stratified_test_says_so():
    table = runs(blocked_runs("mean", [1, 0, 0, 1, 0], 2), blocked_runs("sum", [2, 1, 1, 2, 1], 2))
    text = verdict(table)["take-up"]["verdict"]
    assert "80% power of the exact test stratified by reference, simulated over 4,000 pilots" in text, text


def test_the_cross_term_table_gives_each_term_s_sum_mean_take_up_as_the_contrasts_do():
    """Two terms: raw (sum 9/10 against mean 1/10, with both controls) and dist (5/10 both). Each row's numbers are
    mean_vs_sum's sum - mean take-up row; the last column is Holm over every planned take-up contrast of the pilot."""
    raw = runs(arm_runs("mean", 1, 10), arm_runs("sum", 9, 10), arm_runs("scale", 9, 10), arm_runs("balance", 2, 10))
    dist = runs(arm_runs("mean", 5, 10), arm_runs("sum", 5, 10)).assign(term="dist")
    table = pd.concat([raw, dist], ignore_index=True)
    contrasts = contrast_table(table, CONTROL_OF)
    glance = cross_term_table(verdict_table(table, contrasts, CONTROL_OF), table, contrasts, CONTROL_OF)
    assert list(glance.term) == ["dist", "raw"] and set(glance.endpoint) == {"take-up"}
    taken = contrasts[(contrasts.comparison == "sum-mean") & (contrasts.metric == "took_up")].set_index("term")
    for row in glance.to_dict("records"):
        expected = taken.loc[row["term"]]
        assert (row["sum - mean"], row["ci_low"], row["ci_high"], row["p"]) == tuple(expected[["estimate", "ci_low", "ci_high", "p"]])
    rows = glance.set_index("term")
    assert rows.loc["raw", ["mean", "sum", "scale", "balance"]].tolist() == ["1/10", "9/10", "9/10", "2/10"]
    assert rows.loc["dist", ["scale", "balance"]].tolist() == ["-", "-"]
    lines = verdict_table(table, contrasts, CONTROL_OF)
    takeup = lines[(lines.endpoint == "take-up") & (lines.term == "raw")].iloc[0]
    assert rows.loc["raw", "reading"] == "raises" and rows.loc["raw", "scale reproduces"] == takeup["scale"] != "-"
    assert rows.loc["dist", "sum - mean"] == 0 and rows.loc["dist", "reading"] != "raises"
    planned = contrasts[contrasts.metric == "took_up"]  # Holm over all 6 by hand: sorted p x (6 - rank), running max
    ranked = sorted(zip(planned.p, planned.term, planned.comparison, strict=True))
    by_hand, running = {}, 0.0
    for rank, (p, term, comparison) in enumerate(ranked):
        running = max(running, min(1.0, (len(ranked) - rank) * p))
        by_hand[term, comparison] = running
    assert len(ranked) == 6  # raw: sum-mean, scale-mean, sum-scale, balance-mean, sum-balance; dist: sum-mean
    for term in ("raw", "dist"):
        assert rows.loc[term, ACROSS] == pytest.approx(by_hand[term, "sum-mean"])
    page = verdict_markdown(lines, table, CONTROL_OF, cross_term=glance, planned=planned_contrasts(contrasts))
    assert "## At a glance" not in verdict_markdown(lines, table, CONTROL_OF)
    assert page.index("## At a glance") < page.index("Endpoints, in order") < page.index("## main raw alpha=0")
    assert "adjusts all 6 planned contrasts of the pilot together" in page
    assert (glance[DESIGN_DECISION] == "-").all() and "design decision" not in page


@pytest.mark.parametrize(
    ("mixes", "labels"),
    [
        (
            {"main": "tokcc 0.5 + dist 0.5", "other": "tokcc 0.8 + dist 0.2"},
            ["hybrid (tokcc 0.5 + dist 0.5)", "hybrid (tokcc 0.8 + dist 0.2)"],
        ),
        ({"main": "tokcc 0.5 + dist 0.5", "other": "tokcc 0.5 + dist 0.5"}, ["hybrid", "hybrid"]),
        ({}, ["hybrid", "hybrid"]),  # a table read without the runs' records
    ],
)
def test_two_families_hybrids_are_told_apart_by_their_coefficients_where_they_differ(mixes, labels):
    """Two families run 'hybrid': where their coefficients differ, verdict.md's first table names each hybrid by its
    coefficients; where they agree, 'hybrid' says all there is."""
    main = runs(arm_runs("mean", 2, 4), arm_runs("sum", 3, 4))
    table = pd.concat([main, main.assign(family="other")], ignore_index=True).assign(term="hybrid")
    contrasts = contrast_table(table, CONTROL_OF)
    lines = verdict_table(table, contrasts, CONTROL_OF)
    glance = cross_term_table(lines, table, contrasts, CONTROL_OF, hybrid_mixes=mixes)
    assert list(glance.family) == ["main", "other"] and list(glance[TERM_LABEL]) == labels and set(glance.term) == {"hybrid"}
    page = verdict_markdown(lines, table, CONTROL_OF, cross_term=glance, planned=planned_contrasts(contrasts))
    glance_section = page[page.index("## At a glance") : page.index("## main")]
    assert all(f"| {label} " in glance_section for label in labels)


def test_under_a_design_the_cross_term_table_gives_the_looks_decision_and_no_pilot_wide_p():
    """The same two terms read at look 1 of a two-look design (10 then 20 runs per arm): raw's sum 9/10 against mean
    1/10 is decided at look 1 (Boschloo p far below 0.0056 / 5), dist's 5/10 against 5/10 stays open. The fixed reading
    is kept, named naive, and the across-pilot column is left out."""
    raw = runs(arm_runs("mean", 1, 10), arm_runs("sum", 9, 10), arm_runs("scale", 9, 10), arm_runs("balance", 2, 10))
    dist = runs(arm_runs("mean", 5, 10), arm_runs("sum", 5, 10)).assign(term="dist")
    table = pd.concat([raw, dist], ignore_index=True)
    contrasts = contrast_table(table, CONTROL_OF)
    design = parse_design(
        {"kind": "sequential", "looks": [{"references": 1, "seeds": 10}, {"references": 1, "seeds": 20}], "max_runs_per_arm": 20}
    )
    looks = [look_document(1, design, look_groups(table, CONTROL_OF, design, 1, None), {}, None, [])]
    lines = verdict_table(table, contrasts, CONTROL_OF)
    glance = cross_term_table(lines, table, contrasts, CONTROL_OF, looks)
    rows = glance.set_index("term")
    assert rows.loc["raw", DESIGN_DECISION] == "raises (look 1)" and rows.loc["dist", DESIGN_DECISION] == "open after look 1 of 2"
    assert glance[ACROSS].isna().all()
    page = verdict_markdown(lines, table, CONTROL_OF, looks, glance, planned_contrasts(contrasts))
    header = page[page.index("## At a glance") : page.index("Endpoints, in order")]
    assert "| design decision" in header and "fixed-design reading (naive)" in header and ACROSS not in header
    assert "the sequential design holds each at 5%" in header and "Nothing is claimed across terms" in header


def test_holm_across_leaves_a_row_without_a_test_out_of_the_count():
    adjusted = holm_across(pd.Series([0.01, float("nan"), 0.04]))
    assert adjusted.iloc[0] == pytest.approx(0.02) and pd.isna(adjusted.iloc[1]) and adjusted.iloc[2] == pytest.approx(0.04)
    assert holm_across(pd.Series([float("nan")])).isna().all()


def test_a_term_declaring_onset_primary_is_read_on_onset_first_and_holm_spans_its_onset_contrasts():
    """dist takes up in every run of both arms (a ceiling), sooner under sum (onsets 300-600 against 600-900; medians
    450 and 750 by hand: S falls to 0.6 after the four earliest and to 0.3 after the next three). Declared onset
    primary, its onset contrast joins Holm and its take-up one leaves it; raw keeps take-up."""
    raw = runs(arm_runs("mean", 1, 10), arm_runs("sum", 9, 10), arm_runs("scale", 9, 10), arm_runs("balance", 2, 10))
    dist = runs(arm_runs("mean", 10, 10, onset=600.0), arm_runs("sum", 10, 10, onset=300.0)).assign(term="dist")
    table = pd.concat([raw, dist], ignore_index=True)
    declared = {("main", "dist", 0.0): "onset"}
    contrasts = contrast_table(table, CONTROL_OF, declared)
    adjustment = contrasts[contrasts.comparison == "sum-mean"].set_index(["term", "metric", "subset"]).adjustment
    assert adjustment["dist", "onset_step", "all"] == "holm" and adjustment["dist", "took_up", "all"] == "benjamini-hochberg"
    assert adjustment["raw", "took_up", "all"] == "holm" and adjustment["raw", "onset_step", "all"] == "benjamini-hochberg"
    lines = verdict_table(table, contrasts, CONTROL_OF, declared)
    dist_lines = lines[lines.term == "dist"]
    assert list(dist_lines.endpoint) == ["onset", "take-up", "magnitude", "separation"] and list(dist_lines.primary) == [
        True,
        False,
        False,
        False,
    ]
    assert list(lines[lines.term == "raw"].endpoint)[0] == "take-up"
    glance = cross_term_table(lines, table, contrasts, CONTROL_OF).set_index("term")
    assert glance.loc["dist", "endpoint"] == "onset" and glance.loc["dist", "reading"] == "earlier"
    assert glance.loc["dist", ["mean", "sum"]].tolist() == ["10/10, median 750", "10/10, median 450"]
    assert glance.loc["raw", ["endpoint", "mean"]].tolist() == ["take-up", "1/10"]
    assert planned_contrasts(contrasts) == 6  # raw's 5 take-up contrasts and dist's onset one
    page = verdict_markdown(lines, table, CONTROL_OF, cross_term=glance.reset_index(), planned=6)
    section = page[page.index("## main dist alpha=0") :]
    assert section.index("Primary endpoint: onset, declared in the config") < section.index("- onset of take-up")
    assert "main dist declared onset their primary endpoint in the config" in page
