"""The DP-SGD setting of ``dpjax account dpsgd`` and ``dpjax calibrate dpsgd``, in users' units.

A batch size, a dataset size and epochs (Poisson rate q = B/N, steps T = ⌈E·N/B⌉, as tf-privacy's
``compute_dp_sgd_privacy`` counts them), or the rate and the steps directly; and the noise kernels whose
DP-SGD accounting is known.
"""

from __future__ import annotations

import math

from dpjax.cli._common import check_positive, check_probability, check_steps, given, kernel_class

__all__ = ["dpsgd_kernels", "dpsgd_kernel", "add_setting_flags", "sampling", "steps_of", "epochs_of"]


def dpsgd_kernels() -> tuple:
    """The registry kernels (as flags spell them) that DP-SGD can be accounted with.

    Those :func:`accounting.dpsgd.noise.noise_kind` accepts and that the noise multiplier alone builds (a mixture
    needs its shape too).

    Returns:
      A tuple of flag spellings.
    """
    from accounting.dpsgd.noise import noise_kind
    from dpjax.kernels import BUILTIN

    out = []
    for name, cls in BUILTIN.items():
        try:
            noise_kind(cls)
            cls(**{cls.scale_name: 1.0})
        except (ValueError, TypeError):
            continue
        out.append(name.replace("_", "-"))
    return tuple(out)


def dpsgd_kernel(args):
    """The ``--mechanism`` class (``None``: the Gaussian), refused by name where DP-SGD has no accounting for it.

    Args:
      args: the parsed flags.

    Returns:
      The kernel class, or ``None``.

    Raises:
      ValueError: a kernel without DP-SGD accounting, or one :func:`dpjax.cli._common.kernel_class` refuses.
    """
    from accounting.dpsgd.noise import noise_kind

    if args.mechanism is None:
        return None
    cls = kernel_class(args.mechanism, "--mechanism")
    try:
        noise_kind(cls)
        cls(**{cls.scale_name: 1.0})
    except (ValueError, TypeError):
        raise ValueError(
            f"--mechanism {args.mechanism}: no DP-SGD accounting for this kernel (one of "
            f"{', '.join(dpsgd_kernels())}, or a class with gaussian_pld_mu, pure_epsilon or "
            "renyi_divergence_bound)"
        ) from None
    return cls


def add_setting_flags(p) -> None:
    """Add the setting's flags to ``p``.

    ``--noise-multiplier``, ``--batch-size --num-examples --epochs`` or ``--sampling-prob --steps``, and
    ``--mechanism``.

    Args:
      p: the subcommand's parser.
    """
    p.add_argument("--noise-multiplier", type=float, help="noise scale / clipping norm (z)")
    u = p.add_argument_group("the setting in users' units")
    u.add_argument("--batch-size", type=int, help="expected batch size B (Poisson sampling rate q = B / N)")
    u.add_argument("--num-examples", type=int, help="training set size N")
    u.add_argument("--epochs", type=float, help="epochs E (steps T = ceil(E * N / B))")
    s = p.add_argument_group("... or as a rate and steps")
    s.add_argument("--sampling-prob", type=float, help="Poisson sampling rate q of a step")
    s.add_argument("--steps", type=int, help="number of noisy steps T")
    p.add_argument("--mechanism", choices=dpsgd_kernels(), help="noise kernel (default gaussian)")


def sampling(args) -> tuple:
    """``(q, T)`` of a fully given setting, checked by flag.

    Args:
      args: the parsed flags: ``--batch-size --num-examples --epochs`` or ``--sampling-prob --steps``, not a
        mix.

    Returns:
      ``(q, T)``: the Poisson rate and the number of steps.

    Raises:
      ValueError: a mix of the two forms or neither, a batch larger than the dataset, or a flag's invalid
        value (naming it).
    """
    users = [d for d in ("batch_size", "num_examples", "epochs") if d in given(args)]
    direct = [d for d in ("sampling_prob", "steps") if d in given(args)]
    if users and direct:
        raise ValueError(
            f"{given(args)[direct[0]]}: give the setting as --batch-size --num-examples --epochs or "
            "as --sampling-prob --steps, not both"
        )
    if users:
        b, n = check_steps("--batch-size", args.batch_size), check_steps("--num-examples", args.num_examples)
        if b > n:
            raise ValueError(f"--batch-size {b} is larger than --num-examples {n}")
        return b / n, steps_of(check_positive("--epochs", args.epochs), b, n)
    if not direct:
        raise ValueError("--batch-size --num-examples --epochs (or --sampling-prob --steps): give the setting")
    return check_probability("--sampling-prob", args.sampling_prob), check_steps("--steps", args.steps)


def steps_of(epochs: float, batch_size: int, num_examples: int) -> int:
    """T = ⌈E·N/B⌉ steps of E epochs (at least one).

    Args:
      epochs: E.
      batch_size: B.
      num_examples: N.

    Returns:
      T, an int.
    """
    return max(1, math.ceil(epochs * num_examples / batch_size - 1e-9))


def epochs_of(steps: int, batch_size: int, num_examples: int) -> float:
    """The epochs E = T·B/N of T steps.

    Args:
      steps: T.
      batch_size: B.
      num_examples: N.

    Returns:
      E, a float.
    """
    return steps * batch_size / num_examples
