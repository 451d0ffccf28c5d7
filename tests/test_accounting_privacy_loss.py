"""Property-based soundness of the accountants over the whole legal parameter range.

A seeded generator draws mechanisms (Laplace, Gaussian, discrete Laplace, randomized response,
the Poisson-subsampled Gaussian), scales from 1e-300 to 1e300, sensitivities, δ down to the
round-off floor, ε up to 1e4, compositions; every answer of ``accounting.pld`` /
``accounting.get_epsilon`` / ``accounting.exact`` is checked against an independent truth
(closed forms evaluated here, exact sums, dp_accounting's optimistic PLD as a lower bound on
the truth). The contract: every answer is at or above the truth, or ∞, or a ``ValueError`` that
names a parameter — never 0, NaN or a silently truncated tail. A few cases run by default, many
more under ``-m slow``.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from scipy import optimize as sopt
from scipy import special

import accounting
import dpjax

PARAMETER_NAMES = ("value_discretization_interval", "delta", "count", "sensitivity", "scale", "sigma", "epsilon")


def _log_uniform(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


# ----------------------------------------------------------------------------------
# independent truths
# ----------------------------------------------------------------------------------
def _laplace_epsilon(r, delta):
    """Laplace pair r = Δ/b apart: δ(ε) = 1 − e^{(ε−r)/2} on [0, r), so ε(δ) = max(r + 2 log(1 − δ), 0)."""
    return max(r + 2.0 * math.log1p(-delta), 0.0)


def _laplace_delta(r, eps):
    return 0.0 if eps >= r else -math.expm1(min(eps - r, 0.0) / 2.0)


def _gaussian_delta(mu, eps):
    """Balle–Wang in log space with scipy's log_ndtr (independent of the engine's erfc path)."""
    a, b = mu / 2.0 - eps / mu, -mu / 2.0 - eps / mu
    return float(special.ndtr(a) - np.exp(eps + special.log_ndtr(b)))


def _gaussian_epsilon(mu, delta):
    if _gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    hi = mu * mu / 2.0 + mu * (abs(special.ndtri(delta)) + 2.0) + 1.0
    return sopt.brentq(lambda e: _gaussian_delta(mu, e) - delta, 0.0, hi, xtol=1e-12, rtol=1e-13)


def _gaussian_epsilon_lower(mu, delta):
    """A lower bound of the Gaussian ε(δ) for large μ (where the bracketed search above loses
    precision): with a = μ/2 − ε/μ, e^ε φ(−μ/2 − ε/μ) = φ(a) and Mills' ratio give
    δ(ε) ≥ Φ(a) − (2/μ)φ(a) =: g(a) for ε ≥ 0, so the root is at least μ(μ/2 − a*) with g(a*) = δ;
    ``inf`` where that overflows (no finite float is at or above the truth)."""
    a = sopt.brentq(
        lambda t: special.ndtr(t) - (2.0 / mu) * np.exp(-t * t / 2.0) / math.sqrt(2 * math.pi) - delta,
        -50.0,
        5.0,
        xtol=1e-14,
    )
    with np.errstate(over="ignore"):
        return float(np.float64(mu) * (np.float64(mu) / 2.0 - a)) * (1.0 - 1e-12)


def _discrete_laplace_delta(b, sens, eps):
    """Exact sum over the integers (log space) of (p_0 − e^ε p_Δ)_+, p(k) ∝ e^{−|k|/b}."""
    k = np.arange(-int(60 * b + 10 * sens + 50), int(60 * b + 10 * sens + 51), dtype=float)
    log_norm = np.log(-np.expm1(-1.0 / b)) - np.log1p(np.exp(-1.0 / b))
    lp, lq = log_norm - np.abs(k) / b, log_norm - np.abs(k - sens) / b
    return float(np.sum(np.maximum(np.exp(lp) - np.exp(eps + lq), 0.0)))


def _rr_delta(eps0, k, eps):
    p = math.exp(eps0) / (math.exp(eps0) + k - 1)
    q = 1.0 / (math.exp(eps0) + k - 1)
    e = math.exp(min(eps, 700.0))
    return max(p - e * q, 0.0) + max(q - e * p, 0.0) + (k - 2) * q * max(1.0 - e, 0.0)


# ----------------------------------------------------------------------------------
# the contract
# ----------------------------------------------------------------------------------
def _answer(fn):
    """The accountant's answer, or None for a ValueError naming a parameter (a clear refusal)."""
    try:
        out = float(np.asarray(fn()))
    except ValueError as exc:
        assert any(name in str(exc) for name in PARAMETER_NAMES), f"refusal names no parameter: {exc}"
        return None
    assert not math.isnan(out), "NaN answer"
    return out


def _check_epsilon(got, truth, what):
    if got is None:
        return
    assert got >= truth * (1.0 - 1e-9) - 1e-9, f"{what}: ε {got!r} below the truth {truth!r}"
    assert truth == 0.0 or got > 0.0, f"{what}: ε 0 where the truth is {truth!r}"


