"""The ``dpjax`` command line (``python -m dpjax.cli`` or the ``dpjax`` script)."""

from dpjax.cli.release import main

__all__ = ["main"]
