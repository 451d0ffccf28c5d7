"""The exact randomized response (dpjax.exact.laws.randomized_response): releases by integer keep thresholds (the
law and the ε it reports, against 100-digit mpmath), the host completion of rejected Lemire words, per-record ε
whose keep thresholds the device program looks up in a perfect-hash table of the distinct ε (``RRTable``,
``rr_lookup``) bitwise as the host lattice (``mech.exact_lattice()``, whose thresholds the accountant reads), whatever
the sample of ε saw."""

import math

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import dpjax
from dpjax.exact import HostBits, lattice, table_samplers
from dpjax.exact.laws import randomized_response
from dpjax.exact.lattice import release_exact
from dpjax.exact.laws.randomized_response import rr_keep as _rr_keep


@pytest.fixture
def tables(monkeypatch):
    """The tables the releases build (a list of _RRTable)."""
    built = []
    init = randomized_response.RRTable.__init__

    def spy(self, bits, k):
        init(self, bits, k)
        built.append(self)

    monkeypatch.setattr(randomized_response.RRTable, "__init__", spy)
    return built


def _host_lattice(key, x, rr, start=0):
    """The release of the host lattice (``release_exact`` of ``rr.exact_lattice()``: per-record thresholds built on
    the host, the path before the table)."""
    return np.asarray(release_exact(key, x, rr.exact_lattice(), start=start))


@pytest.mark.parametrize(
    "distinct,k,dtype,start",
    [
        (2, 2, np.float32, 0),
        (40, 2, np.float16, 1),
        pytest.param(17, 7, np.float64, 3, marks=pytest.mark.slow),
        pytest.param(40, 4, np.float32, 11, marks=pytest.mark.slow),
        pytest.param(300, 7, np.float64, 0, marks=pytest.mark.slow),
    ],
)
def test_table_release_is_bitwise_the_host_lattice(tables, distinct, k, dtype, start):
    n = 20_000
    eps = np.resize(np.linspace(0.1, 4.0, distinct), n).astype(dtype)
    rr = dpjax.RandomizedResponse(jnp.asarray(eps), k)
    x = jnp.asarray(np.arange(n) * 7 % k, jnp.int32)
    key = jax.random.key(distinct)
    got = np.asarray(dpjax.release(key, x, rr, numerics="exact", start=start))
    assert len(tables) == 1 and tables[0].bits.size == distinct  # the table path ran, once
    np.testing.assert_array_equal(got, _host_lattice(key, x, rr, start))
    assert 0.2 < np.mean(got == np.asarray(x)) < 1.0  # (not a constant output)


def test_table_release_broadcasts_epsilon_and_takes_host_bits(tables):
    """ε of shape (m, 1) for values (m, 3); and ``HostBits`` words (a seeded source, so that both releases read
    the same words)."""
    m = 4000
    eps = np.linspace(0.5, 3.0, 25)[np.arange(m) % 25].reshape(m, 1)
    rr = dpjax.RandomizedResponse(eps, 5)
    x = jnp.asarray(np.arange(3 * m).reshape(m, 3) % 5, jnp.int32)
    key = jax.random.key(4)
    got = np.asarray(dpjax.release(key, x, rr, numerics="exact"))
    assert got.shape == (m, 3) and len(tables) == 1
    np.testing.assert_array_equal(got, _host_lattice(key, x, rr))
    rr = dpjax.RandomizedResponse(np.resize(np.linspace(0.5, 3.0, 25), 3 * m), 5)  # (25 > the 16 of the groups)
    got = np.asarray(dpjax.release(HostBits(np.random.default_rng(0).bytes), x.reshape(-1), rr, numerics="exact"))
    want = np.asarray(release_exact(HostBits(np.random.default_rng(0).bytes), x.reshape(-1), rr.exact_lattice()))
    np.testing.assert_array_equal(got, want)


def test_value_missed_by_the_sample_on_few_records_is_completed_on_the_host(tables):
    """A rare ε on 3 records off the sample: the table misses it, the device flags those records, the host
    completes them with the value's own threshold; one table."""
    n = 40_000
    eps = np.resize(np.linspace(0.5, 3.0, 40), n)
    eps[np.setdiff1d(np.arange(n), randomized_response.sample_positions(n))[[0, 1, 500]]] = 7.25
    rr = dpjax.RandomizedResponse(eps, 4)
    x = jnp.asarray(np.arange(n) % 4, jnp.int32)
    key = jax.random.key(7)
    got = np.asarray(dpjax.release(key, x, rr, numerics="exact"))
    assert len(tables) == 1 and 7.25 not in tables[0].bits.view(np.float64)
    np.testing.assert_array_equal(got, _host_lattice(key, x, rr))


