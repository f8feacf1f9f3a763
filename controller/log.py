"""Session log: an append-only JSON Lines file, written to survive a crash.

Layout (one JSON object per line, ``type`` first; times ``host_time`` in seconds of the host's
monotonic clock since the header's origin):

* ``header`` — first line: ``format`` (``bemore-session 1``), ``start_utc``, ``athlete``,
  ``gesture``, ``setpoints``, ``settings`` (mode, load, speed, reps, rest, rate), ``bench``
  (the bench configuration used), ``port``;
* ``sp`` — every setpoint sent: ``k`` (slot), ``seq``, ``time_ms`` and the wire values
  ``position_urad``, ``velocity_urad_s``, ``torque_mNm``, ``rep``, ``phase``;
* ``tm`` — every telemetry frame received, with all its wire fields;
* ``event`` — ``kind`` and ``message`` (connected with the firmware version, armed, stop
  requested, fault, link lost, disarmed, ...);
* ``end`` — last line of a session that ended under control: ``reason`` and ``timing``.

Crash tolerance: records are handed to a background writer thread that writes and flushes them
to the OS every ``flush_interval_s`` (5 ms), and at once for every event, so a SIGKILL of the
host loses at most the last few milliseconds (and a slow disk never stalls the stream); it calls
``fsync`` on the header, on every event and on close, so a power cut loses at most what followed
the last event. The reader accepts a truncated last line (a record cut mid-write) and a missing
``end``.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import DataError
from controller.scheduler import other_cpus, pinned, realtime_priority

FORMAT_TAG = "bemore-session 1"
FLUSH_INTERVAL_S = 0.005
SETPOINT_KEYS = ("k", "seq", "time_ms", "position_urad", "velocity_urad_s", "torque_mNm", "rep")
TELEMETRY_KEYS = ("seq_echo", "mcu_ticks", "setpoint_time_ms", "position_urad",
                  "velocity_urad_s", "torque_mNm", "state", "fault", "limit_flags",
                  "bad_frames", "late_setpoints", "seq_gaps")


def already_logged(path: str | Path, option: str = "--log") -> str:
    """The one-line refusal for a session log path that is already taken, naming the
    ``option`` that gave it (drive's --log, replay's --log-out)."""
    return (f"{path}: a session log is already there (a log is never overwritten: give "
            f"{option} another name)")


class LogWriter:
    """Thread-safe writer of one session log (see the module docstring for the layout)."""

    def __init__(self, path: str | Path, header: dict[str, Any],
                 flush_interval_s: float = FLUSH_INTERVAL_S):
        self.path = Path(path)
        self.origin = time.perf_counter()
        self.flush_interval_s = flush_interval_s
        self._pending: list[str] = []
        self._lock = threading.Lock()  # guards _pending
        self._io_lock = threading.Lock()  # one writer of the file at a time
        self._wake = threading.Event()
        self._closed = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # mkdir's answer for a file where the folder should be
            raise DataError(f"{self.path}: cannot write the session log ({self.path.parent} "
                            "is a file, not a folder)") from None
        except OSError as error:
            raise DataError(f"{self.path}: cannot write the session log "
                            f"({error.strerror or error})") from None
        try:
            # "x": a session's log is never overwritten, not even by a race with another one
            self._file = self.path.open("x", encoding="utf-8")
        except FileExistsError:
            raise DataError(already_logged(self.path)) from None
        except OSError as error:
            raise DataError(f"{self.path}: cannot write the session log "
                            f"({error.strerror or error})") from None
        record = {"type": "header", "format": FORMAT_TAG, **header}
        self._file.write(json.dumps(record, default=_jsonable) + "\n")
        self._sync()
        self._writer = threading.Thread(target=self._write_loop, name="session-log",
                                        daemon=True)
        self._writer.start()

    def host_time(self, perf_s: float | None = None) -> float:
        """Seconds since the log's origin, of ``perf_s`` (perf_counter s) or of now."""
        return (time.perf_counter() if perf_s is None else perf_s) - self.origin

    def setpoint(self, perf_s: float, **fields: int) -> None:
        """Log one setpoint sent at ``perf_s`` (perf_counter seconds)."""
        self._append({"type": "sp", "host_time": round(perf_s - self.origin, 6), **fields})

    def telemetry(self, perf_s: float, fields: dict[str, int]) -> None:
        """Log one telemetry frame received at ``perf_s`` (perf_counter seconds)."""
        self._append({"type": "tm", "host_time": round(perf_s - self.origin, 6), **fields})

    def event(self, kind: str, message: str = "", sync: bool = True, **extra: Any) -> None:
        """Log an event; with ``sync`` wait until it is on disk (write + fsync), else soon."""
        record = {"type": "event", "host_time": round(self.host_time(), 6), "kind": kind,
                  "message": message, **extra}
        self._append(record)
        if sync:
            self._drain(fsync=True)
        else:
            self._wake.set()

    def end(self, reason: str, **extra: Any) -> None:
        """Write the closing record of a session that ended under control."""
        record = {"type": "end", "host_time": round(self.host_time(), 6), "reason": reason,
                  **extra}
        self._append(record)
        self._drain(fsync=True)

    def kick(self) -> None:
        """Wake the writer thread now (the streaming thread calls it right after a send, so that
        the writer's turn with the interpreter lock falls in the slack before the next one)."""
        self._wake.set()

    def flush(self) -> None:
        """Hand every pending record to the OS now."""
        self._drain(fsync=False)

    def close(self) -> None:
        """Write everything, fsync and close (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._writer.join(timeout=2.0)
        self._drain(fsync=True)
        with self._io_lock:
            self._file.close()

    def _append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=_jsonable) + "\n"
        with self._lock:
            self._pending.append(line)

    def _drain(self, fsync: bool) -> None:
        with self._lock:
            lines, self._pending = self._pending, []
        with self._io_lock:
            if self._file.closed:
                return
            if lines:
                self._file.write("".join(lines))
            if fsync:
                self._sync()
            else:
                self._file.flush()

    def _write_loop(self) -> None:
        # lowest real-time priority when allowed: preempted while holding the interpreter lock,
        # this thread would stall the streaming thread for a whole OS time slice
        with realtime_priority(priority=1), pinned(other_cpus()):
            self._write_until_closed()

    def _write_until_closed(self) -> None:
        while not self._closed:
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            try:
                self._drain(fsync=False)
            except (OSError, ValueError):
                return  # the file went away; close() reports nothing more to write

    def _sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _jsonable(value: Any) -> Any:
    """JSON form of the paths met in headers and events."""
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


@dataclass
class SessionLog:
    """A session log read back: header, setpoint and telemetry columns, events, end record.

    ``setpoints`` and ``telemetry`` map each key (``host_time`` and the wire fields) to a column,
    an ``array('d')`` of floats (NaN where a record lacks the key; ``numpy.asarray`` takes it
    without a copy); ``truncated`` tells that the last line was cut mid-write (a crash).
    """

    path: str
    header: dict[str, Any]
    setpoints: dict[str, array]
    telemetry: dict[str, array]
    events: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    truncated: bool = False


def read_log(path: str | Path) -> SessionLog:
    """Read a session log; a truncated last line is tolerated, any other damage is a DataError."""
    path = Path(path)
    try:
        # past a byte order mark (a re-saved file)
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except FileNotFoundError:
        raise DataError(f"{path}: session log not found") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read the session log ({error})") from None
    lines = text.split("\n")
    complete, tail = lines[:-1], lines[-1]  # the tail is "" when the file ends with a newline
    records = []
    for number, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            _refuse_another_kind(path, text)
            raise DataError(f"{path}: line {number}: not a JSON record") from None
    truncated = bool(tail.strip())
    if not records or not isinstance(records[0], dict) or records[0].get("type") != "header":
        _refuse_another_kind(path, text)
        raise DataError(f"{path}: line 1: the session log must start with a header record")
    if records[0].get("format") != FORMAT_TAG:
        raise DataError(f"{path}: line 1: format {records[0].get('format')!r}: "
                        f"expected {FORMAT_TAG!r}")
    by_type: dict[str, list[dict[str, Any]]] = {"sp": [], "tm": [], "event": [], "end": []}
    for record in records[1:]:
        kind = record.get("type", "?") if isinstance(record, dict) else "?"
        by_type.setdefault(kind, []).append(record)
    return SessionLog(
        path=str(path),
        header=records[0],
        setpoints=_columns(by_type["sp"], ("host_time", *SETPOINT_KEYS)),
        telemetry=_columns(by_type["tm"], ("host_time", *TELEMETRY_KEYS)),
        events=by_type["event"],
        end=by_type["end"][-1] if by_type["end"] else None,
        truncated=truncated,
    )


def _refuse_another_kind(path: Path, text: str) -> None:
    """A DataError naming what the file is when ``text`` is another of bemore's outputs (an
    athlete.json, a setpoints.csv…) instead of a session log; nothing otherwise."""
    from controller.filekinds import SESSION_LOG, other_than, refusal

    kind = other_than(text, SESSION_LOG)
    if kind is not None:
        raise DataError(refusal(path, kind, SESSION_LOG.wanted()))


def _columns(records: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, array]:
    """Column ``array('d')`` of each of ``keys`` over ``records`` (NaN where a record lacks
    the key)."""
    return {key: array("d", [float(record.get(key, math.nan)) for record in records])
            for key in keys}
