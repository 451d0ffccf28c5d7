"""The exact discrete Laplace (dpjax.exact.laws.discrete_laplace): the fixed-trip one-scale sampler and the per-record
inverse CDF (float32, float64 and host decisions) are the host's exact function of each record's words, their
tables are exact floors, ties are decided by further words, and the releases fit the law."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax.exact import HostBits, ThreefryWords, table_samplers
from dpjax.exact.laws import discrete_laplace
from goodness_of_fit import chi2_pvalue


# -- the fixed-trip one-scale discrete Laplace: device = host, ties decided exactly ------------------------------


@pytest.mark.parametrize("t,shift", [(3, 0), (7, 3), (5000, 0), (1 << 20, 0), (1 << 30, 0)])
def test_fast_laplace_device_equals_exact_host_path(t, shift):
    """The device output is the host's exact function of the same word stream (record by record)."""

    n = 64
    with jax.enable_x64(True):
        words = ThreefryWords(jax.random.key(3), (n,))
        z, flag = jax.jit(lambda: discrete_laplace.discrete_laplace_fast(words, n, t, shift))()
        k0, k1 = int(words._k0), int(words._k1)
    host = discrete_laplace.resolve_on_host(
        z, np.ones(n, bool), lambda i: lambda j: table_samplers.threefry_word(k0, k1, j, i), t, shift
    )
    np.testing.assert_array_equal(np.asarray(z), host)
    assert not np.asarray(flag).any()


def test_fast_laplace_tables_are_exact_floors():
    """Each threshold is ⌊2^63 P(J ≤ j)⌋ / ⌊2^64 F⌋ of the exact CDFs (checked against 300-digit decimal arithmetic),
    and J's table ends where P(J > j) < 2^-40."""
    import decimal

    ctx = decimal.Context(prec=300)
    floor = lambda x, bits: int((x * 2**bits).to_integral_value(rounding=decimal.ROUND_FLOOR))  # noqa: E731
    for t in (5, 5000):
        offsets, widths, m = discrete_laplace.chunk_layout(t, 0)
        q = ctx.exp(decimal.Decimal(-1) / t)
        R = ctx.exp(decimal.Decimal(-(2**m)) / t)
        tail = lambda j: 2 * q / (1 + q) * R**j  # noqa: E731  P(J > j) = P(Z ≠ 0) R^j
        table = discrete_laplace.dl_icdf(t, 0)
        for j in (0, 1, 7, len(table) - 2, len(table) - 1):
            assert int(table[j]) == floor(1 - tail(j), 63)
        assert tail(len(table) - 1) < decimal.Decimal(2) ** -40 <= tail(len(table) - 2)
        for (o, w), chunk in zip(zip(offsets, widths), discrete_laplace.dl_tables(t, 0)):
            r = q ** (2**o)
            for c in (0, 1, (1 << w) - 2):
                assert int(chunk[c]) == floor((1 - r ** (c + 1)) / (1 - r ** (1 << w)), 64)
    assert (
        discrete_laplace.chunk_layout(5000, 0)[2] == 3 and discrete_laplace.chunk_layout(5, 0)[2] == 0
    )  # one word per record for τ ≤ 2^10


def test_fast_laplace_tie_is_decided_by_further_words():
    """A word equal to a threshold T = ⌊2^64 F⌋ is decided by the next words: U = T/2^64 + 0 < F keeps
    the chunk at c; U just below (T+1)/2^64 > F moves it to c + 1 (F irrational)."""

    t, shift = 5000, 0
    (chunk,) = discrete_laplace.dl_tables(t, shift)
    jtab = discrete_laplace.dl_icdf(t, shift)
    c = 2
    tie = int(chunk[c])
    for ext, expect in ((0, c), ((1 << 64) - 1, c + 1)):

        def word(j, ext=ext):
            if j == 0:
                return int(jtab[0]) + 1  # sign +, J = 1: Z ≠ 0 and H = 0
            if j == 1:
                return tie
            return ext  # extension words of word 1

        assert discrete_laplace.exact_record(word, t, shift) == 1 + expect