def _check_delta(got, truth, what):
    if got is None:
        return
    assert got >= truth * (1.0 - 1e-9) - 1e-15, f"{what}: δ {got!r} below the truth {truth!r}"


def _case(rng):
    kind = rng.choice(
        ["laplace", "gaussian", "discrete_laplace", "randomized_response", "laplace_extreme", "gaussian_extreme"]
    )
    delta = _log_uniform(rng, 1e-12, 0.5)
    eps = float(rng.choice([0.0, _log_uniform(rng, 1e-3, 1e4)]))
    if kind == "laplace":
        b, sens = _log_uniform(rng, 1e-3, 1e3), _log_uniform(rng, 1e-2, 1e2)
        r = sens / b
        return kind, dpjax.Laplace(b), sens, delta, eps, _laplace_epsilon(r, delta), _laplace_delta(r, eps)
    if kind == "laplace_extreme":
        b = _log_uniform(rng, 1e-300, 1e300)
        r = 1.0 / b
        return kind, dpjax.Laplace(b), 1.0, delta, eps, _laplace_epsilon(r, delta), _laplace_delta(r, eps)
    if kind in ("gaussian", "gaussian_extreme"):
        s = _log_uniform(rng, 1e-2, 1e2) if kind == "gaussian" else _log_uniform(rng, 1e-300, 1e300)
        mu = 1.0 / s
        truth_e = _gaussian_epsilon(mu, delta) if mu < 1e3 else _gaussian_epsilon_lower(mu, delta)
        return kind, dpjax.Gaussian(s), 1.0, delta, eps, truth_e, _gaussian_delta(mu, eps) if mu < 1e3 else 1.0
    if kind == "discrete_laplace":
        b, sens = _log_uniform(rng, 0.2, 50.0), float(rng.integers(1, 4))
        d = _discrete_laplace_delta(b, sens, eps)
        truth_e = (
            sopt.brentq(lambda e: _discrete_laplace_delta(b, sens, e) - delta, 0.0, sens / b + 1e-9)
            if _discrete_laplace_delta(b, sens, 0.0) > delta
            else 0.0
        )
        return kind, dpjax.DiscreteLaplace(b), sens, delta, eps, truth_e, d
    eps0, k = _log_uniform(rng, 1e-3, 30.0), int(rng.integers(2, 9))
    truth_e = (
        sopt.brentq(lambda e: _rr_delta(eps0, k, e) - delta, 0.0, eps0 + 1e-12)
        if _rr_delta(eps0, k, 0.0) > delta
        else 0.0
    )
    return kind, dpjax.RandomizedResponse(eps0, k), 1.0, delta, eps, truth_e, _rr_delta(eps0, k, eps)


def _check_case(rng, index):
    kind, mech, sens, delta, eps, truth_e, truth_d = _case(rng)
    what = f"case {index}: {mech!r}, Δ={sens:g}, δ={delta:g}, ε={eps:g}"
    try:
        pld = accounting.pld(mech, sensitivity=sens)
    except ValueError as exc:
        assert any(name in str(exc) for name in PARAMETER_NAMES), f"refusal names no parameter: {exc}"
        return
    _check_epsilon(_answer(lambda: pld.get_epsilon_for_delta(delta)), truth_e, what)
    _check_delta(_answer(lambda: pld.get_delta_for_epsilon(eps)), truth_d, what)
    _check_epsilon(_answer(lambda: accounting.get_epsilon(mech, delta, sensitivity=sens)), truth_e, what + " (fused)")
    if kind in ("laplace", "gaussian", "laplace_extreme"):
        _check_epsilon(_answer(lambda: accounting.exact.epsilon(mech, delta, sens)), truth_e, what + " (exact)")
    pure = float(np.asarray(pld.pure_epsilon()))
    if kind.startswith("laplace"):
        assert pure == pytest.approx(sens / float(mech.scale), rel=1e-12) or pure >= sens / float(mech.scale)
    if kind.startswith("gaussian"):
        assert pure == math.inf, f"{what}: a Gaussian is not pure-DP, pure ε {pure}"


#: seed 1 runs in the default suite; the others (up to 13 s each) are slow, beside the 40 seeds of the wide run
@pytest.mark.parametrize("seed", [pytest.param(s, marks=pytest.mark.slow) if s != 1 else s for s in range(6)])
def test_accountants_never_below_the_truth(seed):
    rng = np.random.default_rng(1000 + seed)
    for i in range(2):
        _check_case(rng, i)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_accountants_never_below_the_truth_wide(seed):
    rng = np.random.default_rng(5000 + seed)
    for i in range(5):
        _check_case(rng, i)


