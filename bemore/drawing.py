"""Figures drawn by a forked child process while the command goes on with its result.

A command's figures (Pillow images, :mod:`bemore.raster`) take 0.1–0.3 s of CPU that its result
does not need. Once their inputs are known, :func:`start` forks a child that draws them on the
other core while the parent goes on (identify: the analysis; synthesize: the outputs), and
:func:`finish` waits for it before the command returns. The child inherits everything loaded
(nothing to import again), ignores Ctrl-C (the parent owns the interruption, and waits for the
figures of a result it writes), and ends with ``os._exit``: no interpreter teardown, status 0
when every figure is written, else 1 with its one-line reason on a pipe. Where there is no fork
the figures are drawn in the process, by :func:`finish`.

The child draws into a folder of its own in the output folder (``STAGING``, each figure
written atomically there); :func:`place` moves them into place once the command's result is
written, or, when they could not be drawn, removes the previous run's figures (which would show
another result): a reader never finds new figures beside an old result, nor a cut image.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from bemore.errors import BemoreError
from controller.cli import os_error_line


class Drawing(NamedTuple):
    """A child process drawing figures: its pid and the read end of the pipe its error line
    comes on."""

    pid: int
    errors: int


def start(draw: Callable[[], None]) -> Drawing | None:
    """Fork a child that runs ``draw()`` (writes the figures); None where there is no fork or
    the fork fails (then :func:`finish` draws them in this process)."""
    if not hasattr(os, "fork"):
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # no process to spare (EAGAIN, ENOMEM): the figures are drawn here
        os.close(read_end)
        os.close(write_end)
        return None
    if pid:
        os.close(write_end)
        return Drawing(pid, read_end)
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.close(read_end)
        draw()
        status = 0
    except BaseException as error:  # reported by the parent as one line
        os.write(write_end, _reason(error).encode()[:2000])
    finally:
        os._exit(status)


def _reason(error: BaseException) -> str:
    """The one line a failed drawing reports: a file's path and the system's reason, a
    BemoreError's own message, else the error's type and message (a fault of the code).

    >>> _reason(IsADirectoryError(21, "Is a directory", "out/convergence.png"))
    'out/convergence.png: Is a directory'
    >>> _reason(ValueError("image too small"))
    'ValueError: image too small'
    """
    if isinstance(error, OSError):
        return os_error_line(error)
    if isinstance(error, BemoreError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def finish(drawing: Drawing | None, draw: Callable[[], None]) -> str | None:
    """Wait for the child of ``drawing`` (without one, run ``draw()`` here); None when the
    figures are written, else the child's one-line reason."""
    if drawing is None:
        draw()
        return None
    _, status = os.waitpid(drawing.pid, 0)
    with os.fdopen(drawing.errors, "rb") as stream:
        reason = stream.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        return reason or f"the drawing process ended with status {status}"
    return None


def abandon(drawing: Drawing | None, staging: Path | None = None) -> None:
    """Wait for the child of ``drawing`` without asking how it ended (the command is ending
    on another error, the one to tell), then remove its folder ``staging`` if given."""
    if drawing is not None:
        os.waitpid(drawing.pid, 0)
        os.close(drawing.errors)
    if staging is not None:
        clear(staging)


def finish_and_place(drawing: Drawing | None, draw: Callable[[], None], staging: Path,
                     folder: Path, names: Iterable[str]) -> tuple[str | None, list[Path]]:
    """:func:`finish` the figures drawn in ``staging``, then :func:`place` ``names`` in
    ``folder``: (None, or the child's reason naming where the figure was to go rather than
    where the child drew it; the paths placed)."""
    reason = finish(drawing, draw)
    placed = place(staging, folder, names)
    if reason is not None:
        reason = reason.replace(f"{staging}/", f"{folder}/")
    return reason, placed


STAGING = ".bemore-new-figures"
"""The folder (in the output folder) where the child draws the figures before :func:`place`."""


def place(staging: Path, folder: Path, names: Iterable[str]) -> list[Path]:
    """Move the figures ``names`` (paths relative to ``staging``) that the child drew whole in
    ``staging`` into ``folder``; of those it did not draw (it failed before them), remove
    ``folder``'s previous ones, which would show another result. Then remove ``staging``.
    Ctrl-C is held off meanwhile. Returns the paths placed."""
    from bemore.paths import output_folder, put_in_place

    drawn = [name for name in names if (staging / name).is_file()]
    try:
        for parent in {(folder / name).parent for name in drawn}:
            output_folder(parent)
        put_in_place({folder / name: staging / name for name in drawn},
                     [folder / name for name in names if name not in drawn])
        return [folder / name for name in drawn]
    finally:
        clear(staging)


def clear(staging: Path) -> None:
    """Remove the figures' folder ``staging`` and what is left in it."""
    import shutil

    shutil.rmtree(staging, ignore_errors=True)
