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


# ---------------------------------------------------------------------- writing the outputs
#
# Every output file is written whole or not at all: its content goes to a temporary file in
# the same folder, is flushed to the disk (fsync), and only then takes the file's name
# (os.replace, atomic on every local file system). A reader, a full disk or a Ctrl-C finds the
# file as it was or as it is now, never cut. The files that belong together (synthesize's
# gesture.json, profiles.csv and setpoints.csv; identify's athlete.json, convergence.csv and
# summary.txt) are all written to temporaries first and put in place together, with Ctrl-C
# held off for those few renames (:func:`write_together`).

PARTIAL_PREFIX = ".bemore-partial-"
"""Name prefix of the temporary file an output is written to before it takes its name."""

_interrupt_note = ["nothing was written"]


def on_interrupt(note: str) -> None:
    """Say what a Ctrl-C from now on leaves behind (``"nothing was written in out/"``): the
    command group prints it in its one line (``bemore: interrupted (Ctrl-C): NOTE``)."""
    _interrupt_note[0] = note


def interrupt_note() -> str:
    """What :func:`on_interrupt` last said (the group's line for a Ctrl-C)."""
    return _interrupt_note[0]


def _write_bytes(handle: int, data: bytes) -> None:
    """Write all of ``data`` to the open file descriptor ``handle``: the one low-level write
    of every output file (a full disk raises OSError ENOSPC here)."""
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view):]


def cannot_write(path: str | Path, error: OSError) -> str:
    """``PATH: cannot write (REASON)``: the start of the line for an output the system
    refused (the reason as the system words it, e.g. "No space left on device")."""
    return f"{path}: cannot write ({error.strerror or error})"


def _target(path: Path) -> Path:
    """The file ``path`` names: a link's target (replaced, the link kept), else ``path``."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def stage(path: str | Path, content: bytes | str) -> Path:
    """Write ``content`` (text as UTF-8) completely to a new temporary file in ``path``'s
    folder, flushed to the disk, and return that temporary (``path`` itself is not touched:
    :func:`write_file` and :func:`write_together` put it in place). A file the system refuses
    (a full disk, no permission) is a DataError naming ``path`` ("cannot write (reason)"),
    the temporary removed; so is anything raised meanwhile (Ctrl-C) re-raised with it removed.
    The file gets the permissions a new file gets (the umask's)."""
    path = Path(path)
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    target = _target(path)
    while True:
        temporary = target.with_name(f"{PARTIAL_PREFIX}{os.urandom(4).hex()}-{target.name}")
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
        except OSError as error:
            raise DataError(cannot_write(path, error)) from None
    try:
        try:
            _write_bytes(handle, data)
            os.fsync(handle)
        finally:
            os.close(handle)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise DataError(cannot_write(path, error)) from None
        raise
    return temporary


def discard(temporaries: Iterable[str | Path]) -> None:
    """Remove temporaries :func:`stage` wrote (those not there are skipped)."""
    for temporary in temporaries:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


@contextlib.contextmanager
def ctrl_c_held():
    """Hold a Ctrl-C (SIGINT) off while inside, then raise its KeyboardInterrupt on leaving;
    off the main thread, or with SIGINT ignored, nothing changes."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):
        yield
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


def _sync_folder(folder: Path) -> None:
    """Flush ``folder``'s entries (the renames) to the disk, where the system allows it."""
    with contextlib.suppress(OSError):
        handle = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


def put_in_place(staged: dict[Path, Path], remove: Iterable[str | Path] = ()) -> None:
    """Put each temporary of ``staged`` (path → temporary, :func:`stage`) in its path's place
    (os.replace), in the order given, after removing the ``remove`` files that are there; all
    with Ctrl-C held off (:func:`ctrl_c_held`), the folders flushed. A rename the system
    refuses is a DataError naming the path (the temporaries not yet in place removed)."""
    with ctrl_c_held():
        pending = dict(staged)
        try:
            for path in remove:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(_target(Path(path)))
            for path, temporary in staged.items():
                try:
                    os.replace(temporary, _target(path))
                except OSError as error:
                    raise DataError(cannot_write(path, error)) from None
                del pending[path]
        finally:
            discard(pending.values())
        for folder in {_target(path).parent for path in staged}:
            _sync_folder(folder)


def write_file(path: str | Path, content: bytes | str) -> Path:
    """Write ``content`` (text as UTF-8) at ``path`` atomically: the file is the previous one
    or the complete new one, never cut (a temporary beside it, fsync, os.replace). A file the
    system refuses is a DataError naming ``path`` (the previous file kept: the caller says
    what follows). Returns ``path``."""
    path = Path(path)
    put_in_place({path: stage(path, content)})
    return path


def kept(existed: dict[Path, bool]) -> str:
    """What a refused write of a set left, from whether each file (path → True if it existed
    before the write) was there: ``"athlete.json, summary.txt not replaced (the previous ones
    kept)"`` for those that were, ``"convergence.csv not written"`` for those that were not,
    both joined by ``"; "`` when the set held both."""
    before = [Path(path).name for path, there in existed.items() if there]
    new = [Path(path).name for path, there in existed.items() if not there]
    parts = []
    if before:
        ones = "ones" if len(before) > 1 else "one"
        parts.append(f"{', '.join(before)} not replaced (the previous {ones} kept)")
    if new:
        parts.append(f"{', '.join(new)} not written")
    return "; ".join(parts)


def write_together(contents: dict[Path, bytes | str], remove: Iterable[str | Path] = (),
                   ready: dict[Path, Path] | None = None) -> list[Path]:
    """Write the files ``contents`` (path → content) as one set: each to a temporary beside it
    first (:func:`stage`); only once all are complete are the ``remove`` files removed and the
    files put in place, those of ``ready`` first (path → a complete file on the same file
    system, e.g. figures a child process drew, moved there), then ``contents`` in the order
    given, with Ctrl-C held off (:func:`put_in_place`). So a reader finds the previous set or
    the new one, and a full disk, a refused file or a Ctrl-C while they are written replaces
    none of them: a DataError names the file that could not be written and says that none of
    the set was replaced (the temporaries removed, ``ready``'s files left to the caller).
    Returns the paths written."""
    existed = {Path(path): _target(Path(path)).exists() for path in [*(ready or {}), *contents]}
    staged: dict[Path, Path] = {}
    try:
        for path, content in contents.items():
            staged[Path(path)] = stage(path, content)
        put_in_place({**(ready or {}), **staged}, remove)
    except DataError as error:
        discard(staged.values())
        raise DataError(f"{error}: {kept(existed)}") from None
    except BaseException:
        discard(staged.values())
        raise
    return [*(ready or {}), *staged]
