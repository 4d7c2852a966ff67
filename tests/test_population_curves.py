"""The shift model with random block effects (analysis/statistics/population_curves.py): its likelihood by quadrature
(block_quadrature.py) against a plain two-dimensional grid over each block's effects, gentle and step-like; its fit,
k's interval and the test and interval of the SD of sum's effect over blocks against R's lme4 on the same runs, to
within the Laplace approximation's own error there (the Laplace likelihood, bench/laplace_error.py, reproduces lme4 to
its optimiser's tolerance); and its definition where the blocks cannot differ."""

import math
from functools import cache

import numpy as np
import pytest
from scipy import stats

from bench.laplace_error import laplace_loglik
from bench.population_fit_lme4 import DATASETS, dataset, population_figures
from experiments.synthetic_sequences.analysis.statistics import population_curves as population
from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves
from experiments.synthetic_sequences.analysis.statistics.block_quadrature import marginal_loglik
from experiments.synthetic_sequences.analysis.statistics.population_curves import shift_design

# `python -m bench.population_fit_lme4` (R 4.2.2, lme4 1.1-31 from Debian): glmer's Laplace fit, log k's profile ends
# by uniroot on the model refitted with log k held, the LR p of sd_mode = 0 against (1 | block) (half chi2_1) and
# lme4's profile interval of sd_mode (its profile fails on "blocks agree": nan)
LME4 = {
    "blocks disagree": {
        "intercept": -10.2038,
        "slope": -2.92293,
        "mode_effect": 1.98962,
        "sd_block": 1.21157,
        "sd_mode": 0.537031,
        "loglik": -103.615,
        "log_k": -0.680694,
        "log_low": -0.992102,
        "log_high": -0.374018,
        "mode_sd_p": 0.289966,
        "sd_low": 0.0,
        "sd_high": 1.8008,
    },
    "blocks agree": {
        "intercept": -9.24884,
        "slope": -2.99654,
        "mode_effect": 2.0443,
        "sd_block": 0.00022,
        "sd_mode": 0.408027,
        "loglik": -46.7372,
        "log_k": -0.682221,
        "log_low": -1.11619,
        "log_high": -0.273425,
        "mode_sd_p": 0.35614,
        "sd_low": math.nan,
        "sd_high": math.nan,
    },
}
# lme4 stops its optimiser at a gradient of 2e-3 (its default check): the fixed effects and SDs agree to about that
TOLERANCE = {"intercept": 2e-3, "slope": 5e-4, "mode_effect": 5e-4, "sd_block": 1e-3, "sd_mode": 5e-4, "loglik": 1e-3}
# the quadrature's fit differs from lme4's by the Laplace approximation's error on these runs: up to 0.015 in the log
# likelihood and 0.009 in an SD or its interval's end (measured with both likelihoods on these datasets, 2026-12-07)
LAPLACE_ERROR = 2e-2


@cache
def figures(name: str) -> dict[str, float]:
    return population_figures(dataset(name))


@pytest.mark.parametrize("name", list(DATASETS))
def test_the_laplace_likelihood_reproduces_lme4(name, monkeypatch):
    monkeypatch.setattr(population, "marginal_loglik", laplace_loglik)
    ours, theirs = population_figures(dataset(name)), LME4[name]
    for key, tolerance in TOLERANCE.items():
        assert ours[key] == pytest.approx(theirs[key], abs=tolerance), key
    for key in ("log_k", "log_low", "log_high", "sd_low", "sd_high"):
        if not math.isnan(theirs[key]):
            assert ours[key] == pytest.approx(theirs[key], abs=1e-3), key
    assert ours["mode_sd_p"] == pytest.approx(theirs["mode_sd_p"], abs=1e-4)


@pytest.mark.parametrize("name", list(DATASETS))
def test_the_fit_its_intervals_and_the_spread_test_agree_with_lme4_to_the_laplace_error(name):
    ours, theirs = figures(name), LME4[name]
    for key in (*TOLERANCE, "log_k", "log_low", "log_high", "sd_low", "sd_high", "mode_sd_p"):
        if not math.isnan(theirs[key]):
            assert ours[key] == pytest.approx(theirs[key], abs=LAPLACE_ERROR), key


