"""dpjax.table's first call: the calibration's search compiles a few accountant programs, not one per
grid-length bucket and batch size of a wide grid of ratios."""

import jax.monitoring
import pytest

from dpjax import table
from dpjax.kernels import by_name
from dpjax.table import calibration

_COMPILE = "/jax/core/compile/backend_compile_duration"


def _compiles(fn):
    """(fn(), number of XLA compilations it ran), from empty caches (so programs another test
    compiled are counted too, and a count of 0 means the event is no longer heard)."""
    jax.clear_caches()
    count = [0]

    def listener(event, secs, **kwargs):
        if event == _COMPILE:
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        out = fn()
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    return out, count[0]


@pytest.mark.slow
def test_calibration_compiles_few_programs():
    """Laplace, count + sum, K = 3, a budget no other test uses (the cache cannot answer): the old
    search (wide grids of 12 ratios, bucketed by the accountant) compiled 66 programs here; the
    secant search, one ratio per query, about 20."""
    laplace = by_name("laplace")
    runs = [calibration.Run(1.0, 2.0, 3), calibration.Run(1.0, 40000.0, 3), calibration.Run(1.0, 1.0, 3)]
    epsilon, delta = 0.987654, 3.21e-7
    cal, compiles = _compiles(lambda: calibration.calibrate(lambda t: laplace(scale=t), runs, epsilon, delta, False))
    assert 0 < compiles <= 30  # 0 would mean the compile event is no longer heard
    assert epsilon * (1 - calibration.TOLERANCE) <= cal.epsilon <= epsilon


@pytest.mark.parametrize(
    "noise, k, epsilon, delta",
    [
        pytest.param("laplace", 30, 0.5, 1e-5, marks=pytest.mark.slow),
        ("gaussian", 1, 5.0, 1e-9),
        pytest.param("laplace", 1, 1.0, 0.0, marks=pytest.mark.slow),
    ],
)
def test_secant_search_meets_the_tolerance(noise, k, epsilon, delta):
    """Far from the start (many runs; a tiny δ; pure ε) the search still lands within the tolerance."""
    from dpjax.table.release import validate

    make = by_name(noise)
    stats = [table.count(), table.sum("steps", 0, 50)]
    runs = validate("g", stats, "u", k, 2, epsilon, delta, None if delta > 0 else [0], noise).plan(delta > 0)[2]
    assert len({r.weight for r in runs}) > 1  # the split gives the measurements different ratios
    cal = calibration.calibrate(lambda t: make(**{make.scale_name: t}), runs, epsilon, delta, False)
    assert epsilon * (1 - calibration.TOLERANCE) <= cal.epsilon <= epsilon


def test_selection_threshold_compiles_once_per_shape():
    """The threshold search evaluates the kernel's tail through one jitted program per shape: op by op
    it compiled 55 programs for the Gaussian (each operation, at each shape)."""
    from dpjax.table.selection import selection_delta, threshold

    gaussian = by_name("gaussian")(sigma=7.25)
    d, compiles = _compiles(lambda: selection_delta(gaussian, threshold(gaussian, 3, 5e-7), 3))
    assert 0 < compiles <= 8  # 0 would mean the compile event is no longer heard
    assert 0.999 * 5e-7 <= d <= 5e-7


@pytest.mark.parametrize("coarse", [False, True])
def test_bounding_rounds_keep_the_rows_of_the_sorts(monkeypatch, coarse):
    """The bounding's per-unit minimum rounds (K <= 8), its packed value sort (unit, the priority's
    top bits, row index) and the sort on all 32 bits of the priority keep the same rows (the same
    multiset of (unit, group, value, first): rows equal in all of these are interchangeable) — also
    when only 2 top bits are packed, so that a unit's pairs tie on them all the time and the search
    falls back to the full sort, and (``coarse``) when the priorities take 4 values only, so that a
    unit's pairs tie on the whole priority and the group hashes order them."""
    import jax
    import numpy as np
    import pyarrow as pa

    from dpjax.table import bounding
    from dpjax.table.data import group_index, unit_hashes
    from dpjax.table.keys import KeyWords

    rng = np.random.default_rng(3)
    n = 5000
    d = pa.table({"u": rng.integers(0, 300, n), "g": rng.integers(0, 40, n), "x": rng.integers(0, 5, n) * 1.0})
    prep = group_index(d, ["g"])
    code, words = unit_hashes(d, "u")
    values = d.column("x").to_numpy()[:, None]
    if coarse:
        priority = bounding._pair_priority
        monkeypatch.setattr(bounding, "_pair_priority", lambda *a: (priority(*a)[0] & 3, priority(*a)[1]))

    def kept(bits, minimum, rounds=bounding._MAX_ROUNDS):
        monkeypatch.setattr(bounding, "_priority_bits", lambda units, n: bits)
        monkeypatch.setattr(bounding, "_MIN_PACKED_BITS", minimum)
        monkeypatch.setattr(bounding, "_MAX_ROUNDS", rounds)
        rows, first = bounding.bound(
            KeyWords(jax.random.key(5)).bounding(), code, words, prep.group, prep.group_words, values, 3, 2
        )
        out = np.stack([code[rows], prep.group[rows], values[rows, 0], first], axis=1)
        return out[np.lexsort(out.T[::-1])]

    by_rounds = kept(32, 33)
    assert len(by_rounds) < n  # the bounds did drop rows
    for bits, minimum in ((32, 33), (2, 1), (20, 1)):  # never packed: the argsort on all 32 bits; packed
        assert np.array_equal(kept(bits, minimum, rounds=0), by_rounds)


def test_selection_threshold_is_remembered(monkeypatch):
    """A release's selection threshold is a pure function of (kernel, K, δ share), and its δ of
    (kernel, τ, K): each computed once per configuration (the second call evaluates no tail), the
    same answer from concurrent threads, and a kernel of another scale searched anew."""
    from concurrent.futures import ThreadPoolExecutor

    from dpjax.table import selection

    laplace = by_name("laplace")
    args = (3, 2.5e-7)
    with ThreadPoolExecutor(4) as pool:
        taus = list(pool.map(lambda _: selection.threshold(laplace(scale=4.321), *args), range(8)))
    assert len(set(taus)) == 1

    def no_search(*a):
        raise AssertionError("the threshold was searched again")

    d = selection.selection_delta(laplace(scale=4.321), taus[0], 3)
    monkeypatch.setattr(selection, "_log_tail", no_search)
    assert selection.threshold(laplace(scale=4.321), *args) == taus[0]
    assert selection.selection_delta(laplace(scale=4.321), taus[0], 3) == d <= 2.5e-7
    with pytest.raises(AssertionError, match="searched again"):
        selection.threshold(laplace(scale=4.322), *args)