@pytest.mark.slow
def test_the_issue_cases():
    """The cases of the hardening issue: huge pure ε, ε above 200, an unbounded loss, a batch of
    fixed-region PB-DP mechanisms."""

    p = accounting.pld(dpjax.Laplace(scale=0.001))
    assert float(p.get_epsilon_for_delta(1e-6)) >= _laplace_epsilon(1000.0, 1e-6)
    assert float(p.get_delta_for_epsilon(10.0)) == pytest.approx(1.0)
    acc = accounting.Accountant(epsilon_budget=1.0, delta=1e-6)
    with pytest.raises(ValueError, match="epsilon_budget"):
        acc.record(dpjax.Laplace(scale=1e-3))
    boosted = dpjax.PrivacyBoosted(dpjax.Gaussian(1.0), dpjax.AbsoluteError(2.0), 0.9)
    assert float(accounting.exact.epsilon(boosted, 1e-6, 25.0)) == pytest.approx(430.42, abs=0.01)
    assert float(accounting.pld(dpjax.DiscreteGaussian(1.0)).pure_epsilon()) == math.inf


@pytest.mark.slow
def test_the_issue_cases_batched_fixed_region():
    """A batch of fixed-region PB-DP mechanisms (failed with Incompatible shapes): the same ε as
    one at a time."""
    import jax.numpy as jnp

    batch = dpjax.PrivacyBoosted(dpjax.Gaussian(jnp.array([1.0, 2.0])), dpjax.FixedInterval(0.0, 10.0), 0.4)
    coarse = {"value_discretization_interval": 2.0**-6}
    together = np.asarray(accounting.pld(batch, **coarse).get_epsilon_for_delta(1e-5))
    apart = [
        float(
            accounting.pld(
                dpjax.PrivacyBoosted(dpjax.Gaussian(s), dpjax.FixedInterval(0.0, 10.0), 0.4), **coarse
            ).get_epsilon_for_delta(1e-5)
        )
        for s in (1.0, 2.0)
    ]
    np.testing.assert_allclose(together, apart, rtol=1e-6)


@pytest.mark.parametrize("sigma", [1e-285, 7e-180, 1e-100, 4e-6, 3e-7])
def test_tiny_sigma_gaussian_never_below_the_truth(sigma):
    """μ = 1/σ up to 1e285: the root search stopped at 2^99 (its iteration cap) and reported it where
    the truth overflows (σ 1e-285), and 2e-8 relative below the truth at σ 1e-100."""
    truth = _gaussian_epsilon_lower(1.0 / sigma, 1e-6)
    for got in (
        accounting.pld(dpjax.Gaussian(sigma)).get_epsilon_for_delta(1e-6),
        accounting.get_epsilon(dpjax.Gaussian(sigma), 1e-6),
    ):
        _check_epsilon(float(got), truth, f"Gaussian({sigma})")


@pytest.mark.slow
def test_randomized_response_at_large_epsilon_never_below_the_truth():
    """q = 1/(e^ε + k − 1) was computed as (1 − p)/(k − 1), which cancels at large ε: RR(27.19, 6) at
    δ = 0.00264794 read ε 27.1914593, below the truth 27.1914639 (mpmath: ε = log((p − δ)/q))."""
    import mpmath as mp

    eps0, k, delta = 27.194115314420735, 6, 0.00264794
    with mp.workdps(50):
        e = mp.e ** mp.mpf(eps0)
        truth = float(mp.log((e / (e + k - 1) - delta) * (e + k - 1)))
    mech = dpjax.RandomizedResponse(eps0, k)
    for got in (
        accounting.pld(mech).get_epsilon_for_delta(delta),
        accounting.get_epsilon(mech, delta),
        accounting.exact.epsilon(mech, delta, 1.0),
    ):
        _check_epsilon(float(got), truth, "RandomizedResponse(27.19, 6)")


@pytest.mark.slow
def test_subsampled_gaussian_never_below_dp_accounting():
    """The Poisson-subsampled Gaussian composed T times, at q from 1e-12 to 1, against
    dp_accounting's optimistic PLD (a lower bound on the truth)."""
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    rng = np.random.default_rng(7)
    for q, sigma, count in [
        (1e-12, 0.5, 10),
        (1e-3, 0.8, 1000),
        (0.05, 1.5, 100),
        (1.0, 2.0, 3),
        (float(_log_uniform(rng, 1e-4, 1.0)), float(_log_uniform(rng, 0.6, 3.0)), 50),
    ]:
        ours = float(accounting.get_epsilon(dpjax.Gaussian(sigma), 1e-6, count=count, sampling_prob=q))
        lower = pld_mod.from_gaussian_mechanism(
            sigma, sampling_prob=q, value_discretization_interval=1e-3, pessimistic_estimate=False
        ).self_compose(count)
        assert ours >= lower.get_epsilon_for_delta(1e-6) - 1e-9, (q, sigma, count)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["laplace", "randomized_response", "subsampled_gaussian", "boosted"])
