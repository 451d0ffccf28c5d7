"""What every ``dpjax`` subcommand shares.

A parser whose errors are one line, flags that may be given once and are refused where they do not apply,
kernels through the registry, ``--json`` output and a progress indicator on a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import os
import sys
import threading
import time

import numpy as np

__all__ = [
    "Parser",
    "given",
    "refuse_flags",
    "kernel_class",
    "kernel_names",
    "scale_flag",
    "calibrated_kernel",
    "describe",
    "emit",
    "reported",
    "progress",
    "check_positive",
    "check_probability",
    "check_steps",
]


class UsageError(Exception):
    """A malformed command line (argparse's error), reported as one line plus a usage hint."""


class _Once(argparse._StoreAction):
    """``store`` that records the flag as given and refuses it given twice."""

    def __call__(self, parser, namespace, values, option_string=None):
        _record(parser, namespace, self.dest, option_string)
        super().__call__(parser, namespace, values, option_string)


class _OnceTrue(argparse._StoreTrueAction):
    def __call__(self, parser, namespace, values, option_string=None):
        _record(parser, namespace, self.dest, option_string)
        super().__call__(parser, namespace, values, option_string)


def _record(parser, namespace, dest, option_string):
    seen = namespace.__dict__.setdefault("given", {})
    if dest in seen:
        parser.error(f"{option_string} given twice (each flag once)")
    seen[dest] = option_string


class Parser(argparse.ArgumentParser):
    """``argparse`` with every flag given at most once and a one-line error.

    The error exits 2 through :func:`dpjax.cli.main`; no abbreviated flags (``--eps`` is not ``--epsilon``).

    Args:
      *args: as ``argparse.ArgumentParser``.
      **kwargs: as ``argparse.ArgumentParser`` (``allow_abbrev`` defaults to ``False``).
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)
        self.register("action", "store_true", _OnceTrue)

    def error(self, message):
        """Raise the parser's error as a :class:`UsageError` with a usage hint.

        Args:
          message: argparse's message.

        Raises:
          UsageError: always.
        """
        raise UsageError(f"{message} (usage: {self.prog} --help)")


def given(args) -> dict:
    """The flags the user gave.

    Args:
      args: the parsed flags.

    Returns:
      ``{dest: flag as typed}``.
    """
    return getattr(args, "given", None) or {}


def refuse_flags(args, dests, why: str) -> None:
    """Refuse any of ``dests`` the user gave, naming the flag: ``"--sigma does not apply {why}"``.

    Args:
      args: the parsed flags.
      dests: the flags' destinations that do not apply.
      why: the end of the message (``"to a DP-SGD run"``).

    Raises:
      ValueError: one of ``dests`` given.
    """
    for dest in dests:
        if dest in given(args):
            raise ValueError(f"{given(args)[dest]} does not apply {why}")


# ----------------------------------------------------------------------------------
# kernels: the registry, or a class named package.module:Class
# ----------------------------------------------------------------------------------
def kernel_names() -> tuple:
    """The registry's kernel names as flags spell them (dashes)."""
    from dpjax.kernels import BUILTIN

    return tuple(name.replace("_", "-") for name in BUILTIN)


def kernel_class(spec: str, flag: str = "--kernel"):
    """The kernel class ``spec`` names: a registry name or ``package.module:Class``.

    A registry name goes through :func:`dpjax.kernels.by_name`; a ``package.module:Class`` must be a
    ``dpjax.AdditiveMechanism`` subclass, its module looked up on ``sys.path`` and then in the current folder
    (as ``python -m`` would), after the installed packages so that it never shadows one.

    Args:
      spec: the flag's value.
      flag: the flag messages name.

    Returns:
      The kernel class.

    Raises:
      ValueError: an unknown name, a module or class that cannot be loaded, or a class that is not a kernel.
    """
    import dpjax
    from dpjax.kernels import by_name

    spec = str(spec)
    if ":" not in spec:
        try:
            return by_name(spec)
        except ValueError:
            raise ValueError(f"{flag} must be one of {kernel_names()} or package.module:Class, got {spec!r}") from None
    module, _, name = spec.partition(":")
    try:
        cls = getattr(_import_here(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{flag}: cannot load {spec!r} ({exc})") from None
    if not (isinstance(cls, type) and issubclass(cls, dpjax.AdditiveMechanism)):
        raise ValueError(f"{flag}: {spec!r} is not a dpjax.AdditiveMechanism subclass")
    return cls


def _import_here(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        if here in sys.path or not (exc.name and module.startswith(exc.name)):
            raise
        sys.path.append(here)
        try:
            return importlib.import_module(module)
        finally:
            sys.path.remove(here)


def scale_flag(cls) -> str:
    """The flag that sets a kernel class's scale: ``--sigma`` for a σ-scaled kernel, else ``--scale``.

    Args:
      cls: a kernel class.

    Returns:
      ``"--sigma"`` or ``"--scale"``.
    """
    return "--sigma" if cls.scale_name == "sigma" else "--scale"


def calibration_parameters(cls) -> tuple:
    """The shape parameters a class's ``from_epsilon`` needs beyond ε and the sensitivity.

    A piecewise mixture's ``r`` and ``c``; () for a kernel calibrated by ε (and δ) alone.

    Args:
      cls: a kernel class.

    Returns:
      A tuple of parameter names.
    """
    if hasattr(cls, "from_epsilon_delta") or not hasattr(cls, "from_epsilon"):
        return ()
    names = inspect.signature(cls.from_epsilon).parameters
    return tuple(n for n in names if n not in ("epsilon", "sensitivity"))


def calibrated_kernel(cls, epsilon: float, delta: float, sensitivity: float, **shape):
    """The kernel of class ``cls`` calibrated to (ε, δ) at ``sensitivity`` by its own calibrator.

    ``from_epsilon_delta``, else ``from_epsilon`` with its shape parameters; a σ-scaled kernel without one gets
    the analytic Gaussian σ, the discrete Gaussian's customary choice. The privacy printed is always the
    accountant's, of the kernel as built.

    Args:
      cls: a kernel class.
      epsilon: the target ε.
      delta: the target δ.
      sensitivity: the query's sensitivity.
      **shape: the shape parameters :func:`calibration_parameters` names.

    Returns:
      The kernel.

    Raises:
      ValueError: a class without a calibration from ε (naming its scale flag), or its calibrator's refusal.

    References:
      Balle, Wang, "Improving the Gaussian Mechanism for Differential Privacy: Analytical Calibration and
      Optimal Denoising", ICML 2018.
    """
    if hasattr(cls, "from_epsilon_delta"):
        return cls.from_epsilon_delta(epsilon, delta, sensitivity)
    if hasattr(cls, "from_epsilon"):
        return cls.from_epsilon(epsilon, sensitivity=sensitivity, **shape)
    if cls.scale_name == "sigma":
        from dpjax.kernels import analytic_gaussian_sigma

        return cls(sigma=analytic_gaussian_sigma(epsilon, delta, sensitivity))
    raise ValueError(f"{scale_flag(cls)}: {cls.__name__} has no calibration from --epsilon; give its scale")


def describe(obj) -> str:
    """``Name(param=value, ...)`` of a mechanism or region, nested pytrees included.

    Args:
      obj: a dataclass pytree (a mechanism or region).

    Returns:
      The text.
    """
    import dataclasses

    import jax

    parts = []
    for field in dataclasses.fields(obj):
        v = getattr(obj, field.name)
        if isinstance(v, (float, jax.Array, np.ndarray)):
            parts.append(f"{field.name}={float(np.asarray(v)):.6g}")
        elif dataclasses.is_dataclass(v):
            parts.append(describe(v))
    return f"{type(obj).__name__}({', '.join(parts)})"


def parameters(obj) -> dict:
    """A mechanism or region as JSON: ``{"type": Name, field: value or nested, ...}``.

    Args:
      obj: a dataclass pytree (a mechanism or region).

    Returns:
      A dict of JSON values.
    """
    import dataclasses

    import jax

    out = {"type": type(obj).__name__}
    for field in dataclasses.fields(obj):
        v = getattr(obj, field.name)
        if isinstance(v, (float, jax.Array, np.ndarray)):
            out[field.name] = float(np.asarray(v))
        elif dataclasses.is_dataclass(v):
            out[field.name] = parameters(v)
    return out


# ----------------------------------------------------------------------------------
# output
# ----------------------------------------------------------------------------------
def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.generic, np.ndarray)) or type(x).__module__.startswith("jax"):
        x = np.asarray(x).tolist()
        return _jsonable(x) if isinstance(x, list) else x
    if isinstance(x, float) and not np.isfinite(x):
        return None if np.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def reported(compute):
    """A subcommand's ``run`` from ``compute(args) -> (payload, lines)``: :func:`emit`, exit status 0.

    Args:
      compute: the subcommand's computation.

    Returns:
      ``run(args) -> int``.
    """

    def run(args) -> int:
        emit(args, *compute(args))
        return 0

    return run


def emit(args, payload: dict, lines) -> None:
    """Print ``payload`` as one JSON object with ``--json`` (infinities as the strings ``"inf"``), else ``lines``.

    Args:
      args: the parsed flags.
      payload: the result, JSON-able (numpy and JAX values converted).
      lines: the human-readable lines.
    """
    if getattr(args, "json", False):
        print(json.dumps(_jsonable(payload), allow_nan=False))
    else:
        for line in lines:
            print(line)


class _Progress:
    """What a :func:`progress` block reports: ``advance()`` after each of its ``total`` parts (an
    estimate the block may revise)."""

    def __init__(self, total):
        self.total, self.done = total, 0

    def advance(self, parts: int = 1) -> None:
        self.done += parts


@contextlib.contextmanager
def progress(label: str, stream=None, total: int | None = None):
    """An indicator on stderr while the block runs, only when stderr is a terminal.

    With ``total`` the parts done out of ``total`` (the block calls ``advance()``) and the time left estimated
    from the rate so far; else the elapsed time.

    Args:
      label: what the block does.
      stream: where to write (default ``sys.stderr``).
      total: the number of parts, or ``None``.

    Yields:
      The progress state, whose ``advance(parts=1)`` the block calls.
    """
    stream = stream or sys.stderr
    state = _Progress(total)
    if not (hasattr(stream, "isatty") and stream.isatty()):
        yield state
        return
    done = threading.Event()
    start = time.monotonic()
    width = [0]

    def line():
        elapsed = time.monotonic() - start
        if state.total is None:
            return f"{label} {elapsed:5.1f} s"
        if not state.done:
            return f"{label} 0/{state.total}, {elapsed:.0f} s so far"
        left = elapsed / state.done * max(state.total - state.done, 0)
        return f"{label} {state.done}/{state.total}, about {left:.0f} s left"

    def tick():
        frames = "|/-\\"
        i = 0
        while not done.wait(0.25):
            text = f"\r{line()} {frames[i % 4]}"
            width[0] = max(width[0], len(text))
            stream.write(text)
            stream.flush()
            i += 1

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        done.set()
        thread.join()
        stream.write("\r" + " " * width[0] + "\r")
        stream.flush()


# ----------------------------------------------------------------------------------
# flag checks (eager, naming the flag)
# ----------------------------------------------------------------------------------
def check_positive(flag: str, value) -> float:
    """A flag's value checked to be a positive finite number.

    Args:
      flag: the flag messages name.
      value: its value.

    Returns:
      The value as a float.

    Raises:
      ValueError: ``value`` missing, not finite or not positive.
    """
    if value is None or not (np.isfinite(value) and value > 0):
        raise ValueError(f"{flag} must be a positive finite number, got {value}")
    return float(value)


def check_probability(flag: str, value) -> float:
    """A flag's value checked to lie in (0, 1).

    Args:
      flag: the flag messages name.
      value: its value.

    Returns:
      The value as a float.

    Raises:
      ValueError: ``value`` missing or outside (0, 1).
    """
    if value is None or not (0.0 < value < 1.0):
        raise ValueError(f"{flag} must lie in (0, 1), got {value}")
    return float(value)


def check_steps(flag: str, value) -> int:
    """A flag's value checked to be a positive integer.

    Args:
      flag: the flag messages name.
      value: its value.

    Returns:
      The value as an int.

    Raises:
      ValueError: ``value`` missing or below 1.
    """
    if value is None or value < 1:
        raise ValueError(f"{flag} must be a positive integer, got {value}")
    return int(value)