@pytest.mark.slow
def test_laplace_release_host_completion_is_the_same_release(monkeypatch):
    """Words past J's table go to the host (forced for P(J > K) ≥ 2^-3 here): the release is unchanged, the
    noise being a function of each record's words whichever route finished it."""

    mech = dpjax.DiscreteLaplace(3.0)
    x = jnp.arange(-1000, 1000, dtype=jnp.int32)
    key = jax.random.key(4)
    plain = np.asarray(dpjax.release(key, x, mech, numerics="exact"))
    caches = (discrete_laplace.dl_icdf, discrete_laplace.dl_guide)
    for f in caches:
        f.cache_clear()
    jax.clear_caches()  # the tables are constants of the compiled release
    monkeypatch.setattr(discrete_laplace, "_DL_TAIL", 3)
    try:
        lat = mech.exact_lattice()
        with jax.enable_x64(True):
            code = np.asarray(
                discrete_laplace.laplace_code(ThreefryWords(key, (x.size,)), x.size, int(lat.param), int(lat.shift))
            )
        assert (code & 1).sum() > 100  # the host path really runs
        forced = np.asarray(dpjax.release(key, x, mech, numerics="exact"))
    finally:
        for f in caches:
            f.cache_clear()
        jax.clear_caches()
    np.testing.assert_array_equal(plain, forced)


# -- per-record scales, any number of distinct values: the discrete Laplace's inverse CDF per record ------------


def _per_record_host(key, t, shift):
    from dpjax.exact.bits import key_pair

    with jax.enable_x64(True):
        k0, k1 = (int(w) for w in np.asarray(key_pair(key)))
    return [
        discrete_laplace.exact_per_record(
            lambda j, i=i: table_samplers.threefry_word(k0, k1, j, i), int(t[i]), int(shift[i])
        )
        for i in range(len(t))
    ]


def test_per_record_laplace_device_equals_exact_host_path():
    """Scales from 1/8 to 2^30 mixed record by record: the device's code is the host's exact function of each
    record's word stream (min{k : V < F(k)}, decided with further words against interval bounds of F)."""

    base = [(1, 3), (7, 3), (3, 0), (5000, 0), (1 << 20, 0), ((1 << 21) - 5, 0), (1 << 30, 0), (123456789, 10)]
    n = 400
    t = np.asarray([base[i % len(base)][0] for i in range(n)], np.uint64)
    shift = np.asarray([base[i % len(base)][1] for i in range(n)], np.uint64)
    with jax.enable_x64(True):
        words = ThreefryWords(jax.random.key(3), (n,))
        z, flag = (
            np.asarray(a)
            for a in jax.jit(
                lambda: discrete_laplace.laplace_noise_per_record(words, jnp.asarray(t), jnp.asarray(shift))
            )()
        )
    assert not flag.any()
    np.testing.assert_array_equal(z, _per_record_host(jax.random.key(3), t, shift))


def _per_record_discrete_laplace_fit(monkeypatch, n, scales, seed):
    """χ² p-value of a release of per-record discrete Laplace scales (``scales`` repeated over n records, zero
    answers) against the mixture of their pmfs at the scales that ran; asserts that it took the float32 decision."""
    from dpjax.exact import lattice

    calls = []
    real = lattice._per_record_lattice
    monkeypatch.setattr(
        lattice,
        "_per_record_lattice",
        lambda *a, **k: calls.append(getattr(k["sampler"], "narrow", False)) or real(*a, **k),
    )
    b = jnp.asarray(np.resize(scales, n))
    lat = dpjax.DiscreteLaplace(b).exact_lattice()
    assert lattice._scale_groups((n,), lat.param, lat.shift, lat.granularity) is None
    out = np.asarray(
        dpjax.release(jax.random.key(seed), jnp.zeros(n, jnp.int32), dpjax.DiscreteLaplace(b), numerics="exact")
    )
    assert calls[0] is True
    z = np.arange(-int(40 * max(scales)), int(40 * max(scales)) + 1)
    run = np.ldexp(np.asarray(lat.param, np.float64), -np.asarray(lat.shift, np.int64))[: len(scales)]  # as run
    pmf = sum(np.tanh(0.5 / s) * np.exp(-np.abs(z) / s) for s in run) / len(run)
    return chi2_pvalue(out, z, pmf)


