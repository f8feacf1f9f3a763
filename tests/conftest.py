"""What every test of the suite may rely on, whoever started it."""

from __future__ import annotations

import signal


def pytest_configure(config) -> None:
    """Ctrl-C as a terminal delivers it. A shell without job control starts a background
    command (``pytest … &`` in a script, some CI runners) with SIGINT ignored, and every child
    process inherits that: the tests of Ctrl-C (a SIGINT sent to a ``bemore identify`` or
    ``replay --web`` child, ``_thread.interrupt_main`` in the polish's lock step) then see
    nothing arrive — a child that finishes as if never interrupted, a wait that times out.
    Python's own handler is put back here, so children start with the default disposition and
    install theirs; the suite's results do not depend on how it was launched."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
