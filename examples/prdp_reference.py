"""NumPy reference of the PrDP mechanisms and baselines: an independent transcription of the paper's algorithms
(Chen, Sun, Xu, Dong, SIGMOD 2025; the parity oracle).

An independent re-implementation (the code behind the re-simulated numbers of docs/prdp.md), kept as written except
that every function takes an explicit ``numpy.random.Generator`` instead of a module-level
one. ``tests/test_prdp_parity.py`` compares the JAX engine with it in distribution, and
``benchmarks/prdp.py`` times it side by side with the engine. Single-attribute records
``v ∈ [0, U]``; E non-increasing in v.
"""

from __future__ import annotations

import numpy as np


# ---------- privacy functions (paper Sec 8.1) ----------
def make_E(kind, U, eps_hat=100.0, log_base=np.e):
    if kind == "inv":  # E(v) = 1e4 / v
        E = lambda v: np.minimum(eps_hat, 1e4 / np.maximum(v, 1e-300))  # noqa: E731
        Einv = lambda e: 1e4 / e  # noqa: E731
    elif kind == "sqrt":  # E(v) = 8 / sqrt(v)
        E = lambda v: np.minimum(eps_hat, 8.0 / np.sqrt(np.maximum(v, 1e-300)))  # noqa: E731
        Einv = lambda e: (8.0 / e) ** 2  # noqa: E731
    elif kind == "log":  # E(v) = 500 / log(v)^4   (base ambiguous; default ln)
        lb = np.log(log_base)

        def E(v):
            lv = np.log(np.maximum(v, 1.0)) / lb
            with np.errstate(divide="ignore"):
                r = 500.0 / lv**4
            return np.where(lv > 0, np.minimum(eps_hat, r), eps_hat)

        Einv = lambda e: np.exp(lb * (500.0 / e) ** 0.25)  # noqa: E731
    else:
        raise ValueError(kind)
    eps_check = float(E(np.float64(U)))
    return E, Einv, eps_check


class Setting:
    def __init__(self, kind, U, eps_hat=100.0, **kw):
        self.E, self.Einv, self.ec = make_E(kind, U, eps_hat, **kw)
        self.U, self.eh = float(U), float(eps_hat)
        self.L = int(np.ceil(np.log2(self.eh / self.ec) - 1e-12))

    def levels(self, e):
        """1-based level: i=1 <-> [ec, 2ec]; i>1 <-> (2^{i-1}ec, 2^i ec]."""
        i = np.ceil(np.log2(e / self.ec)).astype(np.int64)
        i = np.where(e > np.ldexp(self.ec, i), i + 1, i)
        i = np.where((i > 1) & (e <= np.ldexp(self.ec, i - 1)), i - 1, i)
        return np.clip(i, 1, self.L)

    def lo(self):  # lower budget edge of each level, i = 1..L
        return np.ldexp(self.ec, np.arange(0, self.L))


# ---------- Algorithm 1: PrDP count ----------
def prdp_count(rng, S, e, beta, scale=1.0):
    """scale=1: Alg.1 with E; scale=2: Alg.1 run with E'=E/2 (stage 1 of Alg.2)."""
    L, lo = S.L, S.lo()
    cnt = np.bincount(S.levels(e), minlength=L + 1)[1:]
    b = scale / lo
    noisy = cnt + rng.laplace(0.0, b)
    T = b * np.log(L / beta)
    heavy = noisy >= T
    ell = int(np.argmax(heavy)) + 1 if heavy.any() else L
    return ell, np.ldexp(S.ec, ell - 1), noisy[ell - 1 :].sum()


# ---------- Sec 5.2: PrDP "extension" for sum ----------
def prdp_sum_extension(rng, S, x, e, beta):
    L, lo = S.L, S.lo()
    cap = np.minimum(S.Einv(lo), S.U) / lo
    sums = np.bincount(S.levels(e), weights=x, minlength=L + 1)[1:]
    noisy = sums + rng.laplace(0.0, cap)
    heavy = noisy >= cap * np.log(L / beta)
    ell = int(np.argmax(heavy)) + 1 if heavy.any() else L
    return noisy[ell - 1 :].sum()


