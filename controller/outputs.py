"""The folder a command writes its outputs in, shown writable before the work.

One definition for both sides (the bench side installs alone): ``bemore identify``,
``synthesize``, ``batch``, ``trial inspect``, ``simulate``, ``model`` reach it through
``controller.cli`` (``bemore.paths`` re-exports it), ``replay --plot`` uses it directly. Outputs
already in the folder are overwritten by the command that writes them; what cannot be written is
said in one line, before the work.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from controller.errors import DataError

WRITE_PROBE_PREFIX = ".bemore-write-test-"
"""Name prefix of the temporary file written and removed to show a folder writable."""


def output_folder(folder: str | Path, files: Iterable[str] = (),
                  folders: Iterable[str] = ()) -> Path:
    """``folder`` made (with its parents) for a command's outputs, shown writable, and returned.

    A path that exists and is not a folder, one the system will not make (no such parent, no
    permission, a read-only file system) or a folder it will not let a file be written in is a
    DataError naming it, in one line; so is any of ``files`` (names of the outputs in the
    folder) that is there and will not open for writing (a folder in its place, a read-only
    file, a link to a folder that does not exist), and any of ``folders`` (names of the
    sub-folders it writes in) that is there and is not a folder it can write in. Writing is
    tested for real, a temporary file written and removed (permission bits do not tell: root
    ignores them, a read-only mount does not show in them); the existing files are opened for
    writing, not changed, and nothing is made at a link's target. What writes the outputs
    calls this; a command checks its folder before its work with
    :func:`check_output_folder`, which leaves nothing behind.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise DataError(f"{folder}: output folder exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataError(f"{folder}: cannot create the output folder ({error.strerror})") from None
    _write_probe(folder)
    for name in files:
        _check_output_file(folder / name)
    for name in folders:
        if os.path.lexists(folder / name):
            output_folder(folder / name)
    return folder


def check_output_folder(folder: str | Path, files: Iterable[str] = (),
                        folders: Iterable[str] = ()) -> None:
    """Show that :func:`output_folder` can make ``folder`` and write ``files`` and ``folders``
    in it (the same DataError, one line, if not), leaving the file system as it found it: the
    folders it makes for the test (``folder`` and its missing parents) are removed again,
    deepest first, each only if it is still empty. A command calls this before its work
    (identify before reading the trial, synthesize before printing anything, batch before any
    cluster or athlete), so that a folder it cannot write is said at once, and a run that fails
    for another reason (a bad trial) leaves no empty folder behind."""
    folder = Path(folder)
    missing = []  # the folders to make, deepest first
    for path in (folder, *folder.parents):
        if os.path.lexists(path):
            break
        missing.append(path)
    try:
        output_folder(folder, files, folders)
    finally:
        for path in missing:
            with contextlib.suppress(OSError):  # only an empty folder is removed
                path.rmdir()


def _write_probe(folder: Path) -> None:
    """Write a temporary file in ``folder`` and remove it (also on Ctrl-C); one the system
    refuses is a DataError naming the folder."""
    try:
        handle, probe = tempfile.mkstemp(prefix=WRITE_PROBE_PREFIX, dir=folder)
    except OSError as error:
        raise DataError(f"{folder}: cannot write in the output folder ({error.strerror})"
                        ) from None
    try:
        os.close(handle)
    finally:
        os.unlink(probe)


def _check_output_file(path: Path) -> None:
    """An output file that is there opened for writing (nothing written); a link to a file not
    there yet is followed no further than its folder, which must exist (nothing is made at the
    target). One the system refuses is a DataError naming ``path``."""
    if not os.path.lexists(path):
        return
    try:
        os.stat(path)
    except FileNotFoundError:  # a link to nothing: writing it makes its target, in a folder
        target = os.readlink(path)
        if not os.path.isdir(os.path.dirname(os.path.realpath(path))):
            raise DataError(f"{path}: cannot write the output file (a link to {target}, "
                            "whose folder does not exist)") from None
        return
    except OSError as error:  # a loop of links, ...
        raise DataError(f"{path}: cannot write the output file ({error.strerror})") from None
    try:
        with open(path, "r+b"):  # opened for writing, nothing written
            pass
    except OSError as error:
        raise DataError(f"{path}: cannot write the output file ({error.strerror})") from None
