"""strategy_information: I(z; s) / H(s) from the posterior itself, against hand values, in both families."""

import math

import numpy as np
import pytest

from core.disentanglement.information import continuous_information, discrete_information, log_mean_exp

LABELS = np.array(["direct", "stepwise", "alternative", "direct", "direct", "stepwise"])


def test_a_posterior_that_is_the_same_for_every_example_carries_exactly_nothing():
    q = np.tile([0.2, 0.5, 0.3], (len(LABELS), 1))  # its argmax (code 1) says nothing either way
    assert discrete_information(q, LABELS) == 0.0
    mu = np.tile([0.3, -1.2], (len(LABELS), 1))
    logvar = np.tile([-0.5, 0.1], (len(LABELS), 1))
    assert continuous_information(mu, logvar, LABELS, seed=0) == 0.0


def test_a_posterior_that_identifies_the_strategy_carries_all_of_it():
    codes = {"direct": 0, "stepwise": 1, "alternative": 2}
    q = np.eye(3)[[codes[s] for s in LABELS]]
    assert discrete_information(q, LABELS) == pytest.approx(1.0, abs=1e-12)
    mu = np.array([[50.0 * codes[s], 0.0] for s in LABELS])
    logvar = np.full_like(mu, -2.0)
    assert continuous_information(mu, logvar, LABELS, seed=0) == pytest.approx(1.0, abs=1e-9)


def test_discrete_information_matches_a_hand_computation():
    # two labels a, a, b; q rows (0.9, 0.1), (0.7, 0.3), (0.2, 0.8)
    q = np.array([[0.9, 0.1], [0.7, 0.3], [0.2, 0.8]])
    labels = np.array(["a", "a", "b"])
    q_a, q_b, q_bar = [0.8, 0.2], [0.2, 0.8], [0.6, 0.4]
    kl = [sum(x * math.log(x / y) for x, y in zip(q_s, q_bar, strict=True)) for q_s in (q_a, q_b)]
    info = 2 / 3 * kl[0] + 1 / 3 * kl[1]
    entropy = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert discrete_information(q, labels) == pytest.approx(info / entropy, rel=1e-12)


def test_one_label_has_no_strategy_information():
    assert discrete_information(np.eye(2), np.array(["a", "a"])) is None
    assert continuous_information(np.zeros((2, 1)), np.zeros((2, 1)), np.array(["a", "a"]), seed=0) is None


def test_partly_informative_continuous_posteriors_lie_strictly_between():
    rng = np.random.default_rng(0)
    labels = np.repeat(["a", "b"], 200)
    mu = np.where(labels == "a", -1.0, 1.0)[:, None] + 0.1 * rng.standard_normal((400, 1))
    value = continuous_information(mu, np.zeros((400, 1)), labels, seed=1)
    assert 0.05 < value < 0.95


def test_log_mean_exp_of_equal_values_is_that_value_bit_for_bit():
    values = np.full((2, 7), -3.141592653589793)
    assert (log_mean_exp(values, axis=1) == values[:, 0]).all()
    assert log_mean_exp(np.log(np.array([[1.0, 3.0]])), axis=1)[0] == pytest.approx(math.log(2.0))


def test_the_cross_density_is_each_pairs_gaussian_log_density():
    """cross[i, j] against scipy's normal log density of z_i under posterior j, summed over the dimensions, for
    posteriors from nearly flat to sharp (logvar -9 to 2) and more posteriors than points."""
    from scipy.stats import norm

    from core.disentanglement.information import gaussian_cross_log_density, gaussian_log_density

    rng = np.random.default_rng(5)
    z, mu = rng.normal(scale=2.0, size=(7, 3)), rng.normal(scale=2.0, size=(9, 3))
    logvar = rng.uniform(-9.0, 2.0, size=(9, 3))
    cross = gaussian_cross_log_density(z, mu, logvar)
    expected = norm.logpdf(z[:, None, :], loc=mu[None], scale=np.exp(0.5 * logvar)[None]).sum(-1)
    assert cross.shape == (7, 9)
    # the expansion's terms reach (|z| + |mu|)^2 / var ~ 1e5 here: an absolute error of ~1e-11 is its rounding
    assert np.allclose(cross, expected, rtol=1e-12, atol=1e-9)
    assert np.allclose(gaussian_log_density(z[:, None, :], mu[None], logvar[None]), expected, rtol=1e-12, atol=1e-12)
