"""Figures drawn by a forked child (bemore.drawing): the child's result reaches the parent, a
failure comes back as one line, Ctrl-C sent to the child does not stop it (the parent owns
the interruption), and without fork the figures are drawn in the process."""

from __future__ import annotations

import os
import select
import signal
from pathlib import Path

import pytest

from bemore import drawing

WAIT_S = 60.0  # the longest the child waits for the parent's go


def _write(path: Path, text: str = "figure") -> None:
    path.write_text(text, encoding="utf-8")


def test_the_child_draws_and_the_parent_waits_for_it(tmp_path) -> None:
    figure = tmp_path / "figure.txt"
    child = drawing.start(lambda: _write(figure))
    assert child is not None and child.pid != os.getpid()
    assert drawing.finish(child, lambda: pytest.fail("drawn again in the parent")) is None
    assert figure.read_text(encoding="utf-8") == "figure"


def test_a_child_that_fails_gives_its_reason_in_one_line(tmp_path) -> None:
    def broken() -> None:
        raise OSError(f"{tmp_path}/figure.png: disk full")

    reason = drawing.finish(drawing.start(broken), broken)
    assert reason == f"{tmp_path}/figure.png: disk full"
    # A file the system refuses: its path and the system's reason, not Python's class name.
    (tmp_path / "figure.png").mkdir()
    reason = drawing.finish(drawing.start(lambda: _write(tmp_path / "figure.png")), broken)
    assert reason == f"{tmp_path}/figure.png: Is a directory"

    def a_fault() -> None:
        raise ValueError("image too small")

    assert drawing.finish(drawing.start(a_fault), a_fault) == "ValueError: image too small"


def test_ctrl_c_does_not_stop_the_child(tmp_path) -> None:
    # The child says on one pipe that it has started, then waits for the parent's go on
    # another; the parent sends it SIGINT meanwhile (as a terminal's Ctrl-C reaches the whole
    # process group). The child must still finish its figure: the parent decides what an
    # interruption means, and waits for the figures of the result it writes.
    figure = tmp_path / "figure.txt"
    started_read, started_write = os.pipe()
    go_read, go_write = os.pipe()

    def draw_after_the_go() -> None:
        os.write(started_write, b"started")
        ready, _, _ = select.select([go_read], [], [], WAIT_S)
        assert ready, "no go from the parent"
        _write(figure, os.read(go_read, 16).decode())

    child = drawing.start(draw_after_the_go)
    try:
        ready, _, _ = select.select([started_read], [], [], WAIT_S)
        assert ready and os.read(started_read, 16) == b"started"
        os.kill(child.pid, signal.SIGINT)
        os.write(go_write, b"drawn")
        assert drawing.finish(child, lambda: None) is None
    finally:
        for end in (started_read, started_write, go_read, go_write):
            os.close(end)
    assert figure.read_text(encoding="utf-8") == "drawn"


def test_without_fork_the_figures_are_drawn_here(tmp_path, monkeypatch) -> None:
    monkeypatch.delattr(os, "fork")
    figure = tmp_path / "figure.txt"
    child = drawing.start(lambda: pytest.fail("no child can draw without fork"))
    assert child is None
    assert drawing.finish(child, lambda: _write(figure, str(os.getpid()))) is None
    assert figure.read_text(encoding="utf-8") == str(os.getpid())


def test_a_fork_that_fails_leaves_the_figures_to_be_drawn_here(tmp_path, monkeypatch) -> None:
    def no_process_to_spare():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_process_to_spare)
    figure = tmp_path / "figure.txt"
    child = drawing.start(lambda: pytest.fail("no child was forked"))
    assert child is None
    assert drawing.finish(child, lambda: _write(figure, str(os.getpid()))) is None
    assert figure.read_text(encoding="utf-8") == str(os.getpid())


def test_abandon_waits_for_the_child_without_asking(tmp_path) -> None:
    figure = tmp_path / "figure.txt"
    child = drawing.start(lambda: _write(figure))
    drawing.abandon(child)
    assert figure.exists()
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, 0)  # reaped: no zombie left behind
    drawing.abandon(None)  # nothing to wait for