def test_per_record_discrete_laplace_with_many_distinct_scales_fits_its_law(monkeypatch):
    """40 distinct scales (past the per-scale tables' 16) through dpjax.release: the pooled output fits the
    mixture of the 40 discrete Laplace pmfs (χ²), and the release takes the per-record program (its float32
    decision)."""
    assert _per_record_discrete_laplace_fit(monkeypatch, 200_000, np.linspace(0.5, 6.0, 40), 11) > 1e-4


@pytest.mark.slow
def test_per_record_discrete_laplace_float32_range_fits_its_law_1e6(monkeypatch):
    """The float32 decision's whole range of scales, 2^-5 … 2^5 (40 of them, geometric), over 2·10^6 records."""
    assert _per_record_discrete_laplace_fit(monkeypatch, 2_000_000, np.geomspace(2.0**-5, 2.0**5, 40), 12) > 1e-4


@pytest.mark.slow
def test_per_record_host_completion_is_the_same_release(monkeypatch):
    """With an error bound 2^38 times the assumed one most records are flagged and completed on the host: the
    release equals the host's exact function of every record's words (device and host agree; the host path ran)."""

    n = 300
    b = jnp.asarray(np.linspace(0.7, 900.0, n))
    lat = dpjax.DiscreteLaplace(b).exact_lattice()
    monkeypatch.setattr(table_samplers, "TRANSCENDENTAL_ERROR", 2.0**-8)
    jax.clear_caches()
    try:
        with jax.enable_x64(True):
            words = ThreefryWords(jax.random.key(5), (n,))
            _, flag = discrete_laplace.laplace_noise_per_record(
                words, jnp.asarray(np.asarray(lat.param)), jnp.asarray(np.asarray(lat.shift))
            )
        out = np.asarray(
            dpjax.release(jax.random.key(5), jnp.zeros(n, jnp.int32), dpjax.DiscreteLaplace(b), numerics="exact")
        )
    finally:
        jax.clear_caches()
    assert np.asarray(flag).mean() > 0.3
    np.testing.assert_array_equal(
        out, _per_record_host(jax.random.key(5), np.asarray(lat.param), np.asarray(lat.shift))
    )


def test_laplace_lattice_parameters_built_on_the_device_are_the_hosts():
    """The per-record Laplace release builds t = ⌈b/g⌉ and g = 2^(⌊log2 b⌋ − 20) from the scales' bits in its
    device program: the same integers and powers of two as laplace_lattice's numpy, on random scales over the
    whole exponent range it takes and on the edges (powers of two and their neighbours, significands needing
    no rounding or all of it, the smallest scale it takes, the largest float)."""
    from dpjax.exact import lattice
    from dpjax.kernels.discrete_laplace import DiscreteLaplace

    rng = np.random.default_rng(7)
    exps = np.arange(-1002, 1024)
    edges = np.concatenate(
        [
            np.ldexp(1.0, exps),
            np.nextafter(np.ldexp(1.0, exps[1:]), 0.0),
            np.nextafter(np.ldexp(1.0, exps), np.inf),
            np.ldexp(1.0 + 2.0**-21, exps[:-1]),
            np.ldexp(1.0 + 2.0**-20, exps[:-1]),
            [np.finfo(np.float64).max, 1.0, 1.5, 3.0, 0.1],
        ]
    )
    b = np.concatenate([edges, np.ldexp(rng.uniform(1.0, 2.0, 20000), rng.integers(-1002, 1023, 20000))])
    assert b.min() >= discrete_laplace.DEVICE_LAPLACE_MIN
    integer = (b >= 2.0**-40) & (b < 2.0**31)  # the discrete Laplace's range
    for bs, host, flag in (
        (b, lattice.laplace_lattice(b, DiscreteLaplace), False),
        (b[integer], lattice.discrete_laplace_lattice(b[integer], DiscreteLaplace), True),
    ):
        with jax.enable_x64(True):
            t, shift, g = jax.jit(lambda x: discrete_laplace.laplace_lattice_bits(x, flag))(jnp.asarray(bs))
        np.testing.assert_array_equal(np.asarray(t), np.asarray(host.param))
        np.testing.assert_array_equal(np.asarray(shift), np.broadcast_to(host.shift, bs.shape))
        np.testing.assert_array_equal(np.asarray(g), np.broadcast_to(host.granularity, bs.shape))