def test_pld_epsilon_gradient_is_the_exact_profiles(name):
    """jax.grad of ``pld(mech).get_epsilon_for_delta(δ)`` is the derivative of the exact ε(δ) (the
    grid's loss locations do not move: a Laplace atom gave −0.07 for −0.44), in 32-bit mode too."""
    import jax

    make, x, delta, q = {
        "laplace": (lambda b: dpjax.Laplace(scale=b), 1.5, 0.05, 1.0),
        "randomized_response": (lambda e: dpjax.RandomizedResponse(e, 3), 1.0, 0.05, 1.0),
        "subsampled_gaussian": (lambda s: dpjax.Gaussian(s), 1.0, 1e-5, 0.1),
        "boosted": (lambda s: dpjax.PrivacyBoosted(dpjax.Gaussian(s), dpjax.AbsoluteError(2.0), 0.9), 3.0, 1e-5, 1.0),
    }[name]

    def eps(v):
        return accounting.pld(make(v), sampling_prob=q).get_epsilon_for_delta(delta)

    grad = float(jax.grad(eps)(x))  # the user's 32-bit mode
    h = 1e-4
    fd = (
        (float(eps(x + h)) - float(eps(x - h))) / (2 * h)
        if q < 1
        else (float(accounting.exact.epsilon(make(x + h), delta)) - float(accounting.exact.epsilon(make(x - h), delta)))
        / (2 * h)
    )
    np.testing.assert_allclose(grad, fd, rtol=2e-3)


# ----------------------------------------------------------------------------------
# compositions against an independent bracket (losses rounded down and up)
# ----------------------------------------------------------------------------------
def _step_losses(kind, x, h, up):
    """One step's privacy-loss pmf under P on the lattice h·ℤ: (first index, masses), every loss rounded
    up (``up``: δ of the composition at or above the truth) or down (at or below it). ``kind``
    "rr": binary randomized response at ε₀ = x (atoms ±x); "laplace": Laplace at Δ/b = r = x, atoms
    r (P 1/2) and −r (P e^{−r}/2) and between them the loss r(1 − 2u) of u ∈ (0, 1), whose P-mass
    below ℓ is (e^{−(r−ℓ)/2} − e^{−r})/2."""
    rnd = np.ceil if up else np.floor
    lo, hi = int(rnd(-x / h)), int(rnd(x / h))
    p = np.zeros(hi - lo + 1)
    if kind == "rr":
        p[0] += special.expit(-x)
        p[-1] += special.expit(x)
        return lo, p
    p[0] += 0.5 * math.exp(-x)
    p[-1] += 0.5
    edges = np.arange(lo, hi + 1) * h  # continuous mass in (ℓ_j − h, ℓ_j] goes to j (up) or (ℓ_j, ℓ_j + h] to j
    cdf = lambda v: 0.5 * (np.exp(-(x - np.clip(v, -x, x)) / 2.0) - math.exp(-x))  # noqa: E731
    if up:
        p += cdf(edges) - cdf(edges - h)
    else:
        p += cdf(edges + h) - cdf(edges)
    return lo, np.maximum(p, 0.0)


