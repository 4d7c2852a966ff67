import inspect
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import reference_math as ref
from core.disentanglement import auxiliary_losses
from core.disentanglement.config import RECONSTRUCTION_TERMS, AggregationMode, parse_aggregation_mode
from core.disentanglement.losses import (
    aggregate_tokens,
    concentration_factor,
    hybrid_term,
    posterior_expectation,
    reconstruction_terms,
    reference_scale,
    weighted_aggregate_tokens,
)
from core.disentanglement.token_weighting import high_surprisal_weights, low_surprisal_weights

MEAN, SUM = AggregationMode.MEAN, AggregationMode.SUM

LOSS_KEYS = RECONSTRUCTION_TERMS


def random_batch(seed, samples=3, batch=5, length=9, pad_value=float("nan"), min_len=1):
    """token_nll [S,B,T], base_nll [B,T], mask [B,T] with scattered (not left-aligned) supervised positions."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((batch, length), dtype=bool)
    for i in range(batch):
        n_i = rng.integers(min_len, length + 1)
        mask[i, rng.choice(length, size=n_i, replace=False)] = True
    token_nll = rng.gamma(2.0, 1.0, size=(samples, batch, length))
    base_nll = rng.gamma(2.0, 1.0, size=(batch, length)) + 0.05
    token_nll[:, ~mask] = pad_value
    base_nll[~mask] = pad_value
    return (
        torch.tensor(token_nll, dtype=torch.float64),
        torch.tensor(base_nll, dtype=torch.float64),
        torch.tensor(mask),
    )


def random_posterior(seed, samples, batch):
    logits = torch.tensor(np.random.default_rng(seed).normal(size=(samples, batch)), dtype=torch.float64)
    return torch.softmax(logits, dim=0)


# ---------------------------------------------------------------- agreement with plain-Python loops


@pytest.mark.parametrize("mode", list(AggregationMode))
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 2.5])
@pytest.mark.parametrize("enumerated", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reconstruction_terms_match_spec_loops(mode, alpha, enumerated, seed):
    token_nll, base_nll, mask = random_batch(seed)
    q = random_posterior(seed + 100, token_nll.shape[0], token_nll.shape[1]) if enumerated else None
    c_base, epsilon = 1.7, 0.3
    got = reconstruction_terms(token_nll, base_nll, mask, mode=mode, alpha=alpha, c_base=c_base, epsilon=epsilon, sample_weights=q)
    want = ref.terms(token_nll.tolist(), base_nll.tolist(), mask.tolist(), mode, alpha, c_base, epsilon, None if q is None else q.tolist())
    for key, value in want.items():
        assert got[key].item() == pytest.approx(value, rel=1e-6, abs=1e-6), key


@pytest.mark.parametrize("mode", list(AggregationMode))
def test_aggregates_and_reference_scale_match_spec_loops(mode):
    token_nll, base_nll, mask = random_batch(7, batch=6, length=11)
    rows, b_rows, m_rows = token_nll[0].tolist(), base_nll.tolist(), mask.tolist()
    got = aggregate_tokens(token_nll, mask, mode)
    assert got.shape == (3, 6)
    assert got[0].tolist() == pytest.approx([ref.A(rows[i], m_rows[i], mode) for i in range(6)], rel=1e-12)

    pi = high_surprisal_weights(base_nll, mask, 1.5)
    want_pi = [ref.power_weights(b_rows[i], m_rows[i], 1.5) for i in range(6)]
    assert pi.tolist() == [pytest.approx(row, abs=1e-12) for row in want_pi]
    got_w = weighted_aggregate_tokens(token_nll[0], pi, mask, mode)
    assert got_w.tolist() == pytest.approx([ref.W(rows[i], want_pi[i], m_rows[i], mode) for i in range(6)], rel=1e-12)

    assert reference_scale(base_nll, mask, mode).item() == pytest.approx(ref.reference_scale(b_rows, m_rows, mode), rel=1e-12)


def test_hand_computed_example():
    # two examples: supervised NLLs [1, 3] (n=2) and [2, 2, 2, 6] (n=4), padding holds junk
    values = torch.tensor([[1.0, 99.0, 3.0, 99.0], [2.0, 2.0, 2.0, 6.0]], dtype=torch.float64)
    mask = torch.tensor([[True, False, True, False], [True, True, True, True]])
    assert aggregate_tokens(values, mask, MEAN).tolist() == [2.0, 3.0]
    assert aggregate_tokens(values, mask, SUM).tolist() == [4.0, 12.0]
    # sum mode: per-example sums then the batch mean = (4 + 12) / 2 = 8; global token mean = 16 / 6
    terms = reconstruction_terms(values[None], values, mask, mode=SUM, alpha=0.0, c_base=4.0, epsilon=0.0)
    assert terms["raw"].item() == pytest.approx(8.0)
    assert terms["dist"].item() == pytest.approx(2.0)
    assert terms["ex"].item() == pytest.approx(1.0)  # l == b, epsilon 0
    # alpha = 1: pi proportional to b -> example 1 weights [1/4, 3/4]: W_mean = 1/4 + 9/4 = 2.5, W_sum = 5
    pi = high_surprisal_weights(values, mask, 1.0)
    assert pi[0].tolist() == pytest.approx([0.25, 0.0, 0.75, 0.0])
    assert weighted_aggregate_tokens(values, pi, mask, SUM)[0].item() == pytest.approx(5.0)
    assert concentration_factor(values, pi, mask, SUM)[0].item() == pytest.approx(2.5 / 2.0)


# ---------------------------------------------------------------- properties


@st.composite
def batches(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    samples = draw(st.integers(1, 4))
    batch = draw(st.integers(1, 6))
    length = draw(st.integers(1, 12))
    return random_batch(
        seed, samples=samples, batch=batch, length=length, pad_value=draw(st.sampled_from([float("nan"), float("inf"), 1e6, 0.0]))
    )


MODES = st.sampled_from(list(AggregationMode))
ALPHAS = st.floats(0.0, 4.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(batch=batches(), mode=MODES)
def test_alpha_zero_recovers_uniform_mode(batch, mode):
    token_nll, base_nll, mask = batch
    terms = reconstruction_terms(token_nll, base_nll, mask, mode=mode, alpha=0.0, c_base=2.0, epsilon=0.1)
    assert terms["tok"].item() == pytest.approx(terms["raw"].item(), rel=1e-12)
    assert terms["tokcc"].item() == pytest.approx(terms["dist"].item(), rel=1e-12)
    assert terms["tokinv"].item() == pytest.approx(terms["dist"].item(), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(batch=batches(), alpha=ALPHAS)
def test_kappa_and_eta_are_mode_invariant(batch, alpha):
    _, base_nll, mask = batch
    for weights in (high_surprisal_weights(base_nll, mask, alpha), low_surprisal_weights(base_nll, mask, alpha)):
        kappa_mean = concentration_factor(base_nll, weights, mask, MEAN)
        kappa_sum = concentration_factor(base_nll, weights, mask, SUM)
        torch.testing.assert_close(kappa_mean, kappa_sum, rtol=1e-12, atol=0)


@settings(max_examples=60, deadline=None)
@given(batch=batches(), alpha=ALPHAS, scale=st.floats(1e-3, 1e3))
def test_scaling_b_leaves_kappa_unchanged(batch, alpha, scale):
    _, base_nll, mask = batch
    for weight_fn in (high_surprisal_weights, low_surprisal_weights):
        kappa = concentration_factor(base_nll, weight_fn(base_nll, mask, alpha), mask, MEAN)
        scaled = base_nll * scale
        kappa_scaled = concentration_factor(scaled, weight_fn(scaled, mask, alpha), mask, MEAN)
        torch.testing.assert_close(kappa, kappa_scaled, rtol=1e-9, atol=0)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), batch=st.integers(2, 6))
def test_sum_is_example_sum_then_batch_mean_not_global_token_mean(seed, batch):
    token_nll, base_nll, mask = random_batch(seed, samples=1, batch=batch, length=10)
    mask[0, :] = True  # n_0 = 10
    mask[1, :] = False
    mask[1, 3] = True  # n_1 = 1: lengths differ
    token_nll = torch.where(mask, token_nll.nan_to_num(1.0), token_nll)
    raw_sum = reconstruction_terms(token_nll, base_nll.nan_to_num(1.0), mask, mode=SUM, alpha=0.0, c_base=1.0, epsilon=0.0)["raw"].item()
    values = token_nll[0]
    per_example_sums = [values[i][mask[i]].sum().item() for i in range(batch)]
    global_token_mean = values[mask].sum().item() / mask.sum().item()
    assert raw_sum == pytest.approx(sum(per_example_sums) / batch, rel=1e-12)
    assert raw_sum != pytest.approx(global_token_mean, rel=1e-3)


@settings(max_examples=40, deadline=None)
@given(batch=batches(), mode=MODES, alpha=ALPHAS, enumerated=st.booleans())
def test_gradients_finite_zero_on_padding_and_never_reach_b(batch, mode, alpha, enumerated):
    token_nll, base_nll, mask = batch
    token_nll = token_nll.clone().requires_grad_(True)
    base_nll = base_nll.clone().requires_grad_(True)
    q = None
    if enumerated:
        q_logits = torch.zeros(token_nll.shape[:2], dtype=torch.float64, requires_grad=True)
        q = torch.softmax(q_logits, dim=0)
    terms = reconstruction_terms(token_nll, base_nll, mask, mode=mode, alpha=alpha, c_base=1.3, epsilon=0.01, sample_weights=q)
    for key in LOSS_KEYS:
        assert math.isfinite(terms[key].item()), key
        grad, grad_b = torch.autograd.grad(terms[key], (token_nll, base_nll), retain_graph=True, allow_unused=True)
        assert grad_b is None, f"{key}: gradient reached the frozen z-free NLL"
        assert torch.isfinite(grad).all(), key
        assert (grad[:, ~mask] == 0).all(), f"{key}: gradient on padding"
        assert (grad[:, mask] != 0).any(), f"{key}: no gradient on supervised tokens"


@settings(max_examples=40, deadline=None)
@given(batch=batches(), alpha=ALPHAS)
def test_weights_normalised_zero_on_padding_and_monotone(batch, alpha):
    _, base_nll, mask = batch
    pi = high_surprisal_weights(base_nll, mask, alpha)
    rho = low_surprisal_weights(base_nll, mask, alpha)
    for weights in (pi, rho):
        torch.testing.assert_close(weights.sum(-1), torch.ones(mask.shape[0], dtype=torch.float64))
        assert (weights[~mask] == 0).all()
    for i in range(mask.shape[0]):
        order = torch.argsort(base_nll[i][mask[i]])
        assert (pi[i][mask[i]][order].diff() >= -1e-15).all()
        assert (rho[i][mask[i]][order].diff() <= 1e-15).all()


def test_weights_are_uniform_at_alpha_zero():
    _, base_nll, mask = random_batch(3)
    pi = high_surprisal_weights(base_nll, mask, 0.0)
    uniform = mask.double() / mask.sum(-1, keepdim=True)
    torch.testing.assert_close(pi, uniform, rtol=1e-15, atol=0)


def test_padding_values_never_change_the_result():
    clean = random_batch(5, pad_value=0.0)
    dirty = random_batch(5, pad_value=float("nan"))
    for mode in AggregationMode:
        a = reconstruction_terms(*clean, mode=mode, alpha=1.0, c_base=1.0, epsilon=0.1)
        b = reconstruction_terms(*dirty, mode=mode, alpha=1.0, c_base=1.0, epsilon=0.1)
        assert all(a[k].item() == b[k].item() for k in a)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", ["Sum", "MEAN", "token", "", None, 1])
def test_bad_mode_names_the_value_and_allowed_values_where_it_enters(bad):
    with pytest.raises(ValueError, match=r"allowed values: mean, sum") as info:
        parse_aggregation_mode(bad, "mode")
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bare", ["mean", "sum", "Sum", None])
def test_the_losses_take_the_mode_as_the_enum_and_refuse_a_bare_string(bare):
    """Below the edges a mode is an AggregationMode: even a valid name as a plain string means a caller skipped the
    parse, and is refused naming the value and the allowed values."""
    token_nll, base_nll, mask = random_batch(0)
    for call in (
        lambda: aggregate_tokens(token_nll[0], mask, bare),
        lambda: weighted_aggregate_tokens(token_nll[0], torch.ones_like(base_nll), mask, bare),
        lambda: reference_scale(base_nll, mask, bare),
        lambda: reconstruction_terms(token_nll, base_nll, mask, mode=bare, alpha=0.0, c_base=1.0, epsilon=0.0),
    ):
        with pytest.raises(TypeError, match=r"not an AggregationMode \(mean, sum\)") as info:
            call()
        assert repr(bare) in str(info.value)


def test_bad_inputs_are_refused():
    token_nll, base_nll, mask = random_batch(0)
    kwargs = dict(mode=SUM, alpha=0.0, c_base=1.0, epsilon=0.0)
    with pytest.raises(ValueError, match="alpha"):
        reconstruction_terms(token_nll, base_nll, mask, **{**kwargs, "alpha": -0.5})
    with pytest.raises(ValueError, match="c_base"):
        reconstruction_terms(token_nll, base_nll, mask, **{**kwargs, "c_base": 0.0})
    with pytest.raises(ValueError, match=r"\[S, B, T\]"):
        reconstruction_terms(token_nll[0], base_nll, mask, **kwargs)
    empty = mask.clone()
    empty[2] = False
    with pytest.raises(ValueError, match=r"no supervised tokens"):
        reconstruction_terms(token_nll, base_nll, empty, **kwargs)
    with pytest.raises(ValueError, match="sum to 1"):
        reconstruction_terms(token_nll, base_nll, mask, **kwargs, sample_weights=torch.full(token_nll.shape[:2], 0.5, dtype=torch.float64))
    with pytest.raises(TypeError, match="bool"):
        aggregate_tokens(token_nll, mask.long(), MEAN)


def test_posterior_expectation_is_mean_or_weighted_sum():
    values = torch.tensor([[1.0, 4.0], [3.0, 8.0]])
    assert posterior_expectation(values).tolist() == [2.0, 6.0]
    weights = torch.tensor([[0.25, 1.0], [0.75, 0.0]])
    assert posterior_expectation(values, weights).tolist() == [2.5, 4.0]


def test_hybrid_is_the_configured_weighted_sum():
    terms = reconstruction_terms(*random_batch(1), mode=SUM, alpha=1.0, c_base=3.0, epsilon=0.1)
    combined = hybrid_term(terms, {"tokcc": 0.75, "dist": 0.25})
    assert combined.item() == pytest.approx(0.75 * terms["tokcc"].item() + 0.25 * terms["dist"].item())
    with pytest.raises(ValueError, match="unknown term 'kl'"):
        hybrid_term(terms, {"kl": 1.0})
    with pytest.raises(ValueError, match="at least one term"):
        hybrid_term(terms, {})
    with pytest.raises(ValueError, match=r"hybrid_coefficients.dist: -0.5 is not allowed; it must be a finite number >= 0"):
        hybrid_term(terms, {"tokcc": 1.0, "dist": -0.5})
    with pytest.raises(ValueError, match="every coefficient is 0"):
        hybrid_term(terms, {"tokcc": 0.0})


@pytest.mark.parametrize("mode", list(AggregationMode))
@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.5])
def test_an_example_whose_zfree_nll_is_exactly_zero_keeps_every_term_finite(mode, alpha):
    """b floored at 1e-12 in kappa and eta, as in the weights: an all-zero example has kappa = eta = 1, not 0/0."""
    token_nll, base_nll, mask = random_batch(4)
    base_nll[0, mask[0]] = 0.0
    terms = reconstruction_terms(token_nll, base_nll, mask, mode=mode, alpha=alpha, c_base=2.0, epsilon=0.1)
    assert all(math.isfinite(value.item()) for value in terms.values())
    for weights in (high_surprisal_weights(base_nll, mask, alpha), low_surprisal_weights(base_nll, mask, alpha)):
        assert concentration_factor(base_nll, weights, mask, mode)[0].item() == pytest.approx(1.0, rel=1e-12)


def test_one_zero_token_makes_eta_tiny_and_the_logged_minimum_shows_it():
    """tokinv weights rho ~ b^-alpha put nearly all weight on a token the z-free model predicts exactly: eta_i falls
    to about 1e-12 / A_mean(b_i). Finite, as the spec's formula gives, and visible in eta_min."""
    token_nll, base_nll, mask = random_batch(5)
    first = mask[0].nonzero()[0, 0]
    base_nll[0, first] = 0.0
    terms = reconstruction_terms(token_nll, base_nll, mask, mode=MEAN, alpha=1.0, c_base=2.0, epsilon=0.1)
    assert math.isfinite(terms["tokinv"].item()) and terms["tokinv"].item() > 1e6
    assert terms["eta_min"].item() < 1e-9 and terms["kappa_min"].item() > 0


