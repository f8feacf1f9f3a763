"""The console scripts' entries: the command line's modules imported under a Ctrl-C guard.

A command line first imports its modules (click, the configuration schemas, its commands:
0.2–0.4 s). A Ctrl-C there would end the process with the traceback of an interrupted import;
here it ends it as a Ctrl-C during a command does (click's "Aborted!" on stderr, exit code 1).
"""

from __future__ import annotations

import importlib
import sys


def run(module: str, attribute: str = "main") -> None:
    """Import ``module`` and call its ``attribute`` (the command line's entry); a Ctrl-C during
    the import is "Aborted!" on stderr and exit code 1, no traceback."""
    try:
        entry = getattr(importlib.import_module(module), attribute)
    except KeyboardInterrupt:
        print("Aborted!", file=sys.stderr)
        raise SystemExit(1) from None
    entry()


def bench() -> None:
    """Entry point of the ``bemore-bench`` console script (:func:`controller.cli.main`)."""
    run("controller.cli")
