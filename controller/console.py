"""The console scripts' entries: the command line's modules imported under a Ctrl-C guard.

A command line first imports its modules (click, the configuration schemas, its commands:
0.2–0.4 s). A Ctrl-C there would end the process with the traceback of an interrupted import;
here it ends it as a Ctrl-C before a command's work does: one line on stderr saying that nothing
was done, exit code 1.
"""

from __future__ import annotations

import importlib
import sys

STARTING_INTERRUPTED = "interrupted (Ctrl-C) while starting: nothing was read, written or sent"
"""The line (after the program's name) of a Ctrl-C while the command line loads."""


def run(module: str, attribute: str = "main", program: str = "bemore") -> None:
    """Import ``module`` and call its ``attribute`` (the command line's entry); a Ctrl-C during
    the import is one line on stderr (``PROGRAM: interrupted (Ctrl-C) while starting: nothing
    was read, written or sent``) and exit code 1, no traceback."""
    try:
        entry = getattr(importlib.import_module(module), attribute)
    except KeyboardInterrupt:
        print(f"{program}: {STARTING_INTERRUPTED}", file=sys.stderr)
        raise SystemExit(1) from None
    entry()


def bench() -> None:
    """Entry point of the ``bemore-bench`` console script (:func:`controller.cli.main`)."""
    run("controller.cli", program="bemore-bench")