@pytest.mark.slow
def test_value_missed_by_the_sample_on_many_records_joins_the_table(tables):
    """ε = 0.5 on the sampled records, 2.0 on every other: the table of the sample misses 90 % of the records;
    the missed value joins the table and the release runs again (the same words)."""
    n = 40_000
    eps = np.full(n, 2.0)
    eps[randomized_response.sample_positions(n)] = 0.5
    rr = dpjax.RandomizedResponse(jnp.asarray(eps, jnp.float32), 3)
    x = jnp.asarray(np.arange(n) % 3, jnp.int32)
    key = jax.random.key(8)
    got = np.asarray(dpjax.release(key, x, rr, numerics="exact", start=2))
    assert [t.bits.size for t in tables] == [1, 2]
    np.testing.assert_array_equal(got, _host_lattice(key, x, rr, start=2))


def test_beyond_the_table_limit_the_host_lattice_runs(tables, monkeypatch):
    monkeypatch.setattr(lattice, "RR_TABLE_MAX", 8)
    n = 40_000
    x = jnp.asarray(np.arange(n) % 4, jnp.int32)
    key = jax.random.key(9)
    many = dpjax.RandomizedResponse(np.resize(np.linspace(0.5, 3.0, 40), n), 4)  # the sample sees 40 > 8
    np.testing.assert_array_equal(
        np.asarray(dpjax.release(key, x, many, numerics="exact")), _host_lattice(key, x, many)
    )
    assert not tables
    # the sample sees 1 value, the records hold 1 + 20: past the limit once the missed values are known
    eps = np.resize(np.linspace(1.0, 3.0, 20), n)
    eps[randomized_response.sample_positions(n)] = 0.5
    hidden = dpjax.RandomizedResponse(eps, 4)
    np.testing.assert_array_equal(
        np.asarray(dpjax.release(key, x, hidden, numerics="exact")), _host_lattice(key, x, hidden)
    )
    assert [t.bits.size for t in tables] == [1]


def test_integer_epsilon_runs_the_host_lattice(tables):
    """Integer ε (no float bits to look up) keep the host lattice."""
    x = jnp.asarray(np.arange(3000) % 3, jnp.int32)
    rr = dpjax.RandomizedResponse(np.resize(np.arange(1, 21), 3000), 3)
    got = np.asarray(dpjax.release(jax.random.key(5), x, rr, numerics="exact"))
    np.testing.assert_array_equal(got, _host_lattice(jax.random.key(5), x, rr))
    assert not tables


@pytest.mark.slow
def test_a_wrong_table_key_is_caught_by_the_check(monkeypatch):
    """A table whose slot of ε = 2.0 names another ε: the device's equality check flags the records of 2.0, and
    the host completes them with their own threshold: the output is still bitwise the host lattice's. A wrong
    *threshold* is not caught by the check, and the comparison sees it (this test's comparison can fail)."""
    init = randomized_response.RRTable.__init__
    wrong, built = {}, []

    def corrupt(self, bits, k):
        init(self, bits, k)
        built.append(self)
        two = np.flatnonzero(self.table[0] == np.float64(2.0).view(np.uint64))[0]
        if wrong["what"] == "key":
            self.table[0, two] = np.float64(2.5).view(np.uint64)
        else:
            self.table[1, two] = self.table[1, two] // np.uint64(2)

    monkeypatch.setattr(randomized_response.RRTable, "__init__", corrupt)
    n = 6000
    rr = dpjax.RandomizedResponse(np.resize(np.linspace(0.5, 3.0, 6), n), 4)  # 0.5, 1.0, ..., 3.0
    x = jnp.asarray(np.arange(n) % 4, jnp.int32)
    key = jax.random.key(10)
    want = _host_lattice(key, x, rr)
    wrong["what"] = "key"
    np.testing.assert_array_equal(np.asarray(dpjax.release(key, x, rr, numerics="exact")), want)
    assert len(built) == 1
    wrong["what"] = "threshold"
    assert np.any(np.asarray(dpjax.release(key, x, rr, numerics="exact")) != want)


