"""The exact tier's samplers as objects.

* :class:`IntegerSampler` — one integer sampler as it runs: the parameters it needs per record, its device
  program (words → (noise, flagged)) and its host completion (a flagged record's word stream → its noise,
  exactly). A sampler is a frozen dataclass: hashable, so a release program is compiled once per sampler (its
  static parameters) and its per-record parameters are arrays passed to the program.
* :class:`LatticeSampler` — the sampler an :class:`~dpjax.exact.ExactLattice` holds: its law, which builds the
  :class:`IntegerSampler` of each layout (one scale, or per-record parameters) and says what the lattice needs
  of it (its sensitivity on the lattice, the noise scale of a range check, whether it checks the values).

One module per law: :mod:`dpjax.exact.laws.discrete_laplace`, :mod:`dpjax.exact.laws.discrete_gaussian`,
:mod:`dpjax.exact.laws.boosted`, :mod:`dpjax.exact.laws.randomized_response`.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["IntegerSampler", "LatticeSampler", "padded", "take"]


def padded(idx):
    """The flagged records' indices padded to a power of two (at least 16) by repeating the last.

    The device steps of the host completion then compile once per size class, not once per count of flagged
    records.

    Args:
      idx: the flagged records' indices (numpy ints, at least one).

    Returns:
      The padded indices.
    """
    return np.concatenate([idx, np.repeat(idx[-1:], max(16, 1 << int(idx.size - 1).bit_length()) - idx.size)])


@jax.jit
def take(x, idx):
    """The entries ``idx`` of the flat device array ``x``, on the device.

    Args:
      x: a device array (read flat).
      idx: the flat indices.

    Returns:
      ``x.reshape(-1)[idx]``.
    """
    return x.reshape(-1)[idx]


@dataclasses.dataclass(frozen=True)
class IntegerSampler(abc.ABC):
    """One integer sampler of the exact tier: a device program over words and its exact host completion.

    Subclasses are frozen dataclasses whose fields are the sampler's static parameters (one scale: its integers;
    per record: flags of the program); the parameters it needs per record come as ``params``, a tuple of arrays
    over the records (empty for a one-scale sampler).
    """

    #: the outputs are categories (randomized response), not noise added to the answer's lattice index
    categorical: ClassVar[bool] = False
    #: the device program decides with float transcendentals (:func:`dpjax.exact.laws.discrete_laplace.
    #: transcendentals_trusted`): on a backend whose functions fail the platform check the host decides every record
    transcendental: ClassVar[bool] = False

    @abc.abstractmethod
    def noise(self, words, values, params):
        """The device program: (z, flagged) for the records of ``words`` (``words(j, records)``: word j).

        Args:
          words: the records' word source (:class:`~dpjax.exact.bits.ThreefryWords` or a table of host words).
          values: the records' answers (randomized response keeps or replaces them; the lattice laws ignore them).
          params: the per-record parameters (device arrays), empty for a one-scale sampler.

        Returns:
          (z, flagged): the integer noise (or category) and the records whose noise the host must complete.
        """

    @abc.abstractmethod
    def complete(self, word, value, params) -> int:
        """The host completion of one flagged record, every comparison decided exactly.

        The same function of the record's word stream as the device program.

        Args:
          word: ``word(j)``, the record's word j (an int in [0, 2^64)).
          value: the record's answer (an int; used by randomized response).
          params: the record's own per-record parameters (numbers), empty for a one-scale sampler.

        Returns:
          The record's noise (or category), an int.
        """

    @property
    def words_per_record(self) -> int:
        """How many words the device program reads per record.

        A :class:`~dpjax.exact.bits.HostBits` release makes that many for every record.
        """
        return 1

    @property
    def prefixable(self) -> bool:
        """Whether the noise is a count of 63-bit thresholds below one word, the top bit its sign.

        A 16-bit word prefix may then decide it (:func:`dpjax.exact.lattice._prefix_table`).
        """
        return False

    def prepare(self, params, g):
        """What the device program runs: the identity, or a lattice the program builds from the parameters.

        Args:
          params: the per-record parameters (device arrays).
          g: the granularity (a number, or an array over the records).

        Returns:
          ``(sampler, params, g, 1/g or None)``: for a sampler whose lattice is built in the program from its
          parameters, that lattice's sampler and granularity; else this sampler and its arguments unchanged.
        """
        return self, params, g, None

    def at(self, params, g, idx, n):
        """The per-record parameters and the granularity of the records ``idx`` on the host, for :meth:`complete`.

        Args:
          params: the per-record parameters the release passed (numpy arrays, or 0-d: one value for every record).
          g: the granularity (a number or an array over the records).
          idx: the records' indices (numpy ints).
          n: the number of records.

        Returns:
          ``(params of the records idx, their granularity)``.
        """
        return tuple(np.broadcast_to(a, (n,))[idx] for a in params), np.broadcast_to(g, (n,))[idx]

    def fallback(self):
        """The sampler that re-decides on the device the records this one leaves open, or None.

        For a sampler that decides in float32: its float64 program.
        """
        return None


class LatticeSampler(abc.ABC):
    """The integer law of an :class:`~dpjax.exact.ExactLattice`: the :class:`IntegerSampler` of each layout.

    Instances are hashable (a static field of the lattice)."""

    #: the outputs are categories (randomized response): no lattice, the sensitivity is the mechanism's own
    categorical: ClassVar[bool] = False
    #: the lattice checks the answers with its noise mechanism's ``validate_values`` (categories, boosted regions)
    checks_values: ClassVar[bool] = False
    #: a table release (:mod:`dpjax.table.noise`) may draw this law's noise (it does not depend on the answers)
    for_tables: ClassVar[bool] = False
    #: the largest kernel scale of an exact boosted release over this law (:mod:`dpjax.exact.laws.boosted`; the table of
    #: the boosted |N| is built on the host), or None where the law has no boosted sampler
    boost_max_scale: ClassVar[float | None] = None
    #: the law's masses are exp(−z²/(2v)) (its scale squared: the discrete Gaussian), not exp(−|z|/b)
    squared: ClassVar[bool] = False

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))

    def __repr__(self):
        return f"{type(self).__name__}()"

    def lattice_sensitivity(self, sensitivity, g):
        """The lattice sensitivity of a real sensitivity Δ.

        Args:
          sensitivity: Δ, in the answers' units.
          g: the lattice's granularity.

        Returns:
          ⌈Δ/g⌉ (exact: g is a power of two); the sensitivity itself for a categorical law.
        """
        if self.categorical:
            return sensitivity
        return jnp.ceil(jnp.asarray(sensitivity) / jnp.asarray(g))

    def noise_scale(self, param, shift):
        """The scale of the integer noise of parameters (param, shift), for the output-range check.

        Args:
          param: the integer parameters (numpy).
          shift: the scale exponents (numpy).

        Returns:
          numpy float64 scales, or ``None`` where the law needs no check.
        """
        return None

    def per_record_only(self, param, shift) -> bool:
        """Whether even one scale runs the per-record program (one word-to-noise map per law, whatever the layout).

        Args:
          param: the integer parameters (numpy).
          shift: the scale exponents (numpy).

        Returns:
          A bool.
        """
        return False

    @abc.abstractmethod
    def one_scale(self, lat, param, shift) -> IntegerSampler:
        """The sampler of one scale of the lattice ``lat``.

        Args:
          lat: the :class:`~dpjax.exact.ExactLattice`.
          param: its integer parameter (an int).
          shift: its scale exponent (an int).

        Returns:
          The :class:`IntegerSampler`.
        """

    def per_record(self, lat, param, shift, g, one_scale):
        """The sampler of per-record parameters.

        Args:
          lat: the :class:`~dpjax.exact.ExactLattice`.
          param: the integer parameters (numpy arrays of the records' shape).
          shift: the scale exponents (likewise).
          g: the granularities (likewise).
          one_scale: whether every record has the same scale (one that runs per record: :meth:`per_record_only`).

        Returns:
          ``(sampler, params, g)``: the :class:`IntegerSampler`, its per-record parameters and the granularity.

        Raises:
          ValueError: the law runs one scale only (its lattice has one).
        """
        raise ValueError(f"numerics='exact': {type(self).__name__} runs one scale for all records")
