"""What every test of the suite may rely on, whoever started it."""

from __future__ import annotations

import errno
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.filesystem import immutable


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
def unwritable_folder(tmp_path: Path, monkeypatch) -> Iterator[Path]:
    """A folder that exists and in which no file can be made, not even by root (the tests may
    run as root, whom permission bits do not stop): made immutable (``chattr +i``) where the
    file system allows it; else, not root, read-only by its permission bits; else (root on a
    file system without chattr, such as tmpfs) a file's creation in it refused with EACCES, as
    the system would refuse it (``tempfile.mkstemp``, what shows a folder writable). A test of
    a refused folder that used a folder it could write would pass for nothing: the fixture
    checks that no file can be made there before handing it over."""
    folder = tmp_path / "unwritable"
    folder.mkdir()
    with immutable(folder) as refused_by_chattr:
        if not refused_by_chattr and os.geteuid() != 0:
            folder.chmod(0o500)
        elif not refused_by_chattr:
            make = tempfile.mkstemp

            def refused(*args, dir=None, **kwargs):
                if dir is not None and Path(dir) == folder:
                    raise PermissionError(errno.EACCES, "Permission denied", str(folder))
                return make(*args, dir=dir, **kwargs)

            monkeypatch.setattr(tempfile, "mkstemp", refused)
        try:
            handle, probe = tempfile.mkstemp(dir=folder)
        except OSError:
            yield folder
        else:
            os.close(handle)
            os.unlink(probe)
            pytest.fail(f"{folder}: a file can be made here: the test has no unwritable folder")
        finally:
            if not refused_by_chattr:
                folder.chmod(0o700)