def _compose_bracket(steps, h, up):
    """The composition of [(kind, x, count)] on h·ℤ by one numpy FFT: (first index, masses)."""
    parts = [(_step_losses(kind, x, h, up), count) for kind, x, count in steps]
    size = sum(count * (p.size - 1) for (_, p), count in parts) + 1
    n = 1 << (size - 1).bit_length()
    spec = np.ones(n // 2 + 1, complex)
    for (_, p), count in parts:
        spec = spec * np.fft.rfft(p, n) ** count
    out = np.maximum(np.fft.irfft(spec, n)[:size], 0.0)
    return sum(count * lo for (lo, _), count in parts), out


def _bracket_delta(lo, p, h, eps):
    """δ(ε) = Σ p_j (1 − e^{ε − ℓ_j})_+ of a lattice pmf."""
    loss = (lo + np.arange(p.size)) * h
    m = loss > eps
    return float(np.sum(p[m] * -np.expm1(eps - loss[m])))


def _bracket_epsilon(lo, p, h, delta):
    """Smallest ε ≥ 0 with δ(ε) ≤ delta (bisection on the lattice pmf)."""
    top = (lo + p.size) * h
    if _bracket_delta(lo, p, h, 0.0) <= delta:
        return 0.0
    a, b = 0.0, max(top, 0.0)
    for _ in range(200):
        mid = 0.5 * (a + b)
        a, b = (mid, b) if _bracket_delta(lo, p, h, mid) > delta else (a, mid)
    return a


#: absolute slack of the numpy FFT bracket's masses (its round-off), added to δ before reading ε
_BRACKET_NOISE = 1e-12


def _composition_case(rng, max_count):
    """[(kind, per-step loss, count)]: one or two parts, per-step losses 1e-6..700, counts up to max_count."""
    parts = []
    for _ in range(int(rng.integers(1, 3))):
        kind = str(rng.choice(["rr", "laplace"]))
        parts.append((kind, _log_uniform(rng, 1e-6, 700.0), int(np.exp(rng.uniform(0.0, np.log(max_count))))))
    return parts, _log_uniform(rng, 1e-9, 0.3)


def _engine_pld(parts):
    total = None
    for kind, x, count in parts:
        mech = dpjax.RandomizedResponse(x, 2) if kind == "rr" else dpjax.Laplace(1.0 / x)
        one = accounting.pld(mech).self_compose(count)
        total = one if total is None else total.compose(one)
    return total


def _check_composition(parts, delta):
    what = f"{parts}, δ={delta:g}"
    # a lattice fine enough for the bracket to be tight where it is cheap, at most ~2^22 points composed
    span = sum(2.0 * x * count for _, x, count in parts)
    h = max(max(x for _, x, _ in parts) / 64.0, span / 2.0**22)
    lower = _compose_bracket(parts, h, up=False)
    truth_e = _bracket_epsilon(*lower, h, delta + _BRACKET_NOISE)
    p = _engine_pld(parts)
    got = _answer(lambda: p.get_epsilon_for_delta(delta))
    _check_epsilon(got, truth_e, what)
    eps = truth_e * 0.99
    _check_delta(
        _answer(lambda: p.get_delta_for_epsilon(eps)),
        _bracket_delta(*lower, h, eps) - _BRACKET_NOISE,
        what + f" at ε={eps:g}",
    )
    pure = float(np.asarray(p.pure_epsilon()))
    assert pure >= sum(x * count for _, x, count in parts) * (1 - 1e-12), f"{what}: pure ε {pure}"
    if len(parts) == 1:
        kind, x, count = parts[0]
        mech = dpjax.RandomizedResponse(x, 2) if kind == "rr" else dpjax.Laplace(1.0 / x)
        _check_epsilon(_answer(lambda: accounting.get_epsilon(mech, delta, count=count)), truth_e, what + " (batch)")
    if got is not None:  # and not far above the truth: the upper bracket (losses rounded up)
        upper = _bracket_epsilon(*_compose_bracket(parts, h, up=True), h, max(delta - _BRACKET_NOISE, 0.0))
        assert got <= upper * 1.01 + 0.05, f"{what}: ε {got} far above the bracket's {upper}"


def test_bracket_oracle_holds_the_closed_forms():
    """The bracket itself: one step of each kind holds the closed-form ε(δ)."""
    for kind, x, delta in [("rr", 2.0, 1e-3), ("laplace", 3.0, 1e-2), ("laplace", 0.5, 0.1)]:
        h = x / 256.0
        lo = _bracket_epsilon(*_compose_bracket([(kind, x, 1)], h, up=False), h, delta)
        hi = _bracket_epsilon(*_compose_bracket([(kind, x, 1)], h, up=True), h, delta)
        truth = (
            _laplace_epsilon(x, delta)
            if kind == "laplace"
            else sopt.brentq(lambda e: _rr_delta(x, 2, e) - delta, 0.0, x)
        )
        assert lo - 1e-9 <= truth <= hi + 1e-9 and hi - lo < 3 * h, (kind, lo, truth, hi)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_compositions_never_below_the_bracket(seed):
    rng = np.random.default_rng(9100 + seed)
    _check_composition(*_composition_case(rng, 30))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(30))
def test_compositions_never_below_the_bracket_wide(seed):
    rng = np.random.default_rng(9200 + seed)
    _check_composition(*_composition_case(rng, 10_000))


# ----------------------------------------------------------------------------------
# soundness round 3: large per-step losses composed, tiny Gaussian σ through a grid
# ----------------------------------------------------------------------------------
def _laplace_twice_lower():
    """A lower bound of ε(1e-6) of Laplace(0.002) composed twice: the bracket with losses rounded down."""
    h = 500.0 / 2**14
    return _bracket_epsilon(*_compose_bracket([("laplace", 500.0, 2)], h, up=False), h, 1e-6 + _BRACKET_NOISE)


@pytest.mark.slow
def test_large_per_step_losses_composed_never_below_the_truth():
    """Laplace(0.002) × 2 read ε 848.96 at δ 1e-6 (truth ≥ 999.999996), pure ε 848.96 and δ NaN: the
    first mass of a grid starting at loss 424 was read from gaps ~e^424 (7.6e170), the composition
    overflowed and its round-off guard became −inf. Every route agrees on the truth now."""
    truth = _laplace_twice_lower()
    p = accounting.pld(dpjax.Laplace(0.002)).self_compose(2)
    assert float(p.get_epsilon_for_delta(1e-6)) >= truth
    assert float(p.pure_epsilon()) == pytest.approx(1000.0, rel=1e-12)
    d = np.asarray(p.get_delta_for_epsilon(np.array([0.0, 100.0, 900.0, 1000.0])))
    assert not np.isnan(d).any() and d[2] >= 0.5 and d[3] == 0.0
    assert float(accounting.get_epsilon(dpjax.Laplace(0.002), 1e-6, count=2)) >= truth
    acc = accounting.Accountant(epsilon_budget=950, delta=1e-6)
    with pytest.raises(ValueError, match="epsilon_budget"):
        acc.record(dpjax.Laplace(0.002), count=2)