def _words_at_edges(taus, rng):
    """Word 0 of records placed around the float32 decision's edges for scales ``taus``: W/2^31 beside c q^k (where
    the floor of x = τ log(c/S) changes) at offsets from 0 to 2^20 of W, either side, and W = 1, 2, 3, 2^31; random
    low halves and signs. Returns (words uint64, the index of each word's scale)."""
    offsets = np.concatenate([[0, 1, 2, 3], 2 ** np.arange(4, 21)])
    offsets = np.concatenate([-offsets[::-1], offsets])
    ws, which = [], []
    for i, tau in enumerate(taus):
        q = math.exp(-1.0 / tau)
        c = 2 * q / (1 + q)
        k = np.arange(0, int(40 * tau) + 2)
        edge = np.round(c * q**k * 2.0**31)
        big = np.unique(
            np.concatenate([np.clip((edge[:, None] + offsets[None, :]).ravel(), 1, 2**31), [1, 2, 3, 2**31]])
        )
        big = big.astype(np.uint64)
        ws.append(big)
        which.append(np.full(big.size, i))
    big, which = np.concatenate(ws), np.concatenate(which)
    hi = (np.uint64(1 << 31) - big) | (rng.integers(0, 2, big.size).astype(np.uint64) << np.uint64(31))
    return (hi << np.uint64(32)) | rng.integers(0, 2**32, big.size, dtype=np.uint64), which