# ---------------------------------------------------------------- auxiliary terms ignore the mode


AUXILIARY = [
    auxiliary_losses.categorical_kl,
    auxiliary_losses.posterior_entropy,
    auxiliary_losses.router_support,
    auxiliary_losses.router_marginal_kl,
    auxiliary_losses.gaussian_kl,
    auxiliary_losses.posterior_variance,
    auxiliary_losses.inter_latent_divergence,
]


@pytest.mark.parametrize("fn", AUXILIARY, ids=lambda f: f.__name__)
def test_auxiliary_terms_take_no_mode(fn):
    assert not any("mode" in name for name in inspect.signature(fn).parameters)


def test_auxiliary_terms_unchanged_when_the_mode_flips():
    """One objective per mode on the same batch: only the reconstruction part may differ."""
    torch.manual_seed(0)
    token_nll, base_nll, mask = random_batch(4, samples=3, batch=5, length=9, pad_value=0.0)
    q_logits = torch.randn(5, 3, dtype=torch.float64)
    decoder_logits = torch.randn(3, 5, 9, 7, dtype=torch.float64)
    mu, logvar = torch.randn(5, 4, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)

    def objective(mode):
        recon = reconstruction_terms(token_nll, base_nll, mask, mode=mode, alpha=1.0, c_base=1.0, epsilon=0.1)
        aux = {
            "categorical_kl": auxiliary_losses.categorical_kl(q_logits),
            "posterior_entropy": auxiliary_losses.posterior_entropy(q_logits),
            "router_support": auxiliary_losses.router_support(q_logits),
            "router_marginal_kl": auxiliary_losses.router_marginal_kl(q_logits),
            "gaussian_kl": auxiliary_losses.gaussian_kl(mu, logvar),
            "posterior_variance": auxiliary_losses.posterior_variance(logvar),
            "inter_latent_divergence": auxiliary_losses.inter_latent_divergence(decoder_logits, mask),
        }
        return recon, aux

    recon_mean, aux_mean = objective(MEAN)
    recon_sum, aux_sum = objective(SUM)
    assert recon_mean["raw"].item() != pytest.approx(recon_sum["raw"].item())
    assert {k: v.item() for k, v in aux_mean.items()} == {k: v.item() for k, v in aux_sum.items()}


