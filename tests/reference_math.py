"""The spec's equations written out as plain Python loops, independent of the torch code.

Inputs are nested lists (or numpy arrays read element by element): token_nll[s][i][t],
b[i][t], mask[i][t]. Everything is float64 Python arithmetic.
"""

from __future__ import annotations

SURPRISAL_FLOOR = 1e-12


def supervised(mask_row):
    return [t for t, on in enumerate(mask_row) if on]


def power_weights(b_row, mask_row, exponent):
    idx = supervised(mask_row)
    raw = {t: max(float(b_row[t]), SURPRISAL_FLOOR) ** exponent for t in idx}
    total = sum(raw.values())
    return [raw[t] / total if t in raw else 0.0 for t in range(len(mask_row))]


def A(v_row, mask_row, mode):
    idx = supervised(mask_row)
    total = sum(float(v_row[t]) for t in idx)
    return total / len(idx) if mode == "mean" else total


def W(v_row, w_row, mask_row, mode):
    idx = supervised(mask_row)
    total = sum(w_row[t] * float(v_row[t]) for t in idx)
    return total if mode == "mean" else len(idx) * total


def expectation(per_sample, q, i):
    """E_q over samples s for example i: a plain mean, or sum_s q[s][i] * value."""
    num_samples = len(per_sample)
    if q is None:
        return sum(per_sample[s] for s in range(num_samples)) / num_samples
    return sum(float(q[s][i]) * per_sample[s] for s in range(num_samples))


def terms(token_nll, b, mask, mode, alpha, c_base, epsilon, q=None):
    num_samples, batch = len(token_nll), len(b)
    raw, ex, tok, tokcc, tokinv = [], [], [], [], []
    base_aggregates, kappas, etas = [], [], []
    for i in range(batch):
        pi = power_weights(b[i], mask[i], alpha)
        rho = power_weights(b[i], mask[i], -alpha)
        B_i = A(b[i], mask[i], mode)
        base_aggregates.append(B_i)
        kappa = W(b[i], pi, mask[i], mode) / B_i
        eta = W(b[i], rho, mask[i], mode) / B_i
        kappas.append(kappa)
        etas.append(eta)
        R_i = expectation([A(token_nll[s][i], mask[i], mode) for s in range(num_samples)], q, i)
        tok_i = expectation([W(token_nll[s][i], pi, mask[i], mode) for s in range(num_samples)], q, i)
        tokinv_i = expectation([W(token_nll[s][i], rho, mask[i], mode) for s in range(num_samples)], q, i)
        raw.append(R_i)
        ex.append(R_i / (B_i + epsilon))
        tok.append(tok_i)
        tokcc.append(tok_i / kappa)
        tokinv.append(tokinv_i / eta)

    def batch_mean(xs):
        return sum(xs) / len(xs)

    return {
        "raw": batch_mean(raw),
        "dist": batch_mean(raw) / c_base,
        "ex": batch_mean(ex),
        "tok": batch_mean(tok),
        "tokcc": batch_mean(tokcc) / c_base,
        "tokinv": batch_mean(tokinv) / c_base,
        "base_aggregate_min": min(base_aggregates),
        "kappa_min": min(kappas),
        "kappa_max": max(kappas),
        "eta_min": min(etas),
        "eta_max": max(etas),
    }


def reference_scale(b, mask, mode):
    return sum(A(b[i], mask[i], mode) for i in range(len(b))) / len(b)