def test_float32_per_record_decision_equals_the_float64_and_host_decisions():
    """The discrete Laplace's float32 decision (per-record scales in [2^-5, 2^5], as the lattice builds them) decides
    |Z| exactly as the float64 program and the host's exact function do, on random words and on words placed at
    the edges of its decisions (beside every c q^k where the floor of x changes, W = 1, 2, 3, 2^31); it leaves open
    the words within its error bound of an edge (many of the placed ones) and fewer than 2·10^-3 of random ones."""
    from dpjax.exact import lattice
    from dpjax.kernels.discrete_laplace import DiscreteLaplace

    rng = np.random.default_rng(5)
    b = np.concatenate([[2.0**-5, 2.0**5, 0.5, 1.0, 3.0, 31.9], 2.0 ** rng.uniform(-5, 5, 10)])
    lat = lattice.discrete_laplace_lattice(b, DiscreteLaplace)
    taus = np.ldexp(np.asarray(lat.param, np.float64), -np.asarray(lat.shift, np.int64))
    assert taus.min() >= 2.0**table_samplers.NARROW_MIN_LOG2 and taus.max() <= 2.0**table_samplers.NARROW_MAX_LOG2
    edge, at = _words_at_edges(taus, rng)
    n_rand = 200_000
    rand = rng.integers(0, 2**64, n_rand, dtype=np.uint64)
    words = np.concatenate([edge, rand])
    which = np.concatenate([at, rng.integers(0, b.size, n_rand)])
    t, shift = np.asarray(lat.param)[which], np.asarray(lat.shift)[which]
    with jax.enable_x64(True):
        src = lattice._WordTable(jnp.asarray(words[None, :]))
        z32, open32 = (
            np.asarray(a)
            for a in jax.jit(
                lambda: discrete_laplace.laplace_noise_per_record32(src, jnp.asarray(t), jnp.asarray(shift))
            )()
        )
        z64, open64 = (
            np.asarray(a)
            for a in jax.jit(
                lambda: discrete_laplace.laplace_noise_per_record(src, jnp.asarray(t), jnp.asarray(shift))
            )()
        )
    both = ~open32 & ~open64
    assert both[: edge.size].sum() > 5000 and open32[: edge.size].sum() > 5000  # decided and open ones at the edges
    np.testing.assert_array_equal(z32[both], z64[both])
    assert not (~open32 & open64).any()  # what float32 decides, float64 decides (only W = 1 aside, open in both)
    assert open32[edge.size :].mean() < 2e-3  # 7·10^-4 here (scales up to 2^5)
    # the host's exact function on a sample of the float32-decided words at the edges and on every W ≤ 3
    near = np.flatnonzero(~open32[: edge.size])
    small = np.flatnonzero((words[: edge.size] >> np.uint64(32) & np.uint64(0x7FFFFFFF)) >= np.uint64(2**31 - 3))
    near = np.concatenate([near[:: max(1, near.size // 150)], small])
    ext = lambda i: lambda j: int(words[i]) if j == 0 else table_samplers.threefry_word(1, 2, j, int(i))
    host = [discrete_laplace.exact_per_record(ext(i), int(t[i]), int(shift[i])) for i in near]
    np.testing.assert_array_equal(np.where(open32[near], host, z32[near]), host)


@pytest.mark.slow
def test_per_record_discrete_laplace_takes_the_float32_decision_then_float64_then_host(monkeypatch):
    """A discrete Laplace with per-record scales in the float32 range releases through the float32 decision; its open
    records go through the float64 program on the device (their own records' words) and only that program's open ones
    to the host: with error bounds 2^8 (float32) and 2^38 (float64) times the assumed ones, all three stages run and
    the release is the host's exact function of every record's words. With the assumed bounds: bitwise the release of
    its host-built lattice (the float64 program on every record), Threefry and os.urandom words, int32 and float32
    answers."""
    from dpjax.exact import lattice

    calls = []
    real = lattice._per_record_lattice
    monkeypatch.setattr(
        lattice,
        "_per_record_lattice",
        lambda *a, **k: calls.append((getattr(k["sampler"], "narrow", False), a[2].shape[0])) or real(*a, **k),
    )
    n = 400
    b = jnp.asarray(np.linspace(0.04, 30.0, n))
    with jax.enable_x64(True):
        mech = dpjax.DiscreteLaplace(b)
        lat = mech.exact_lattice()
    monkeypatch.setattr(table_samplers, "TRANSCENDENTAL_ERROR32", 2.0**-10)
    monkeypatch.setattr(table_samplers, "TRANSCENDENTAL_ERROR", 2.0**-8)
    jax.clear_caches()
    host_runs = []
    real_host = discrete_laplace.exact_per_record
    monkeypatch.setattr(discrete_laplace, "exact_per_record", lambda *a: host_runs.append(1) or real_host(*a))
    try:
        out = np.asarray(dpjax.release(jax.random.key(5), jnp.zeros(n, jnp.int32), mech, numerics="exact"))
    finally:
        monkeypatch.undo()
        jax.clear_caches()
    assert calls[0] == (True, n) and calls[1][0] is False and 16 <= calls[1][1] < n  # float32, then a padded subset
    assert 0 < len(host_runs) < calls[1][1]
    np.testing.assert_array_equal(
        out, _per_record_host(jax.random.key(5), np.asarray(lat.param), np.asarray(lat.shift))
    )

    n = 20_000
    with jax.enable_x64(True):
        mech = dpjax.DiscreteLaplace(jnp.asarray(np.linspace(0.5, 5.0, n)))
    for x in (jnp.asarray(np.arange(n) % 97 - 40, jnp.int32), jnp.linspace(-50, 50, n, dtype=jnp.float32)):
        np.testing.assert_array_equal(
            np.asarray(dpjax.release(jax.random.key(9), x, mech, numerics="exact", start=5)),
            np.asarray(dpjax.release(jax.random.key(9), x, mech.exact_lattice(), numerics="exact", start=5)),
        )
    source = lambda: HostBits(np.random.default_rng(4).bytes)
    x = jnp.asarray(np.arange(n) % 97 - 40, jnp.int32)
    np.testing.assert_array_equal(
        np.asarray(dpjax.release(source(), x, mech, numerics="exact")),
        np.asarray(dpjax.release(source(), x, mech.exact_lattice(), numerics="exact")),
    )