# ---------- base DP mechanisms M ----------
def universal_sum(rng, x, eps, B, beta):
    """SVT-chosen clipping threshold tau=2^j, then clipped sum + Laplace. eps split 1/2-1/2."""
    e1 = eps / 2
    b1 = beta / 2
    theta = 6.0 / e1 * np.log(2.0 / b1)
    J = int(np.ceil(np.log2(max(B, 1.0))))
    xs = np.sort(x)
    above = len(xs) - np.searchsorted(xs, np.ldexp(1.0, np.arange(J + 1)), side="right")
    passed = above + rng.laplace(0.0, 4.0 / e1, J + 1) < theta + rng.laplace(0.0, 2.0 / e1)
    j = int(np.argmax(passed)) if passed.any() else J
    tau = np.ldexp(1.0, j)
    return np.minimum(x, tau).sum() + rng.laplace(0.0, tau / (eps - e1))


def em_max(rng, x, eps, Ub, beta):
    """Exponential mechanism over integers [0,Ub]: utility -| #{x>y} - c |, c=ceil(2/eps ln((Ub+1)/beta))."""
    xs = np.sort(x)
    n = len(xs)
    c = np.ceil(2.0 / eps * np.log((Ub + 1) / beta))
    starts = np.concatenate([[0.0], xs])
    ends = np.concatenate([xs, [Ub + 1.0]])
    above = n - np.arange(n + 1)
    lens = ends - starts
    with np.errstate(divide="ignore"):
        logw = np.log(lens) - eps * np.abs(above - c) / 2.0
    k = int(np.argmax(logw + rng.gumbel(size=n + 1)))
    return float(rng.integers(int(starts[k]), int(ends[k])))


# ---------- Algorithm 2: general PrDP framework ----------
def prdp_framework(rng, S, x, e, beta, mech, restrict_domain=False):
    ell, eps_tau, _ = prdp_count(rng, S, e, beta / 2, scale=2.0)
    keep = S.levels(e) >= ell
    Ub = min(S.U, np.floor(S.Einv(eps_tau))) if restrict_domain else S.U
    return mech(rng, x[keep], eps_tau / 2, Ub, beta / 2)


# ---------- Algorithms 3-4: PrLDP count ----------
def prldp_count(rng, S, e, beta, thr="paper", per_user=False):
    n, L, lo = len(e), S.L, S.lo()
    b = 1.0 / lo
    lv = S.levels(e)
    cnt = np.bincount(lv, minlength=L + 1)[1:]
    if per_user:
        msg = rng.laplace(0.0, b, (n, L))
        msg[np.arange(n), lv - 1] += 1.0
        agg = msg.sum(0)
    else:
        agg = cnt + rng.gamma(n, b) - rng.gamma(n, b)
    lnf = np.log(L / beta)
    T = np.sqrt(8 * n) * b * lnf if thr == "paper" else np.sqrt(8 * n * lnf) * b
    heavy = agg >= T
    ell = int(np.argmax(heavy)) + 1 if heavy.any() else L
    return ell, np.ldexp(S.ec, ell - 1), agg[ell - 1 :].sum()


# ---------- baselines ----------
def naive_count(rng, S, n):
    return n + rng.laplace(0.0, 1.0 / S.ec)


def naive_sum(rng, S, x, beta):
    return universal_sum(rng, x, S.ec, S.U, beta)


def pdp_count(rng, S, e, beta):
    t = int(np.ceil(np.log2(S.eh / S.ec)))
    k = np.ldexp(S.ec, np.arange(t + 1))
    es = np.sort(e)
    c = len(es) - np.searchsorted(es, k, side="right")
    est = c + t / k * rng.laplace(0.0, 1.0, t + 1) - t / k * np.log(t / beta)
    return max(0.0, est.max())


def pdp_sum(rng, S, x, e, beta):
    t = int(np.ceil(np.log2(S.eh * S.U / S.ec)))
    best = 0.0
    for i in range(t + 1):
        g = np.ldexp(1.0, i) / S.eh
        s = np.minimum(np.floor(g * e), x).sum() + t * g * rng.laplace(0.0, 1.0) - t * g * np.log(t / beta)
        best = max(best, s)
    return best


# ---------- data + metrics ----------
def normal_data(rng, n, mu, sig):
    out = np.empty(0)
    while len(out) < n:
        z = rng.normal(mu, sig, n)
        out = np.concatenate([out, z[z >= 0]])
    return np.floor(out[:n])


def trimmed_mean(a, frac=0.2):
    a = np.sort(np.asarray(a, float))
    k = int(len(a) * frac)
    return a[k : len(a) - k].mean()
