"""What every test of the suite may rely on, whoever started it."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import pytest


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


@pytest.fixture
def unwritable_folder() -> Path:
    """``/proc``: a folder that exists and that not even root can write a file in (the tests
    may run as root, whom a chmod'ed folder does not stop). A test of a refused folder that
    used a folder it could write would pass for nothing: where ``/proc`` is missing or lets a
    file be written, the test fails here, saying so."""
    folder = Path("/proc")
    assert folder.is_dir(), "/proc is not a folder here: the test has no unwritable folder"
    try:
        handle, probe = tempfile.mkstemp(dir=folder)
    except OSError:
        return folder
    os.close(handle)
    os.unlink(probe)
    pytest.fail("/proc lets a file be written here: the test has no unwritable folder")