def _host_records(key, values, keep, k1):
    """The host's exact record function of every record's words: randomized response of ``values`` with the
    per-record keep thresholds ``keep`` over k1 + 1 categories."""
    from dpjax.exact.bits import key_pair

    keep = np.asarray(keep)
    with jax.enable_x64(True):
        k0, kk = (int(w) for w in np.asarray(key_pair(key)))
    return [
        randomized_response.exact_rr_record(
            lambda j, i=i: table_samplers.threefry_word(k0, kk, j, i), int(values[i]), int(keep[i]), k1
        )
        for i in range(len(keep))
    ]


def test_lemire_rejections_take_their_thresholds_from_the_table(monkeypatch):
    """Rejected Lemire words (forced for about half the flipped records) are completed on the host with the
    thresholds of the records' own ε: bitwise the host lattice, and the host's record function."""
    n = 400
    eps = np.resize(np.linspace(0.1, 2.0, 30), n)
    rr = dpjax.RandomizedResponse(eps, 5)
    x = jnp.asarray(np.arange(n) % 5, jnp.int32)
    key = jax.random.key(11)
    monkeypatch.setattr(randomized_response, "rr_threshold", lambda k1: 1 << 63)
    jax.clear_caches()
    try:
        got = np.asarray(dpjax.release(key, x, rr, numerics="exact"))
        want = _host_lattice(key, x, rr)
    finally:
        jax.clear_caches()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, _host_records(key, x, rr.exact_lattice().param, 4))


def test_table_release_law_per_tier():
    """Two privacy tiers (ε 0.5 and 2.5, k = 4): each tier's confusion frequencies are its keep probability
    T/2^64 and (1 − T/2^64)/3, within 5σ."""
    n = 200_000
    tier = np.arange(n) % 5 == 0
    rr = dpjax.RandomizedResponse(jnp.asarray(np.where(tier, 0.5, 2.5), jnp.float32), 4)
    x = np.arange(n) * 3 % 4
    out = np.asarray(dpjax.release(jax.random.key(12), jnp.asarray(x, jnp.int32), rr, numerics="exact"))
    keep = np.asarray(rr.exact_lattice().param).astype(np.float64) / 2.0**64
    for sel in (tier, ~tier):
        p = keep[sel][0]
        for a in range(4):
            rows = sel & (x == a)
            freq = np.bincount(out[rows], minlength=4) / rows.sum()
            expect = np.where(np.arange(4) == a, p, (1 - p) / 3)
            assert np.all(np.abs(freq - expect) < 5 * np.sqrt(expect * (1 - expect) / rows.sum())), (p, a, freq)


def test_epsilon_sample_sees_every_tier_of_a_repeating_layout_and_spreads():
    """The sample of ε: every residue modulo a period L ≤ 4096 dividing the size (tiers assigned record by
    record), and no gap above 4 × size/4096 (tiers in blocks). (A stride of size // 4096 saw one of two
    alternating tiers at 20 000 records; the golden-ratio sequence alone, 543 of 1000 at 10^7.)"""
    for size in (20_000, 10**6, 10**7, 12_345_600, 2**24, 429_496_731, 2**32 - 100):
        p = randomized_response.sample_positions(size)
        assert p.size == 4096 and p.min() >= 0 and p.max() < size
        gaps = np.diff(np.r_[np.sort(p), p.min() + size])
        assert gaps.max() <= 4 * size / 4096, size
        for period in (2, 3, 7, 40, 300, 1000, 4096):
            if size % period == 0:
                assert np.unique(p % period).size == period, (size, period)
    np.testing.assert_array_equal(randomized_response.sample_positions(100), np.arange(100))


@pytest.mark.parametrize("n", [100_000, pytest.param(1_000_000, marks=pytest.mark.slow)])
def test_randomized_response_by_integer_thresholds(n):
    rr = dpjax.RandomizedResponse(1.0, 3)
    lat = rr.exact_lattice()
    values = jnp.asarray(np.arange(n) % 3, jnp.int32)
    out = np.asarray(dpjax.release(jax.random.key(5), values, rr, numerics="exact"))
    keep = float(lat.param) / 2.0**64
    conf = np.array([[np.mean(out[np.asarray(values) == a] == b) for b in range(3)] for a in range(3)])
    expect = np.where(np.eye(3, dtype=bool), keep, (1 - keep) / 2)
    assert np.all(np.abs(conf - expect) < 5 * np.sqrt(expect * (1 - expect) / (n / 3)))
    # the accounting ε is the one the integer threshold achieves, never below it
    achieved = math.log(keep * 2 / (1 - keep))
    assert achieved <= float(lat.noise.epsilon) <= 1.0 + 1e-12