def grid_loglik(curves: Curves, effects: tuple[float, float, float], sd_block: float, sd_mode: float) -> float:
    """The likelihood by a plain grid over each block's standardised effects (xi_1, xi_2) ~ N(0, I), 801 points over
    [-8, 8] on each axis, one block at a time: sum_b log of the grid's sum of the prior times the runs' product (a mean
    run's factor does not move with xi_2)."""
    grid = np.linspace(-8.0, 8.0, 801)
    log_prior = -0.5 * grid**2 - 0.5 * math.log(2 * math.pi) + math.log(grid[1] - grid[0])
    fixed = effects[0] + effects[1] * curves.log_beta + effects[2] * curves.sums
    total = 0.0
    for block in np.unique(curves.block):
        mean, summed = (curves.block == block) & (curves.sums == 0), (curves.block == block) & (curves.sums == 1)
        eta_mean = fixed[mean, None] + sd_block * grid[None, :]  # runs x xi_1
        eta_sum = fixed[summed, None, None] + sd_block * grid[None, :, None] + sd_mode * grid[None, None, :]  # runs x xi_1 x xi_2
        log_runs = np.sum(curves.took_up[mean, None] * eta_mean - np.logaddexp(0.0, eta_mean), axis=0)[:, None]
        log_runs = log_runs + np.sum(curves.took_up[summed, None, None] * eta_sum - np.logaddexp(0.0, eta_sum), axis=0)
        terms = log_runs + log_prior[:, None] + log_prior[None, :]
        top = terms.max()
        total += top + math.log(np.sum(np.exp(terms - top)))
    return total


def step_blocks(blocks: int = 12, cliff_sd: float = 1.0, seed: int = 2) -> Curves:
    """Blocks of one seed at 5 betas whose runs are each a step: a cliff per block and mode, sum's 0.7 lower."""
    rng = np.random.default_rng(seed)
    log_betas = np.log(np.geomspace(0.035, 0.35, 5))
    cliffs = rng.normal(np.log(0.11), cliff_sd, blocks)
    shifts = rng.normal(-0.7, 0.3, blocks)
    rows = [
        (float(b < cliff + s * shift), b, float(s), block)
        for block, (cliff, shift) in enumerate(zip(cliffs, shifts, strict=True))
        for s in (0, 1)
        for b in log_betas
    ]
    return Curves(*(np.array(column) for column in zip(*rows, strict=True)))


@pytest.mark.parametrize(
    ("name", "effects", "sd_block", "sd_mode"),
    [
        ("blocks disagree", (-10.2, -2.92, 1.99), 1.2, 0.54),
        ("blocks disagree", (-10.2, -2.92, 1.99), 1.2, 0.05),
        ("blocks disagree", (-10.2, -2.92, 1.99), 0.01, 0.6),
        ("mean runs only", (-10.2, -2.92, 1.99), 1.2, 0.6),
        ("blocks agree", (-9.0, -3.0, 2.0), 0.3, 2.0),
        ("steps", (-23.0, -11.5, -9.0), 10.0, 2.0),
        ("steps", (-69.0, -34.5, -27.0), 30.0, 6.0),
    ],
)
def test_the_quadrature_is_the_plain_grids_integral(name, effects, sd_block, sd_mode):
    if name == "mean runs only":
        runs = dataset("blocks disagree")
        mean = runs.sums == 0
        curves = Curves(runs.took_up[mean], runs.log_beta[mean], runs.sums[mean], runs.block[mean])
    else:
        curves = step_blocks() if name == "steps" else dataset(name)
    ours = marginal_loglik(shift_design(curves), np.array(effects), curves, sd_block, sd_mode)[0]
    assert ours == pytest.approx(grid_loglik(curves, effects, sd_block, sd_mode), abs=1e-4)


def test_laplace_overstates_the_likelihood_of_blocks_that_are_steps_and_more_the_steeper_the_fit():
    """Along the fit's ridge (slope and SDs scaled together, the curve's shape in log beta held) the Laplace log
    likelihood keeps rising by log units while the integral's flattens: what drove the SDs to their search bound."""
    curves = step_blocks()
    effects, sds = np.array([-23.0, -11.5, -9.0]), np.array([10.0, 2.0])  # near the quadrature's fit, SDs up to 10
    exact = [marginal_loglik(shift_design(curves), scale * effects, curves, *(scale * sds))[0] for scale in (1, 2, 3)]
    laplace = [laplace_loglik(shift_design(curves), scale * effects, curves, *(scale * sds))[0] for scale in (1, 2, 3)]
    # measured: the integral -29.18, -28.71, -28.63; Laplace -28.87, -26.26, -25.07
    assert laplace[2] - laplace[0] > 3.0 and laplace[2] - exact[2] > 3.0
    assert 0 < exact[2] - exact[0] < 0.6