def test_auxiliary_values_by_hand():
    # q = [0.5, 0.5] against prior [0.25, 0.75]: KL = 0.5 ln 2 + 0.5 ln(2/3)
    q_logits = torch.log(torch.tensor([[0.5, 0.5]]))
    prior_logits = torch.log(torch.tensor([[0.25, 0.75]]))
    assert auxiliary_losses.categorical_kl(q_logits, prior_logits).item() == pytest.approx(
        0.5 * math.log(2) + 0.5 * math.log(2 / 3), rel=1e-6
    )
    assert auxiliary_losses.posterior_entropy(q_logits).item() == pytest.approx(math.log(2), rel=1e-6)
    assert auxiliary_losses.categorical_kl(q_logits).item() == pytest.approx(0.0, abs=1e-7)
    # batch marginal of one-hot rows [1,0], [1,0] over K=2 codes: [1, 0] -> KL to uniform = ln 2; support floor 1/4 misses by 1/4
    peaked = torch.tensor([[30.0, -30.0], [30.0, -30.0]])
    assert auxiliary_losses.router_marginal_kl(peaked).item() == pytest.approx(math.log(2), rel=1e-6)
    assert auxiliary_losses.router_support(peaked).item() == pytest.approx(0.25, rel=1e-6)
    # N(1, e^0) vs N(0, 1): KL = 0.5 per dim
    assert auxiliary_losses.gaussian_kl(torch.ones(3, 2), torch.zeros(3, 2)).item() == pytest.approx(1.0)
    assert auxiliary_losses.posterior_variance(torch.log(torch.tensor([[1.0, 3.0]]))).item() == pytest.approx(2.0)
    # identical predictions -> 0; two one-hot predictions that disagree -> JSD = ln 2
    mask = torch.tensor([[True]])
    same = torch.zeros(2, 1, 1, 3)
    assert auxiliary_losses.inter_latent_divergence(same, mask).item() == pytest.approx(0.0, abs=1e-7)
    apart = torch.tensor([[[[50.0, 0.0, 0.0]]], [[[0.0, 50.0, 0.0]]]])
    assert auxiliary_losses.inter_latent_divergence(apart, mask).item() == pytest.approx(math.log(2), rel=1e-5)
