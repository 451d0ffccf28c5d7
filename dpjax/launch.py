"""Start a local multi-process JAX run: ``python -m dpjax.launch --processes 2 script.py [args…]``.

Each of the ``--processes`` children runs ``script.py`` as ``__main__`` after
:func:`initialize` has connected it to the others: ``jax.distributed.initialize`` with a
coordinator on a free port of 127.0.0.1, its process id, CPU devices
(``--devices-per-process`` each) and Gloo collectives
(``jax_cpu_collectives_implementation = "gloo"``). This is for development and tests on one
machine; on a cluster the same script runs under the cluster's launcher (SLURM, a TPU pod), where
:func:`initialize` lets ``jax.distributed.initialize`` detect the cluster.

A child that fails makes the launcher stop the others after ``--grace`` seconds (a peer blocked in
a collective would otherwise wait for it); the launcher exits with the first non-zero status.
"""

from __future__ import annotations

import argparse
import os
import runpy
import socket
import subprocess
import sys
import time
import traceback

__all__ = ["initialize", "free_port", "main"]

_ENV = ("DPJAX_COORDINATOR", "DPJAX_NUM_PROCESSES", "DPJAX_PROCESS_ID")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago (bound to port 0, then released).

    Returns:
      The port number.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def initialize(**kwargs) -> None:
    """Join the multi-process run.

    Under ``dpjax.launch`` with the coordinator and process id it set (CPU, Gloo collectives);
    elsewhere ``jax.distributed.initialize(**kwargs)`` (cluster detection: SLURM, TPU pods, …). A
    second call, or a call in a one-process run started without a launcher and without arguments,
    does nothing.

    Args:
      **kwargs: passed to ``jax.distributed.initialize``.
    """
    import jax

    if jax.distributed.is_initialized():
        return
    if all(name in os.environ for name in _ENV):
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=os.environ["DPJAX_COORDINATOR"],
            num_processes=int(os.environ["DPJAX_NUM_PROCESSES"]),
            process_id=int(os.environ["DPJAX_PROCESS_ID"]),
            initialization_timeout=int(os.environ.get("DPJAX_INIT_TIMEOUT", "60")),
            shutdown_timeout_seconds=int(os.environ.get("DPJAX_SHUTDOWN_TIMEOUT", "30")),
            **kwargs,
        )
        return
    if kwargs or any(v in os.environ for v in ("SLURM_JOB_ID", "TPU_WORKER_HOSTNAMES", "OMPI_COMM_WORLD_SIZE")):
        jax.distributed.initialize(**kwargs)


def _child(script: str, args: list[str]) -> None:
    initialize()
    sys.argv = [script] + args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except BaseException as exc:  # a failed process leaves at once: at a normal exit JAX's shutdown barrier
        if isinstance(exc, SystemExit) and exc.code in (None, 0):  # would wait for the others
            raise
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dpjax.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("--processes", type=int, required=True, help="number of JAX processes (>= 1)")
    p.add_argument("--devices-per-process", type=int, default=1, help="CPU devices in each process (default 1)")
    p.add_argument(
        "--grace", type=float, default=10.0, help="seconds the others may run on after one process failed (default 10)"
    )
    p.add_argument("--timeout", type=float, default=None, help="stop every process after this many seconds")
    p.add_argument("script", help="the Python script every process runs")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the script")
    return p


def _supervise(procs, grace, timeout) -> int:
    """Wait for the children; ``grace`` seconds after the first failure (or at ``timeout``) kill the rest.
    The first failure's status (124 at the timeout), else 0."""
    deadline = None if timeout is None else time.monotonic() + timeout
    status, failed_at = 0, None
    while [p.poll() for p in procs].count(None):  # poll every child (any() would stop at the first running)
        now = time.monotonic()
        for p in procs:
            if p.returncode not in (None, 0) and status == 0:
                status, failed_at = p.returncode, now
        if (failed_at is not None and now - failed_at > grace) or (deadline is not None and now > deadline):
            for p in procs:
                if p.poll() is None:
                    p.kill()
            if status == 0:
                print(f"dpjax.launch: --timeout {timeout} s passed; processes stopped", file=sys.stderr)
                status = 124
            return status
        time.sleep(0.05)
    return status


def main(argv=None) -> int:
    """Run ``script`` in ``--processes`` local JAX processes and supervise them (the launcher's entry point).

    Args:
      argv: the command-line arguments (default ``sys.argv[1:]``): ``--processes N
        [--devices-per-process D] [--grace S] [--timeout S] script.py [args…]``.

    Returns:
      The exit status: the first failing process's (124 at ``--timeout``), else 0.

    Raises:
      SystemExit: ``--processes`` or ``--devices-per-process`` below 1, or no such ``script``.
    """
    opts = _parser().parse_args(argv)
    if opts.processes < 1:
        raise SystemExit("--processes must be an integer >= 1")
    if opts.devices_per_process < 1:
        raise SystemExit("--devices-per-process must be an integer >= 1")
    if not os.path.isfile(opts.script):
        raise SystemExit(f"script: no such file {opts.script!r}")
    coordinator = f"127.0.0.1:{free_port()}"
    procs = []
    for pid in range(opts.processes):
        env = dict(
            os.environ,
            DPJAX_COORDINATOR=coordinator,
            DPJAX_NUM_PROCESSES=str(opts.processes),
            DPJAX_PROCESS_ID=str(pid),
            JAX_PLATFORMS="cpu",
        )
        flag = f"--xla_force_host_platform_device_count={opts.devices_per_process}"
        env["XLA_FLAGS"] = (
            " ".join(
                f
                for f in env.get("XLA_FLAGS", "").split()
                if not f.startswith("--xla_force_host_platform_device_count")
            )
            + " "
            + flag
        )
        code = "import sys; from dpjax.launch import _child; _child(sys.argv[1], sys.argv[2:])"
        procs.append(subprocess.Popen([sys.executable, "-c", code, opts.script, *opts.args], env=env))
    try:
        status = _supervise(procs, opts.grace, opts.timeout)
    finally:  # interrupted (Ctrl-C): no child outlives the launcher
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p in procs:
        p.wait()
        if status == 0 and p.returncode != 0:
            status = p.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