def test_a_profile_near_a_step_fitted_on_the_bound_rises_smoothly_and_the_score_test_is_not_taken_there():
    """4 blocks of steps, a curve design's look 1: the free fit lies on the effects' bound. Started from it alone, the
    profile's fit stopped on a ridge far below the maximum at some log k held (09f031a, log k + 0 to 2.5: excess 0,
    1.31, 3.34, 4.88, 6.01, 6.93, 7.73, 219.44, 9.15, 9.79, 10.4), so that k's interval ended there, at a place the
    CPU's float path chose. With its second start from 0 the profile rises at every step away from the estimate."""
    curves = step_blocks(blocks=4, cliff_sd=0.2, seed=1)
    fit = population.fit_population(curves)
    assert fit.intercept == -population.EFFECT_LIMIT
    held = np.linspace(fit.log_k, fit.log_k + 2.5, 11)
    excess = [fit.loglik - population.fit_population(curves, log_k=log_k, near=fit).loglik for log_k in held]
    assert np.all(np.diff(excess) > 0.3) and max(excess) < 12
    assert math.isnan(population.parallelism_p(curves, fit))


def test_the_profile_ends_lie_where_the_deviance_crosses_chi2_1():
    curves = dataset("blocks disagree")
    fit = population.fit_population(curves)
    cut = stats.chi2.ppf(0.95, 1)
    for end in population.log_k_interval(curves, fit):
        assert 2 * (fit.loglik - population.fit_population(curves, log_k=end, near=fit).loglik) == pytest.approx(cut, abs=1e-3)
    # held at its estimate, log k gives the free fit back: the shift model is the free one with c = b log k
    assert population.fit_population(curves, log_k=fit.log_k, near=fit).loglik == pytest.approx(fit.loglik, abs=1e-6)


def test_with_no_spread_over_blocks_the_likelihood_is_the_runs_bernoulli_likelihood():
    curves = dataset("blocks disagree")
    fixed = 0.3 - 1.2 * curves.log_beta + 0.8 * curves.sums
    by_hand = sum(y * eta - math.log1p(math.exp(eta)) for y, eta in zip(curves.took_up, fixed, strict=True))
    for likelihood in (marginal_loglik, laplace_loglik):
        assert likelihood(shift_design(curves), np.array([0.3, -1.2, 0.8]), curves, 0.0, 0.0)[0] == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("likelihood", [marginal_loglik, laplace_loglik])
@pytest.mark.parametrize(("effects", "sd_block", "sd_mode"), [((-9.0, -2.5, 1.5), 1.1, 0.6), ((-5.0, -2.0, 0.5), 0.3, -2.0)])
def test_the_likelihoods_gradient_is_its_central_difference(likelihood, effects, sd_block, sd_mode):
    """The analytic gradient (the quadrature's; Laplace's by the implicit function theorem) against (L(x + h) - L(x -
    h)) / 2h, h = 1e-6; a negative SD's derivative carries its sign, the likelihood being even in it."""
    curves = dataset("blocks disagree")
    point = np.array([*effects, sd_block, sd_mode])

    def loglik(x: np.ndarray) -> float:
        return likelihood(shift_design(curves), x[:3], curves, x[3], x[4])[0]

    step = 1e-6
    central = [(loglik(point + step * unit) - loglik(point - step * unit)) / (2 * step) for unit in np.eye(5)]
    assert likelihood(shift_design(curves), point[:3], curves, sd_block, sd_mode)[1] == pytest.approx(central, rel=1e-5, abs=1e-5)
    assert loglik(point * [1, 1, 1, -1, -1]) == pytest.approx(loglik(point), rel=1e-12)


def test_blocks_that_ran_alike_give_no_spread_and_the_test_its_boundary_p():
    """Four blocks with the same outcomes run for run: both SDs fit 0, the likelihood ratio is 0 and p = 1."""
    one = dataset("blocks agree")
    first = one.block == 0
    repeat = 4
    curves = Curves(
        np.tile(one.took_up[first], repeat),
        np.tile(one.log_beta[first], repeat),
        np.tile(one.sums[first], repeat),
        np.repeat(np.arange(repeat), first.sum()),
    )
    fit = population.fit_population(curves)
    assert fit.sd_block == pytest.approx(0.0, abs=1e-3) and fit.sd_mode == pytest.approx(0.0, abs=1e-3)
    assert population.mode_sd_p(curves, fit) == 1.0
    assert population.mode_sd_interval(curves, fit)[0] == 0.0


