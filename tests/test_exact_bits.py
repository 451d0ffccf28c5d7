"""The exact tier's word sources (dpjax.exact.bits): ``HostBits`` words run the same law as Threefry words,
a source returning the wrong length is refused, and ``os.urandom`` read in parallel chunks fills every byte."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

import dpjax
from dpjax.exact import HostBits


def test_host_bits_source_gives_the_same_law():
    mech = dpjax.DiscreteLaplace(2.0)
    n = 50_000
    out = np.asarray(dpjax.release(HostBits(), jnp.zeros(n, jnp.int32), mech, numerics="exact"))
    a = math.exp(-1 / 2.0)
    var = 2 * a / (1 - a) ** 2
    assert abs(out.mean()) < 5 * math.sqrt(var / n)
    assert abs(out.var() / var - 1) < 0.05


@pytest.mark.parametrize(
    "mech", [dpjax.DiscreteLaplace(3.0), dpjax.DiscreteLaplace(2.0**20), dpjax.Laplace(1.0)], ids=repr
)
def test_host_bits_source_returning_the_wrong_length_is_refused(mech):
    """A source returning fewer (or more) bytes than asked is refused, on the prefix path and the whole-word ones."""
    for wrong in (lambda k: bytes(k - 1), lambda k: bytes(k + 8), lambda k: "x" * k):
        with pytest.raises(ValueError, match="source must return exactly"):
            dpjax.release(HostBits(wrong), jnp.zeros(1 << 16, jnp.float32), mech, numerics="exact")


def test_os_urandom_read_in_parallel_chunks_fills_every_byte(monkeypatch):
    """os.urandom is read in chunks on several threads into one buffer: every byte comes from a call, the calls ask
    for all of them, and an error in any thread is raised (no part of the buffer is left unfilled)."""
    import os
    import threading

    from dpjax.exact import bits

    asked = []

    def fake(k):
        asked.append(k)
        return b"\x01" * k

    monkeypatch.setattr(bits, "READ_THREADS", 2)
    monkeypatch.setattr(os, "urandom", fake)
    n = 3 * bits._READ_CHUNK + 5
    out = HostBits(os.urandom).prefixes(n)  # (the source is os.urandom: the parallel reader)
    assert len(asked) > 2 and sum(asked) == 2 * n and np.all(out == 0x0101)

    def failing(k):  # fails in the reading threads only: their error reaches the caller
        if threading.current_thread() is not threading.main_thread():
            raise OSError("no entropy")
        return fake(k)

    monkeypatch.setattr(os, "urandom", failing)
    with pytest.raises(OSError, match="no entropy"):
        HostBits(os.urandom).words((n,))
