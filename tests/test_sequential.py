"""The sequential design: its alpha spending, one look's decisions on hand-made tables, and its parse-time refusals."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from scipy import stats
from statsmodels.stats.proportion import confint_proportions_2indep

from bench.sequential_design import naive_decisions
from experiments.synthetic_sequences.analysis.statistics import inference, multiplicity
from experiments.synthetic_sequences.sequential.decisions import arms_to_train, check_decidable, look_decisions
from experiments.synthetic_sequences.sequential.design import DesignError, parse_design


def sequential(looks, maximum, spending="obrien-fleming"):
    block = {"kind": "sequential", "looks": [{"references": r, "seeds": s} for r, s in looks], "max_runs_per_arm": maximum}
    return parse_design({**block, "alpha_spending": spending})


@pytest.mark.parametrize("t", [0.25, 0.5, 0.75])
def test_obrien_fleming_spending_matches_the_lan_demets_formula_through_scipy(t):
    design = sequential([(1, round(t * 8)), (1, 8)], 8)
    expected = 2 * stats.norm.sf(stats.norm.isf(0.025) / math.sqrt(t))
    assert design.spent(1, 0.05) == pytest.approx(expected, rel=1e-9)
    assert design.increment(2, 0.05) == pytest.approx(0.05 - expected, rel=1e-9)


def test_spending_by_hand():
    # O'Brien-Fleming type at t = 1/2: 2 - 2 Phi(1.959964 x sqrt 2 = 2.771808) = 0.005575 (standard tables: 0.0056);
    # Pocock type at t = 1/2: 0.05 ln(1 + (e - 1) / 2) = 0.05 x 0.620115 = 0.031006
    assert sequential([(2, 2), (2, 4)], 8).spent(1, 0.05) == pytest.approx(0.005575, abs=5e-7)
    assert sequential([(2, 2), (2, 4)], 8, "pocock").spent(1, 0.05) == pytest.approx(0.031006, abs=5e-7)
    # the last look spends what is left, also when it stops short of max_runs_per_arm
    design = sequential([(2, 2), (2, 3)], 10)
    assert design.spent(2, 0.05) == 0.05
    assert design.increment(1, 0.05) + design.increment(2, 0.05) == pytest.approx(0.05)


def test_one_look_decides_on_hand_computed_exact_p_values():
    design = sequential([(2, 2), (2, 4)], 8)
    # look 1, two blocks of (2 of 2 vs 0 of 2): each block's k_a is hypergeometric on {0, 1, 2} with 1/6, 4/6, 1/6;
    # the blocks' sum T = 4 has probability 1/36, as has T = 0, and no other outcome is as unlikely: p = 2/36
    first = look_decisions({"sum": {0: (2, 2), 1: (2, 2)}, "mean": {0: (0, 2), 1: (0, 2)}}, {}, design, 1)
    assert list(first) == ["sum-mean"]
    assert first["sum-mean"].p == pytest.approx(1 / 18)
    assert first["sum-mean"].alpha == pytest.approx(0.005575, abs=5e-7)
    assert first["sum-mean"].decision == "continue"
    # look 2, (4 of 4 vs 0 of 4) per block: P(k_a = 4) = 1 / C(8, 4) = 1/70 per block, p = 2 / 70^2 = 0.000408
    second = look_decisions({"sum": {0: (4, 4), 1: (4, 4)}, "mean": {0: (0, 4), 1: (0, 4)}}, first, design, 2)
    assert second["sum-mean"].p == pytest.approx(2 / 70**2)
    assert (second["sum-mean"].decision, second["sum-mean"].look, second["sum-mean"].runs_per_arm) == ("raises", 2, 8)


def test_equivalence_needs_the_interval_at_the_spent_level_inside_the_margin():
    # 0 of n against 0 of n: Newcombe's interval is +-z^2 / (n + z^2), z the 1 - alpha_k normal quantile
    design = sequential([(1, 10), (1, 40)], 40)
    first = look_decisions({"sum": {0: (0, 10)}, "mean": {0: (0, 10)}}, {}, design, 1)
    z = stats.norm.isf(first["sum-mean"].level)
    assert first["sum-mean"].level == first["sum-mean"].alpha  # one planned contrast: all of the look's alpha
    assert first["sum-mean"].ci_high == pytest.approx(z**2 / (10 + z**2), rel=1e-6)
    assert z**2 / (10 + z**2) > 0.3 and first["sum-mean"].decision == "continue"
    second = look_decisions({"sum": {0: (0, 40)}, "mean": {0: (0, 40)}}, first, design, 2)
    z = stats.norm.isf(second["sum-mean"].level)
    assert second["sum-mean"].ci_high == pytest.approx(z**2 / (40 + z**2), rel=1e-6)
    assert second["sum-mean"].decision == "equivalent"


def test_each_planned_contrast_gets_its_share_of_the_look_whatever_is_open_and_a_decided_one_stays_decided():
    design = sequential([(1, 10), (1, 20)], 20)
    arms = {"sum": {0: (10, 10)}, "mean": {0: (0, 10)}, "scale": {0: (5, 10)}}
    first = look_decisions(arms, {}, design, 1)
    assert list(first) == ["sum-mean", "scale-mean", "sum-scale"]
    for decision in first.values():  # Bonferroni over the group's 3 planned contrasts, for either decision
        assert decision.p_adjusted == pytest.approx(min(1.0, 3 * decision.p))
        assert decision.level == pytest.approx(decision.alpha / 3)
        k_a, k_b = {"sum-mean": (10, 0), "scale-mean": (5, 0), "sum-scale": (10, 5)}[decision.comparison]
        # the decision interval is Newcombe's at level 1 - 2 alpha / m
        expected = confint_proportions_2indep(k_a, 10, k_b, 10, method="newcomb", compare="diff", alpha=2 * decision.level)
        assert (decision.ci_low, decision.ci_high) == pytest.approx(expected)
    assert first["sum-mean"].decision == "raises"
    later = {"sum": {0: (10, 20)}, "mean": {0: (10, 20)}, "scale": {0: (10, 20)}}
    second = look_decisions(later, first, design, 2)
    assert second["sum-mean"] == first["sum-mean"]
    for name in ("scale-mean", "sum-scale"):  # the closed contrast still counts: m stays 3
        assert second[name].level == pytest.approx(second[name].alpha / 3)
    assert arms_to_train(first) == ["scale", "mean", "sum"]
    assert "sum-mean" not in {name for name, d in second.items() if d.look == 2}


def test_the_last_look_leaves_an_open_contrast_undecided():
    design = sequential([(1, 2), (1, 4)], 4)
    arms = {"sum": {0: (2, 4)}, "mean": {0: (1, 4)}}
    decisions = look_decisions(arms, look_decisions(arms, {}, design, 1), design, 2)
    assert decisions["sum-mean"].decision == "undecided"
    assert arms_to_train(decisions) == []


def test_naive_rereading_tests_every_look_at_the_full_alpha():
    arms = {"sum": {0: (7, 10)}, "mean": {0: (1, 10)}}
    p = stats.boschloo_exact([[7, 3], [1, 9]], alternative="two-sided").pvalue
    assert 0.0056 < p < 0.05
    assert naive_decisions(arms) == {"sum-mean": "raises"}
    # the same table at the first of two looks is tested at O'Brien-Fleming's 0.0056: it stays open
    assert look_decisions(arms, {}, sequential([(1, 10), (1, 20)], 20), 1)["sum-mean"].decision == "continue"


@pytest.mark.parametrize(
    ("looks", "maximum", "spending", "message"),
    [
        ([(5, 2), (5, 2)], 20, "obrien-fleming", r"design.looks\[1\]: 5 references x 2 seeds does not grow from look 1"),
        ([(5, 3), (4, 4)], 20, "obrien-fleming", r"design.looks\[1\]: 4 references x 4 seeds does not grow"),
        ([(1, 1), (1, 2), (1, 3)], 2, "obrien-fleming", r"design.looks: 3 looks, but max_runs_per_arm 2 allows at most 2"),
        ([(5, 2), (5, 6)], 20, "obrien-fleming", r"design.looks\[1\]: 30 runs per arm is more than max_runs_per_arm 20"),
        ([(5, 2)], 20, "obrien-fleming", r"design.looks: a sequential design needs at least 2 looks, got 1"),
        ([(5, 2), (5, 4)], 20, "haybittle", r"design.alpha_spending: 'haybittle' is not one of obrien-fleming, pocock"),
    ],
)
def test_a_design_that_cannot_run_is_refused_in_one_line(looks, maximum, spending, message):
    with pytest.raises(DesignError, match=message):
        sequential(looks, maximum, spending)


def test_the_fixed_design_has_no_looks():
    assert parse_design(None) is None
    assert parse_design({"kind": "fixed"}) is None
    with pytest.raises(DesignError, match="design: looks are read only with kind: sequential"):
        parse_design({"kind": "fixed", "looks": []})


def test_a_tie_at_the_level_rejects_in_the_verdict_and_the_looks_alike():
    """1/100 at 0.01 is a tie, whatever float residue a product or a sum leaves on either side."""
    assert 0.1 * 0.1 != 0.01 and multiplicity.rejects(0.1 * 0.1, 0.01)  # 0.010000000000000002
    assert multiplicity.rejects(0.01, 0.1 * 0.1)
    assert not multiplicity.rejects(0.0100001, 0.01)
    assert not multiplicity.rejects(math.nan, 0.05)
    # a look, and the naive rereading, decide a contrast whose adjusted p ties the level up to float residue
    arms = {"sum": {0: (10, 10)}, "mean": {0: (0, 10)}}
    p = inference.boschloo_p(10, 10, 0, 10)
    just_below = p * (1 - 1e-15)
    assert just_below < p
    tied = SimpleNamespace(looks=(1, 2), increment=lambda look, alpha: just_below)
    assert look_decisions(arms, {}, tied, 1)["sum-mean"].decision == "raises"
    assert naive_decisions(arms, alpha=just_below) == {"sum-mean": "raises"}
    assert (
        look_decisions(arms, {}, SimpleNamespace(looks=(1, 2), increment=lambda look, alpha: p * 0.999), 1)["sum-mean"].decision
        == "continue"
    )


@pytest.mark.parametrize(
    ("looks", "maximum", "spending", "arms", "message"),
    [
        # O'Brien-Fleming at t = 0.002 spends ~1e-300: nothing can be decided
        ([(1, 2), (1, 1000)], 1000, "obrien-fleming", ["mean", "sum"], r"look 1 spends alpha .* \(below 1e-06\)"),
        # 1 block of 2 runs: Boschloo's smallest p is 0.125, above 0.0056 / 3
        ([(1, 2), (1, 4)], 4, "obrien-fleming", ["mean", "sum", "scale"], r"smallest p its take-up test can give is 0.12"),
        # 5 blocks of 1 run: the stratified test's smallest p is 2 / 2^5 = 0.0625
        ([(5, 1), (5, 4)], 20, "pocock", ["mean", "sum"], r"at 5 reference\(s\) x 1 seed\(s\) the smallest p .* is 0.062"),
    ],
)
def test_a_design_with_a_look_that_can_decide_nothing_is_refused_naming_the_look(looks, maximum, spending, arms, message):
    with pytest.raises(DesignError, match=r"design.looks\[0\]: .*" + message):
        check_decidable(sequential(looks, maximum, spending), [arms])
    check_decidable(sequential([(5, 2), (5, 3), (5, 4)], 20), [["mean", "sum", "scale", "balance"]])  # config/sequential.yaml


def test_the_tables_refuse_looks_whose_runs_are_not_the_grid_records(tmp_path):
    from experiments.synthetic_sequences.planning.bindings import BindingError
    from experiments.synthetic_sequences.sequential.look_files import read_looks
    from experiments.synthetic_sequences.sequential.looks import check_looks_read

    looks = [{"runs_read": {"a": "1", "b": "2"}}, {"runs_read": {"b": "2", "c": "3"}}]
    check_looks_read(looks, {"runs": {"a": {}, "b": {}, "c": {}}})
    with pytest.raises(BindingError, match=r"the look files read 3 runs and the grid record names 2; c is in the looks only"):
        check_looks_read(looks, {"runs": {"a": {}, "b": {}}})
    with pytest.raises(BindingError, match=r"d is in the grid record only"):
        check_looks_read(looks, {"runs": {"a": {}, "b": {}, "c": {}, "d": {}}})
    assert read_looks([], {}) == []
    (tmp_path / "look1.json").write_text("{")
    with pytest.raises(ValueError, match=r"look1.json: not a readable look file"):
        read_looks([tmp_path / "look1.json"], {})
