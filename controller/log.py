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

A log that cannot be written (a full disk, an I/O error, a file system gone read-only) never
raises in the writer: the first error is kept (:attr:`LogWriter.failure`, the session's health
check stops on it), a record cut by it is cut off again (``ftruncate`` back to the last whole
line), and nothing more is written but, at the end, one short ``end`` record if it still fits
(``log_error`` says what was lost). What was written before stays, whole lines only.
"""

from __future__ import annotations

import contextlib
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
        self.failure: OSError | None = None  # the first write error: nothing is written after it
        self.records_written = 0  # whole records handed to the OS, the header included
        self._records_before_failure = 0
        self._size = 0  # bytes up to the end of the last whole record written
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # mkdir's answer for a file where the folder should be
            raise DataError(f"{self.path}: cannot write the session log ({self.path.parent} "
                            "is a file, not a folder)") from None
        except OSError as error:
            raise self._refusal(error) from None
        try:
            self._file = self._open()
        except FileExistsError:
            raise DataError(already_logged(self.path)) from None
        except OSError as error:
            raise self._refusal(error) from None
        record = {"type": "header", "format": FORMAT_TAG, **header}
        try:
            self._write([json.dumps(record, default=_jsonable) + "\n"])
            self._sync()
        except OSError as error:  # a full disk: a file without its header is no log, remove it
            with contextlib.suppress(OSError):
                self._file.close()
            with contextlib.suppress(OSError):
                self.path.unlink()
            raise self._refusal(error) from None
        self._writer = threading.Thread(target=self._write_loop, name="session-log",
                                        daemon=True)
        self._writer.start()

    def _refusal(self, error: OSError) -> DataError:
        """The one line for a log that cannot even be started (made, opened, its header)."""
        return DataError(f"{self.path}: cannot write the session log "
                         f"({error.strerror or error})")

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
        """Write the closing record of a session that ended under control; after a write error
        (:attr:`failure`), a short one (``reason``, ``log_error``: :meth:`failure_text`, and
        ``message`` if there is room) if it still fits, else nothing (the log keeps its whole
        lines)."""
        record = {"type": "end", "host_time": round(self.host_time(), 6), "reason": reason,
                  **extra}
        self._append(record)
        if self._drain(fsync=True) or self.failure is None:
            return
        short = {key: record[key] for key in ("type", "host_time", "reason")}
        short["log_error"] = self.failure_text()
        # with the session's message, else without (a full disk may leave room for little)
        for more in ({"message": record.get("message", "")}, {}):
            line = json.dumps(short | more, default=_jsonable) + "\n"
            with self._io_lock:
                if self._file.closed:
                    return
                try:
                    self._write([line])
                except OSError:  # it did not fit: whole lines only (_write cut it off)
                    continue
                with contextlib.suppress(OSError):
                    self._sync()
                return

    def failure_text(self) -> str:
        """'FILE: cannot write the session log (REASON after N records)' once a write failed
        (:attr:`failure`; N counts the header), '' before."""
        if self.failure is None:
            return ""
        reason = self.failure.strerror or str(self.failure)
        return (f"{self.path}: cannot write the session log ({reason} after "
                f"{self._records_before_failure} records)")

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
            try:
                self._file.close()
            except OSError as error:  # a network file system reports some errors only here
                self._fail(error)

    def _open(self):
        """The log file, created (never overwritten, not even by a race with another session:
        mode "x"), unbuffered: every write goes to the OS at once and says how much it took."""
        return self.path.open("xb", buffering=0)

    def _append(self, record: dict[str, Any]) -> None:
        if self.failure is not None:  # nothing more is written: no need to keep it
            return
        line = json.dumps(record, default=_jsonable) + "\n"
        with self._lock:
            self._pending.append(line)

    def _drain(self, fsync: bool) -> bool:
        """Hand the pending records to the OS (and fsync); False when they could not be (a
        write error now or before: :attr:`failure`, never raised)."""
        with self._lock:
            lines, self._pending = self._pending, []
        with self._io_lock:
            if self._file.closed or self.failure is not None:
                return False
            try:
                if lines:
                    self._write(lines)
            except OSError as error:
                self._fail(error)
                return False
            try:
                if fsync:
                    self._sync()
            except OSError as error:
                self._fail(error)
            return True

    def _write(self, lines: list[str]) -> None:
        """Write ``lines`` (each ending in a newline) whole; an OSError on the way is raised
        after the file is cut back to the last whole line (what a full disk took of a record
        is no record)."""
        data = "".join(lines).encode("utf-8")
        done = 0
        try:
            while done < len(data):
                done += self._file.write(memoryview(data)[done:])
        except OSError:
            whole = data.rfind(b"\n", 0, done) + 1
            self.records_written += data.count(b"\n", 0, whole)
            self._size += whole
            if whole < done:
                with contextlib.suppress(OSError):  # a device that cannot be truncated
                    os.ftruncate(self._file.fileno(), self._size)
                    self._file.seek(self._size)  # a later write (the short end) goes there
            raise
        self.records_written += len(lines)
        self._size += len(data)

    def _fail(self, error: OSError) -> None:
        """Keep the first write error; drop what waits (it will never be written)."""
        if self.failure is None:
            self.failure = error
            self._records_before_failure = self.records_written
        with self._lock:
            self._pending = []

    def _write_loop(self) -> None:
        # lowest real-time priority when allowed: preempted while holding the interpreter lock,
        # this thread would stall the streaming thread for a whole OS time slice
        with realtime_priority(priority=1), pinned(other_cpus()):
            self._write_until_closed()

    def _write_until_closed(self) -> None:
        # a write error is kept in `failure` for the session to stop on, never raised here
        while not self._closed and self.failure is None:
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            self._drain(fsync=False)

    def _sync(self) -> None:
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
    except OSError as error:  # a folder…
        from controller.filekinds import SESSION_LOG, misplaced

        raise DataError(misplaced(path, SESSION_LOG)
                        or f"{path}: cannot read the session log ({error})") from None
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
