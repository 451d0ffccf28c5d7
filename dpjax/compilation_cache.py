"""A persistent JAX compilation cache: compiled programs kept on disk, so that a second process running
the same programs (a second ``dpjax account`` call, a second script) loads them instead of compiling.

The ``dpjax`` command line turns it on for itself (``DPJAX_COMPILATION_CACHE=off`` turns it off, a path
moves it); a Python program turns it on with :func:`enable_compilation_cache`. It changes what is
compiled, never what is computed: a program loaded from the cache is the program that was compiled.
"""

from __future__ import annotations

import os

__all__ = ["enable_compilation_cache", "default_cache_dir", "ENVIRONMENT_VARIABLE"]

#: the environment variable the command line reads: ``off`` (or ``0``) disables the cache, a path moves it
ENVIRONMENT_VARIABLE = "DPJAX_COMPILATION_CACHE"


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/dpjax/jax``, else ``~/.cache/dpjax/jax``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dpjax", "jax")


def enable_compilation_cache(path: str | os.PathLike | None = None, *, min_compile_time_secs: float = 0.0) -> str:
    """Keep JAX's compiled programs in the folder ``path`` (created if missing) for later processes.

    Sets ``jax_compilation_cache_dir`` and caches every program that took at least
    ``min_compile_time_secs`` to compile, whatever its size (the accountant's programs are many
    and small; JAX's own defaults keep only those over a second). The setting is process-wide, as
    JAX's configuration is.

    Args:
      path: the cache folder; default :func:`default_cache_dir`.
      min_compile_time_secs: programs compiled faster than this are not written (default 0: all).

    Returns:
      The folder used.

    Raises:
      ValueError: ``path`` exists and is not a folder, or cannot be created.
    """
    import jax

    folder = os.path.abspath(os.path.expanduser(os.fspath(path) if path is not None else default_cache_dir()))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"path: cannot use {folder!r} as the compilation cache ({exc})") from None
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return folder