@pytest.mark.parametrize("k", [2, 5])
def test_randomized_response_beyond_e700(k):
    """RR's closed-form δ(ε) at ε_RR = 801, against mpmath: ``e^ε`` clamped at e^700 read δ ≈ 1 − e^(700 − ε)
    just below ε_RR (1 where it is 0.39), so its PLD put mass 0.63 at +∞ for every ε_RR > 700, and a Gaussian
    table release (its noisy-max quantile RR at ε ≈ 770) could not calibrate ε = 1e6 ("the nearest: ε 838195")."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    eps0 = 801.0
    p0 = mp.e ** mp.mpf(eps0) / (mp.e ** mp.mpf(eps0) + k - 1)
    q0 = 1 / (mp.e ** mp.mpf(eps0) + k - 1)
    eps = [-900.0, -1.0, 0.0, 1.0, 700.0, 800.0, 800.5, 801.0, 1e4]
    want = [
        float(max(p0 - mp.e**e * q0, 0) + max(q0 - mp.e**e * p0, 0) + (k - 2) * q0 * max(1 - mp.e**e, 0))
        for e in map(mp.mpf, eps)
    ]
    mech = dpjax.RandomizedResponse(np.float64(eps0), k)
    with jax.enable_x64(True):
        got = np.asarray(mech.hockey_stick(np.asarray(eps), 0.0, 1.0))
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


@pytest.mark.slow
def test_randomized_response_beyond_e700_composed_with_a_gaussian():
    """RR(801) then Gaussian(σ 0.01) (μ 100), at δ 1e-6: ∞ while RR's δ(ε) clamped e^ε at e^700; now at or above
    the truth (mpmath: losses ±801 with masses p, q, each shifting the Gaussian's δ(ε)) and close to it."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    eps0, mu = mp.mpf(801), mp.mpf(100)
    p0, q0 = 1 / (1 + mp.e**-eps0), 1 / (1 + mp.e**eps0)

    def gauss(x):
        return mp.ncdf(-x / mu + mu / 2) - mp.e**x * mp.ncdf(-x / mu - mu / 2)

    truth = mp.findroot(lambda e: p0 * gauss(e - eps0) + q0 * gauss(e + eps0) - mp.mpf("1e-6"), mp.mpf(6000))
    with jax.enable_x64(True):
        rr = accounting.pld(dpjax.RandomizedResponse(np.float64(801.0)))
        got = float(rr.compose(accounting.pld(dpjax.Gaussian(np.float64(0.01)))).get_epsilon_for_delta(1e-6))
    assert float(truth) <= got <= float(truth) * (1 + 1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(
    "mech,count,truth",
    [
        (dpjax.RandomizedResponse(150.0, 2), 10, 1500.0),
        (dpjax.Laplace(1 / 700), 10, 6999.649),
        (dpjax.RandomizedResponse(500.0, 2), 2, 1000.0),
        (dpjax.RandomizedResponse(700.0, 2), 10, 7000.0),
        (dpjax.RandomizedResponse(700.0, 5), 3, 2100.0),
        (dpjax.RandomizedResponse(100.0, 2), 10, 1000.0),
    ],
)
def test_large_per_step_losses_composed_issue_cases(mech, count, truth):
    """The issue's other cases (1125.42 for 1500, 6250.64 for ≥ 6999.649, 924.88 / 6625.2 / 1987.6 for
    1000 / 7000 / 2100; RR(100) × 10 refused with a round-off floor of 2.2e19)."""
    p = accounting.pld(mech).self_compose(count)
    assert float(p.get_epsilon_for_delta(1e-6)) >= truth - 1e-6 * (truth > 2000) - 1e-6
    assert float(p.pure_epsilon()) >= truth
    assert float(accounting.get_epsilon(mech, 1e-6, count=count)) >= truth - 1e-6


@pytest.mark.slow
def test_cli_account_large_per_step_loss():
    """``dpjax account --mechanism laplace --scale 0.002 --steps 2`` agreed on 848.96."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpjax.cli",
            "account",
            "--mechanism",
            "laplace",
            "--scale",
            "0.002",
            "--steps",
            "2",
            "--delta",
            "1e-6",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["epsilon"] >= _laplace_twice_lower()


def test_overflowed_composition_is_refused_with_a_message():
    """A pmf whose masses overflow has no round-off bound: δ reads 1 (never NaN), ε is refused."""
    import jax.numpy as jnp

    from accounting.privacy_loss import grid as _grid

    p = accounting.pld(dpjax.Laplace(1.0))
    bad = _grid.GridPmf(
        p.remove.probs.at[5].set(1e300), p.remove.offset, p.remove.inf_mass, p.remove.roundoff, p.remove.step
    )
    q = dataclasses_replace(p, remove=bad).self_compose(3)
    assert float(q.roundoff) == math.inf
    assert np.asarray(q.get_delta_for_epsilon(jnp.array([0.5, 2.0]))).tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="overflowed"):
        q.get_epsilon_for_delta(1e-6)


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)


@pytest.mark.parametrize("step", [2.0**-3, 4.0])
def test_grid_delta_across_suffix_chunks(step):
    """The grid's δ(ε) chains suffix sums across chunks of 512/step points; it used the index in place of
    the loss (exp(−(K − k)·step) with k already a loss): NaN at steps above 1, δ too high below."""
    import jax
    import jax.numpy as jnp

    from accounting.privacy_loss import grid as _grid

    n = int(3 * 512 / step) + 7
    rng = np.random.default_rng(3)
    probs = rng.random(n) * np.exp(-np.linspace(0, 30, n))
    probs /= probs.sum() * 1.01
    offset = -n // 3
    eps = np.array([0.0, 3.3 * step, 100.0 * step, 700.0 * step])
    loss = (offset + np.arange(n)) * step
    want = [np.sum(np.where(loss > e, probs * -np.expm1(np.minimum(e - loss, 0.0)), 0.0)) for e in eps]
    with jax.enable_x64(True):
        pmf = _grid.GridPmf(jnp.asarray(probs), jnp.asarray(float(offset)), jnp.asarray(0.0), jnp.asarray(0.0), step)
        got = np.asarray(_grid.delta_for_epsilon(pmf, jnp.asarray(eps)[None]))[0]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)


@pytest.mark.slow
def test_tiny_sigma_gaussian_through_a_grid_never_below_the_truth():
    """σ 1e-4 (μ 1e4): composed with Laplace(1) read ε 0.0 (truth ≥ 50 047 533), subsampled at 0.5
    25 022 976 (≈ 50 046 112), use_analytic=False 49 739 904 (−0.61 %) and δ NaN, DP-SGD refused a
    step of 256: the grid's suffix sums chained chunks with the index in place of the loss, which
    overflows (NaN) at steps above 1."""
    mu = 1e4
    g = _gaussian_epsilon_lower(mu, 1e-6)
    # δ_{G∘L}(ε) ≥ ½ δ_G(ε − 1) (the Laplace loss is 1 with probability ½): ε_{G∘L}(δ) ≥ ε_G(2δ) + 1
    lower = _gaussian_epsilon_lower(mu, 2e-6) + 1.0
    comp = accounting.pld(dpjax.Gaussian(1e-4)).compose(accounting.pld(dpjax.Laplace(1.0)))
    assert float(comp.get_epsilon_for_delta(1e-6)) >= lower
    grid = accounting.pld(dpjax.Gaussian(1e-4), use_analytic=False)
    assert float(grid.get_epsilon_for_delta(1e-6)) >= g
    d = float(grid.get_delta_for_epsilon(0.99 * g))
    assert d >= _gaussian_delta(mu, 0.99 * g) * (1 - 1e-9) and not math.isnan(d)
    sub = float(accounting.pld(dpjax.Gaussian(1e-4), sampling_prob=0.5).get_epsilon_for_delta(1e-6))
    assert sub >= 50_046_100.0
    from accounting.dpsgd import dpsgd_epsilon

    assert float(dpsgd_epsilon(1e-4, 0.5, 1, 1e-6)) == pytest.approx(sub, rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [2e-4, 1.5e-4, 7.2e-5, 5e-5, 1e-6])
def test_tiny_sigma_gaussian_composed_with_laplace(sigma):
    """σ 2e-4 ∘ Laplace(1) read −0.82 %, σ 1.5e-4 −1.5 %; below ~7e-5 the losses leave the grid (they were
    carried to +∞: ε ∞), and basic composition answers: finite, and above the truth."""
    lower = _gaussian_epsilon_lower(1 / sigma, 2e-6) + 1.0
    comp = accounting.pld(dpjax.Gaussian(sigma)).compose(accounting.pld(dpjax.Laplace(1.0)))
    got = float(comp.get_epsilon_for_delta(1e-6))
    # ε_{G∘L}(δ) ≤ ε_G(δ(1 − 2^-60)) + 1 (Laplace(1) is 1-DP), up to the rounding of the bound and of the grid
    assert lower <= got <= _gaussian_epsilon(1 / sigma, 1e-6 * (1 - 1e-12)) * (1 + 1e-7) + 1.0
    batch = float(accounting.get_epsilon(dpjax.Gaussian(sigma), 1e-6, count=3, use_analytic=False))
    assert _gaussian_epsilon_lower(math.sqrt(3) / sigma, 1e-6) <= batch < math.inf


def _amplified(eps, q):
    """log(1 + q(e^ε − 1)) without overflow."""
    return eps + math.log(q + (1 - q) * math.exp(-eps)) if eps > 1 else math.log1p(q * math.expm1(eps))


def test_tiny_sigma_subsampled_gaussian_is_finite_and_exact():
    """pld(Gaussian(σ), sampling_prob=q) below σ ~7e-5 was ∞ (its losses left the grid). It is now the
    amplification bound (ε' = log(1 + q(e^ε − 1)) at qδ), which for one run is exactly the removal
    direction's profile: at least that, and within 1e-9 of it."""
    mu, q = 1e5, 0.5
    want = _amplified(_gaussian_epsilon_lower(mu, 1e-6 / q), q)
    p = accounting.pld(dpjax.Gaussian(1e-5), sampling_prob=q)
    got = float(p.get_epsilon_for_delta(1e-6))
    assert want <= got <= want * (1 + 1e-9)
    assert float(p.pure_epsilon()) == math.inf


@pytest.mark.slow
def test_tiny_sigma_gaussian_every_route_finite_and_sound():
    """σ 1e-5 and 1e-6 through the odometer, the batch query, DP-SGD and δ(ε): finite (they read ∞),
    at least an independent lower bound (the Gaussian alone's, which the composition cannot beat)."""
    from accounting.dpsgd import dpsgd_epsilon

    for sigma in (1e-5, 1e-6):
        mu = 1 / sigma
        alone = _gaussian_epsilon_lower(mu, 1e-6)
        acc = accounting.Accountant(delta=1e-6)
        acc.record(dpjax.Gaussian(sigma))
        spent = acc.record(dpjax.Laplace(1.0))
        assert alone + 1.0 - 1e-6 * alone <= spent < math.inf
        sub1 = _amplified(_gaussian_epsilon_lower(mu, 2e-6), 0.5)
        for got in (
            accounting.Accountant(delta=1e-6).record(dpjax.Gaussian(sigma), sampling_prob=0.5, count=3),
            dpsgd_epsilon(sigma, 0.5, 3, 1e-6),
            accounting.get_epsilon(dpjax.Gaussian(sigma), 1e-6, count=3, sampling_prob=0.5),
        ):
            # three runs leak at least what one does, and basic composition at most 3 ε(δ/3)
            assert sub1 <= float(got) <= 3 * _amplified(_gaussian_epsilon(mu, 1e-6 / 3 / 0.5), 0.5) * (1 + 1e-9)
        comp = accounting.pld(dpjax.Gaussian(sigma)).compose(accounting.pld(dpjax.Laplace(1.0)))
        eps = float(comp.get_epsilon_for_delta(1e-6))
        d = np.asarray(comp.get_delta_for_epsilon(np.array([eps, eps * (1 - 1e-6), 0.0])))
        assert d[0] <= 1e-6 * (1 + 1e-9) and d[1] >= _gaussian_delta(mu, eps * (1 - 1e-6)) and d[2] == 1.0


@pytest.mark.slow
def test_gaussian_fallback_above_the_truth_where_a_grid_resolves_it():
    """The basic-composition fallback applied to Gaussians the grid does hold: never below dp_accounting's
    optimistic PLD (≤ the truth), and at σ 1e-4 ∘ Laplace(1) within 1e-7 of the grid's answer."""
    from dp_accounting.pld import privacy_loss_distribution as dpl

    from accounting.privacy_loss.distribution import _bound_pld

    with jax.enable_x64(True):
        lap = accounting.pld(dpjax.Laplace(1.0))
        grid = float(accounting.pld(dpjax.Gaussian(1e-4)).compose(lap).get_epsilon_for_delta(1e-6))
        fb = float(_bound_pld(1e4, 1.0, True, None, True).compose(lap).get_epsilon_for_delta(1e-6))
        assert _gaussian_epsilon_lower(1e4, 2e-6) + 1.0 <= fb and abs(fb / grid - 1) < 1e-7
        for q, count in ((1.0, 1), (0.3, 1), (0.3, 4)):
            ours = _bound_pld(2.0 / 3.0, q, True, None, True).self_compose(count).compose(lap)
            ref = dpl.from_gaussian_mechanism(
                1.5, sampling_prob=q, pessimistic_estimate=False, value_discretization_interval=1e-4
            )
            ref = ref.self_compose(count).compose(
                dpl.from_laplace_mechanism(1.0, pessimistic_estimate=False, value_discretization_interval=1e-4)
            )
            for delta in (1e-3, 1e-6):
                assert float(ours.get_epsilon_for_delta(delta)) >= ref.get_epsilon_for_delta(delta), (q, count, delta)


def test_analytic_gaussian_epsilon_keeps_its_gradient_under_eager_grad():
    """jax.grad's tracers carry concrete values: the analytic Gaussian must not take its μ from them on the host (the
    gradient of ε read 0 instead of −4.52), nor answer ε on the host."""

    def fn(s):
        return accounting.pld(dpjax.Gaussian(sigma=s)).self_compose(10).get_epsilon_for_delta(1e-5)

    h = 1e-4
    fd = (float(fn(2.0 + h)) - float(fn(2.0 - h))) / (2 * h)
    assert float(jax.grad(fn)(2.0)) == pytest.approx(fd, rel=1e-4)