def test_simulated_runs_keep_the_design_and_take_up_at_the_fits_rates():
    """At SDs 0 and a flat curve (P = 1/2 everywhere), 2,880 simulated runs take up 1/2 of the time within 4 se."""
    one = dataset("blocks disagree")
    curves = Curves(*(np.tile(values, 10) for values in (one.took_up, one.log_beta, one.sums)), np.tile(one.block, 10))
    flat = population.PopulationFit(0.0, 0.0, 0.0, 0.0, 0.0, math.nan)
    simulated = population.simulate_runs(curves, flat, np.random.default_rng(0))
    assert simulated.block is curves.block and simulated.log_beta is curves.log_beta and simulated.sums is curves.sums
    assert abs(simulated.took_up.mean() - 0.5) < 4 * math.sqrt(0.25 / len(curves.took_up))
    assert set(np.unique(simulated.took_up)) == {0.0, 1.0}


def test_the_bartlett_factor_is_the_mean_likelihood_ratio_of_its_simulated_datasets():
    curves = dataset("blocks agree")
    fit = population.fit_population(curves)
    rng = np.random.default_rng(7)
    ratios = []
    for _ in range(3):
        simulated = population.simulate_runs(curves, fit, rng)
        free = population.fit_population(simulated, near=fit)
        ratios.append(2 * (free.loglik - population.fit_population(simulated, log_k=fit.log_k, near=fit).loglik))
    assert population.bartlett_factor(curves, fit, draws=3, seed=7) == pytest.approx(np.mean(np.maximum(ratios, 0.0)), rel=1e-9)
    # dividing the ratio by the factor widens the interval where the factor exceeds 1
    low, high = population.log_k_interval(curves, fit)
    wide_low, wide_high = population.log_k_interval(curves, fit, factor=2.0)
    assert wide_low < low < fit.log_k < high < wide_high


def test_the_parallelism_score_test_is_the_glms_where_one_block_leaves_no_spread():
    """With one block both SDs fit 0, the likelihood is a binomial GLM's (intercept, log beta, sum), and Rao's score
    test of s log beta is statsmodels' on that GLM: the observed information of a canonical link is the expected."""
    import statsmodels.api as sm

    from bench.curve_shift import pilot

    runs = pilot(np.random.default_rng(9), 0.3, blocks=1, seeds=12, betas=np.geomspace(0.01, 0.16, 5))
    curves = Curves.of(runs)
    fit = population.fit_population(curves)
    assert fit.sd_block < 1e-6 and fit.sd_mode < 1e-6
    design = np.column_stack([np.ones(len(curves.took_up)), curves.log_beta, curves.sums])
    glm = sm.GLM(curves.took_up, design, family=sm.families.Binomial()).fit()
    assert [fit.intercept, fit.slope, fit.mode_effect] == pytest.approx(list(glm.params), rel=1e-4)
    expected = float(np.ravel(glm.score_test(exog_extra=(curves.sums * curves.log_beta)[:, None])[1])[0])
    assert population.parallelism_p(curves, fit) == pytest.approx(expected, rel=1e-4)


def test_the_typical_blocks_sum_curve_is_means_at_k_times_beta_and_the_band_holds_it():
    fit = population.PopulationFit(-9.0, -2.5, 1.5, 0.8, 0.6, math.nan)
    log_betas = np.log(np.geomspace(0.005, 0.5, 50))
    mean_moved = population.block_curve(fit, log_betas + fit.log_k, 0.0)
    assert np.allclose(population.block_curve(fit, log_betas, 1.0), mean_moved, rtol=1e-12)
    # the block at the 90th percentile: its combined effect is 1.2816 SDs of u + v above the typical block's
    spread = math.hypot(0.8, 0.6)
    upper = 1 / (1 + np.exp(-(-9.0 - 2.5 * log_betas + 1.5 + stats.norm.ppf(0.9) * spread)))
    assert np.allclose(population.block_curve(fit, log_betas, 1.0, 0.9), upper, rtol=1e-12)
    assert np.all(population.block_curve(fit, log_betas, 0.0, 0.1) <= population.block_curve(fit, log_betas, 0.0))


@pytest.mark.parametrize("took_up", [0.0, 1.0])
def test_runs_that_all_took_up_or_none_give_the_flat_limit_with_no_k_and_open_intervals(took_up):
    runs = Curves(
        np.full(20, took_up), np.log(np.repeat([0.01, 0.02, 0.04, 0.08, 0.16], 4)), np.tile([0.0, 1.0], 10), np.repeat([0, 1], 10)
    )
    fit = population.fit_population(runs)
    assert (fit.slope, fit.mode_effect, fit.sd_block, fit.sd_mode) == (0.0, 0.0, 0.0, 0.0)
    assert math.isnan(fit.log_k) and population.log_k_interval(runs, fit) == (-math.inf, math.inf)
    assert fit.loglik == pytest.approx(0.0, abs=1e-30) and population.mode_sd_p(runs, fit) == 1.0
