"""Live terminal view of a session (rich), and the keys a coach presses to stop it.

The view redraws a few times a second from :class:`controller.session.Status` (it never touches
the stream loop); on a terminal, ``e`` or the space bar is the e-stop key (ESTOP at once) and
``q`` asks for a controlled stop (ramp down, disarm), like Ctrl-C.
"""

from __future__ import annotations

import contextlib
import math
import select
import sys
import threading
from collections.abc import Iterator

from rich.console import Console
from rich.live import Live
from rich.text import Text

from controller.scheduler import other_cpus, pinned, realtime_priority
from controller.session import Session

ESTOP_KEYS = ("e", " ")
STOP_KEYS = ("q",)
REFRESH_HZ = 4  # a redraw costs ~1 ms of the interpreter: keep it rare


def _deg(value: float) -> str:
    return "—" if math.isnan(value) else f"{math.degrees(value):.1f}"


def _nm(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.1f}"


COLUMNS = (("t s", 6), ("rep", 3), ("cmd", 6), ("meas", 6), ("err", 5), ("τ cmd", 6),
           ("τ meas", 6), ("state", 8), ("fault", 13), ("misses", 6), ("late", 4))  # 79 wide
TITLE = "bemore drive — e/space: E-STOP, q or Ctrl-C: stop"
CAPTION = "angles in deg, torques in N·m; misses: sent after due − 1 ms; late: > 1 period late"
HEADER = " ".join(f"{name:>{width}}" for name, width in COLUMNS)


class StatusPanel:
    """A rich renderable of the session's current status: plain aligned text.

    A rich Table costs ~11 ms of interpreter time per redraw on this kind of machine, pre-formatted
    text ~0.3 ms: the redraw shares the interpreter lock with the streaming thread.
    """

    def __init__(self, session: Session):
        self.session = session

    def __rich__(self) -> Text:
        status = self.session.status
        values = (f"{status.t_s:.2f}", str(status.rep), _deg(status.commanded_rad),
                  _deg(status.measured_rad), _deg(status.tracking_error_rad),
                  _nm(status.commanded_torque_nm), _nm(status.measured_torque_nm),
                  status.state, status.fault, str(status.misses), str(status.late_sends))
        row = " ".join(f"{value:>{width}}" for value, (_, width) in zip(values, COLUMNS,
                                                                       strict=True))
        return Text(f"{TITLE}\n{HEADER}\n{row}\n{CAPTION}")


def _read_keys(session: Session, done: threading.Event) -> None:
    """Reader-thread body: map key presses to stop requests until ``done``.

    Lowest real-time priority, off the streaming CPU (see controller.scheduler): at normal
    priority, preempted by another job while holding the interpreter lock, it would stall the
    stream for a whole OS time slice.
    """
    with realtime_priority(priority=1), pinned(other_cpus()):
        while not done.is_set():
            ready, _, _ = select.select([sys.stdin], [], [], 0.1)
            if not ready:
                continue
            key = sys.stdin.read(1).lower()
            if key in ESTOP_KEYS:
                session.request_stop("estop", "e-stop key pressed")
            elif key in STOP_KEYS:
                session.request_stop("interrupted", "stopped by the q key")


@contextlib.contextmanager
def live_view(session: Session, console: Console | None = None) -> Iterator[None]:
    """Show the live view (and listen to the stop keys on a terminal) while in the block."""
    console = console or Console(stderr=True)
    done = threading.Event()
    keys = None
    terminal = _cbreak() if sys.stdin.isatty() else contextlib.nullcontext()
    try:
        with terminal, Live(StatusPanel(session), console=console, auto_refresh=False,
                            transient=False) as live:
            refresher = threading.Thread(target=_refresh, args=(live, done), daemon=True)
            refresher.start()
            if sys.stdin.isatty():
                keys = threading.Thread(target=_read_keys, args=(session, done), daemon=True)
                keys.start()
            try:
                yield
            finally:
                done.set()
                refresher.join(timeout=1.0)
                if keys is not None:
                    keys.join(timeout=0.5)
                live.refresh()
    finally:
        console.line()  # what follows (the result, an error) starts on its own line


def _refresh(live: Live, done: threading.Event) -> None:
    """Redraw at REFRESH_HZ under the lowest real-time priority (see controller.scheduler):
    preempted mid-redraw while holding the interpreter lock, it would stall the stream."""
    with realtime_priority(priority=1), pinned(other_cpus()):
        while not done.wait(1.0 / REFRESH_HZ):
            live.refresh()


@contextlib.contextmanager
def _cbreak() -> Iterator[None]:
    """Terminal in cbreak mode (one key at a time, no echo), restored afterwards."""
    import termios
    import tty

    descriptor = sys.stdin.fileno()
    saved = termios.tcgetattr(descriptor)
    try:
        tty.setcbreak(descriptor)
        yield
    finally:
        termios.tcsetattr(descriptor, termios.TCSADRAIN, saved)
