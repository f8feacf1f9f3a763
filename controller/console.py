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


def forget_unhandled_interrupt() -> None:
    """Clear CPython's mark of an unhandled KeyboardInterrupt, so that the exit code stays the
    one :func:`run` (or :class:`controller.cli.BenchGroup`, for a Ctrl-C in a command) gives. A
    KeyboardInterrupt that leaves code run through the C API's PyRun_String — as ``exec`` of a
    string is in CPython 3.11, which dataclasses, namedtuple and typing use for the classes they
    make while the command line loads — sets that mark even when a caller catches it; run as
    ``python -m bemore``, the interpreter then ends by killing itself with SIGINT (exit status
    -2 instead of 1, about 1 start-up Ctrl-C in 8). Running empty code through the same API
    resets the mark. Elsewhere than CPython (no ``ctypes.pythonapi``)
    there is nothing to clear."""
    try:
        import ctypes

        ctypes.pythonapi.PyRun_SimpleString(b"")
    except (ImportError, AttributeError):
        pass


def run(module: str, attribute: str = "main", program: str = "bemore") -> None:
    """Import ``module`` and call its ``attribute`` (the command line's entry); a Ctrl-C during
    the import is one line on stderr (``PROGRAM: interrupted (Ctrl-C) while starting: nothing
    was read, written or sent``) and exit code 1, no traceback."""
    try:
        entry = getattr(importlib.import_module(module), attribute)
    except KeyboardInterrupt:
        forget_unhandled_interrupt()
        print(f"{program}: {STARTING_INTERRUPTED}", file=sys.stderr)
        raise SystemExit(1) from None
    entry()


def bench() -> None:
    """Entry point of the ``bemore-bench`` console script (:func:`controller.cli.main`)."""
    run("controller.cli", program="bemore-bench")