def test_randomized_response_host_completion_is_the_record_function(monkeypatch):
    """A rejected Lemire word (forced for about half the records here) is completed on the host with the
    record's next words: the release equals the host's exact function of every record's words."""
    from dpjax.exact.bits import key_pair

    rr = dpjax.RandomizedResponse(0.5, 5)
    n = 300
    values = jnp.asarray(np.arange(n) % 5, jnp.int32)
    monkeypatch.setattr(randomized_response, "rr_threshold", lambda k1: 1 << 63)
    jax.clear_caches()
    try:
        out = np.asarray(dpjax.release(jax.random.key(3), values, rr, numerics="exact"))
    finally:
        jax.clear_caches()
    keep = int(rr.exact_lattice().param)
    with jax.enable_x64(True):
        k0, k1 = (int(w) for w in np.asarray(key_pair(jax.random.key(3))))
    host = [
        randomized_response.exact_rr_record(
            lambda j, i=i: table_samplers.threefry_word(k0, k1, j, i), int(values[i]), keep, 4
        )
        for i in range(n)
    ]
    np.testing.assert_array_equal(out, host)
    assert (
        sum(
            table_samplers.threefry_word(k0, k1, 0, i) >= keep
            and table_samplers.threefry_word(k0, k1, 1, i) % (1 << 64) * 4 % (1 << 64) < (1 << 63)
            for i in range(n)
        )
        > 20
    )  # the host path really ran


def test_per_record_randomized_response_with_many_distinct_epsilons():
    """Per-record ε (300 distinct values): each record's keep threshold is its own, the release is the host's
    exact record function."""
    n = 300
    values = jnp.asarray(np.arange(n) % 4, jnp.int32)
    rr = dpjax.RandomizedResponse(jnp.asarray(np.linspace(0.1, 3.0, n)), 4)
    out = np.asarray(dpjax.release(jax.random.key(2), values, rr, numerics="exact"))
    np.testing.assert_array_equal(out, _host_records(jax.random.key(2), values, rr.exact_lattice().param, 3))


def test_reported_epsilon_is_at_least_the_thresholds_true_epsilon():
    """For ε from 1e-300 to 700 and several category counts: the ε reported (the accountant's) is at least the ε of
    the law that runs, ln(T (k − 1)/(2^64 − T)) at 100 digits, and within 2 float64 ulp of it; keeping is at least
    as likely as each other category (the accountant's law), and T ≤ 2^64 e^ε/(e^ε + k − 1) wherever that allows."""
    eps = np.concatenate([np.logspace(-300, np.log10(700), 240), [6.35e-18, 1e-17, 1e-12, 5.2e-12]])
    with mpmath.workdps(100):
        for k in (2, 3, 5, 7, 1000):
            for e in eps:
                t, achieved = _rr_keep(float(e), k)
                truth = mpmath.log(mpmath.mpf(t * (k - 1)) / (2**64 - t))
                assert truth >= 0 and achieved >= truth, (k, e, achieved, truth)
                assert achieved <= np.nextafter(np.nextafter(float(truth), np.inf), np.inf) or truth == 0, (k, e)
                ideal = (
                    mpmath.mpf(2) ** 64 * mpmath.exp(mpmath.mpf(float(e))) / (mpmath.exp(mpmath.mpf(float(e))) + k - 1)
                )
                assert t <= ideal or t == -(-(2**64) // k), (k, e)
    lat = dpjax.RandomizedResponse(np.array([1e-300, 1e-17, 1e-12, 1.0, 700.0]), num_categories=3).exact_lattice()
    t = np.asarray(lat.param).astype(object)
    with mpmath.workdps(100):
        truth = [mpmath.log(mpmath.mpf(int(x) * 2) / (2**64 - int(x))) for x in t]
    assert all(float(r) >= q for r, q in zip(np.asarray(lat.noise.epsilon), truth))
