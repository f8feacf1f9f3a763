"""A session log that cannot be written (a full disk, an I/O error) stops the session under
control: ramp down, DISARM, one line naming the log and the OS error, exit 3; before ARM it
refuses (exit 2) with nothing armed; the log keeps the whole records written before.

The disk fills for real where it can without mounting anything: the log's descriptor pointed at
/dev/full (the kernel answers ENOSPC). Elsewhere the real file is wrapped so that a write takes
the bytes that still fit and the next one raises ENOSPC, as write(2) does on a full disk (a
short write, then the error); the session, the simulated bench and the CLI are the real ones.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.paths import default_config
from controller.drive import drive
from controller.errors import DataError
from controller.log import LogWriter, read_log
from controller.replay import summarise
from controller.session import Session
from controller.simbench import SimFaults, start_simulated_bench
from tests.controller.test_drive_simbench import bench_state
from tests.waiting import eventually

ENOSPC = os.strerror(errno.ENOSPC)  # "No space left on device"


class _DiskFullAfter:
    """The log's real file on a disk with ``room`` bytes left after its first ``free_writes``
    writes: a write takes what still fits, the next raises ENOSPC (write(2) on a full disk)."""

    def __init__(self, file, room: int, free_writes: int = 0):
        self._file = file
        self.room = room
        self.free_writes = free_writes

    def write(self, data) -> int:
        if self.free_writes > 0:
            self.free_writes -= 1
            return self._file.write(data)
        if self.room <= 0:
            raise OSError(errno.ENOSPC, ENOSPC)
        written = self._file.write(data[:self.room])
        self.room -= written
        return written

    def __getattr__(self, name):
        return getattr(self._file, name)


def _disk_full_after(monkeypatch, room: int, free_writes: int = 0) -> list[_DiskFullAfter]:
    """Every session log opened from now on is on a disk with ``room`` bytes left (after
    ``free_writes`` writes); returns the wrapped files as they are opened."""
    opened = LogWriter._open
    files: list[_DiskFullAfter] = []

    def open_on_a_full_disk(self):
        files.append(_DiskFullAfter(opened(self), room, free_writes))
        return files[-1]

    monkeypatch.setattr(LogWriter, "_open", open_on_a_full_disk)
    return files


def _whole_records(path: Path) -> list[dict]:
    """Every line of the log a JSON record, the file ending with a newline (no cut record)."""
    text = path.read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


_STOPPED = re.compile(r"(.+): cannot write the session log \(" + ENOSPC
                      + r" after (\d+) records\); ramped down over 0\.3 s and disarmed")


def test_a_log_that_fills_its_disk_stops_the_session_under_control(setpoint_file, tmp_path,
                                                                   monkeypatch,
                                                                   loaded_machine_bench):
    """40 kB left for the log: it fills 0.3-0.5 s into the 2.4 s gesture; the session ramps
    down and disarms instead of streaming on unlogged, and says so."""
    _disk_full_after(monkeypatch, room=40_000)
    log_path = tmp_path / "session.jsonl"
    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, log_path, port=simulated.port, bench=loaded_machine_bench)
        state = bench_state(simulated.port)  # a bench left armed would read ARMED or FAULT
    assert state == ("DISARMED", "NONE", 0.0)
    assert result.reason == "log write failed" and result.exit_code == 3, result.message
    match = _STOPPED.fullmatch(result.message)
    assert match and match[1] == str(log_path), result.message
    records = _whole_records(log_path)
    assert len(records) == int(match[2])  # the records the message counts are all there
    log = read_log(log_path)
    assert not log.truncated and log.end is None  # no room left for an end record
    # stopped early: the plan has 600 setpoints at 250 Hz (its stop ramp is not counted here)
    assert len(log.setpoints["k"]) <= result.sent < 600


def test_a_dry_run_stops_too_and_its_simulated_bench_ends_disarmed(setpoint_file, tmp_path,
                                                                   monkeypatch,
                                                                   loaded_machine_bench):
    """The dry run's simulated bench (started and stopped by drive) traces every tick: once
    the session is over, and before drive stops the bench, it traces DISARMED, no fault, no
    torque (it had been armed)."""
    _disk_full_after(monkeypatch, room=40_000)
    log_path, trace = tmp_path / "session.jsonl", tmp_path / "trace.txt"

    def rows() -> list[list[int]]:  # the whole lines (the bench's buffer may cut the last)
        text = trace.read_text()
        return [[int(cell) for cell in line.split()]
                for line in text[:text.rfind("\n") + 1].splitlines()]

    @contextlib.contextmanager
    def after_the_session(session):  # drive's view: left after the stop, the bench still up
        yield
        eventually(rows, lambda traced: traced and traced[-1][1:] == [0, 0, 0],
                   "a traced tick DISARMED, no fault, no torque")  # flushed every 10 ms

    result = drive(setpoint_file, log_path, bench=loaded_machine_bench, view=after_the_session,
                   sim_faults=SimFaults(trace=str(trace)))
    assert result.reason == "log write failed" and result.exit_code == 3, result.message
    assert _STOPPED.fullmatch(result.message), result.message
    assert 1 in {row[1] for row in rows()}  # ARMED before


def test_the_command_says_it_in_one_line_and_exits_3(setpoint_file, tmp_path, monkeypatch):
    """`bemore drive` (dry run): the summary, then one error line naming the log and the OS
    error and saying the bench was ramped down and disarmed; replay reads what the log kept."""
    config = tmp_path / "bench.toml"  # the loaded machine's stream (conftest), as a file
    text = default_config("bench.toml").read_text()
    for old, new in (("rate_hz = 1000.0", "rate_hz = 250.0"), ("watchdog_ms = 50.0",
                     "watchdog_ms = 500.0"), ("lead_ms = 20 ", "lead_ms = 100 ")):
        assert old in text
        text = text.replace(old, new)
    config.write_text(text)
    _disk_full_after(monkeypatch, room=40_000)
    log = tmp_path / "session.jsonl"
    result = CliRunner().invoke(cli, ["drive", str(setpoint_file), "--log", str(log),
                                      "--no-view", "--bench-config", str(config)])
    assert result.exit_code == 3, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("bemore: error: ")
    match = _STOPPED.fullmatch(line.removeprefix("bemore: error: "))
    assert match and match[1] == str(log), line
    assert result.stdout.startswith("sent ")
    assert len(_whole_records(log)) == int(match[2])
    replayed = CliRunner().invoke(cli, ["replay", str(log)])
    assert replayed.exit_code == 0, replayed.output
    # this disk is not full (the emulated one was): the reader cannot tell more than that
    assert "end         no end record: the host stopped abruptly" in replayed.stdout


def test_replay_stream_stops_the_same_way(setpoint_file, tmp_path, monkeypatch,
                                          loaded_machine_bench):
    """`bemore replay LOG --stream --log-out FILE` on a disk that fills."""
    source = tmp_path / "source.jsonl"
    assert drive(setpoint_file, source, bench=loaded_machine_bench).ok
    _disk_full_after(monkeypatch, room=40_000)
    out = tmp_path / "again.jsonl"
    result = CliRunner().invoke(cli, ["replay", str(source), "--stream", "--log-out", str(out)])
    assert result.exit_code == 3, result.output
    [line] = result.stderr.strip().splitlines()
    match = _STOPPED.fullmatch(line.removeprefix("bemore: error: "))
    assert match and match[1] == str(out), line
    assert len(_whole_records(out)) == int(match[2])


def test_a_log_that_cannot_take_its_header_is_refused_before_connecting(setpoint_file,
                                                                         tmp_path, monkeypatch):
    """No room at all: exit 2, nothing armed, no half-written log left to block the name."""
    _disk_full_after(monkeypatch, room=0)
    log_path = tmp_path / "session.jsonl"
    with start_simulated_bench() as simulated:
        with pytest.raises(DataError) as refused:
            drive(setpoint_file, log_path, port=simulated.port)
        state = bench_state(simulated.port)
    assert str(refused.value) == f"{log_path}: cannot write the session log ({ENOSPC})"
    assert refused.value.exit_code == 2
    assert state == ("DISARMED", "NONE", 0.0)
    assert not log_path.exists()


def test_a_log_that_fails_before_arm_refuses_to_arm(setpoint_file, tmp_path, monkeypatch):
    """The header fits, the connection's records do not: `bemore drive` refuses before ARM
    (exit 2, one line), ARM is never sent, the header stays."""
    _disk_full_after(monkeypatch, room=0, free_writes=1)
    armed = []
    monkeypatch.setattr(Session, "arm", lambda self: armed.append(True))
    log = tmp_path / "session.jsonl"
    with start_simulated_bench() as simulated:
        result = CliRunner().invoke(cli, ["drive", str(setpoint_file), "--log", str(log),
                                          "--no-view", "--port", simulated.port])
        state = bench_state(simulated.port)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        f"bemore: error: {log}: cannot write the session log ({ENOSPC} after 1 records): "
        "refused before arming; the bench was not armed"]
    assert armed == [] and state == ("DISARMED", "NONE", 0.0)
    assert [record["type"] for record in _whole_records(log)] == ["header"]


def test_the_writer_thread_keeps_the_kernels_enospc(tmp_path):
    """The log's descriptor pointed at /dev/full mid-session: the kernel's ENOSPC, met by the
    writer thread, is kept for the session (not raised, not lost), nothing is written after
    it, and closing says nothing more: the records before stay whole. (Linux's /dev/full, as
    the bench side's pseudo-terminals are Linux's: the suite runs there.)"""
    path = tmp_path / "session.jsonl"
    with LogWriter(path, {"test": "dev full"}) as log:
        log.event("connected", "on disk before the disk fills")
        full = os.open("/dev/full", os.O_WRONLY)
        try:
            os.dup2(full, log._file.fileno())  # the same descriptor, now on a full device
        finally:
            os.close(full)
        log.setpoint(log.origin + 0.001, k=0, seq=0, time_ms=0, position_urad=0,
                     velocity_urad_s=0, torque_mNm=0, rep=1)
        log.kick()
        failure = eventually(lambda: log.failure, lambda error: error is not None,
                             "the writer thread meeting ENOSPC")
        log.event("stop", "after the failure", sync=False)
        log.end("log write failed", message="m")
    assert failure.errno == errno.ENOSPC
    assert log.failure_text() == (f"{path}: cannot write the session log ({ENOSPC} after "
                                  "2 records)")
    assert [record["type"] for record in _whole_records(path)] == ["header", "event"]


def test_a_record_cut_by_the_full_disk_is_cut_off_and_a_short_end_written_if_room_is_made(
        tmp_path, monkeypatch):
    """A write that fills the disk mid-record leaves whole lines only; if room appears by the
    end (here: 1 kB freed), a short end record says what happened, and replay says it."""
    files = _disk_full_after(monkeypatch, room=0, free_writes=1)
    path = tmp_path / "session.jsonl"
    with LogWriter(path, {"test": "cut"}) as log:
        files[0].room = 50  # a setpoint record is longer: cut in its middle
        for k in range(3):
            log.setpoint(log.origin + k * 0.001, k=k, seq=k, time_ms=k, position_urad=k,
                         velocity_urad_s=0, torque_mNm=0, rep=1)
        log.flush()
        assert log.failure is not None and log.records_written == 1
        assert [record["type"] for record in _whole_records(path)] == ["header"]
        files[0].room = 1000
        log.end("tracking", message="tracking error 9.0 deg exceeds 8.0 deg")
    records = _whole_records(path)
    assert [record["type"] for record in records] == ["header", "end"]
    assert records[1]["reason"] == "tracking"
    assert records[1]["log_error"] == (f"{path}: cannot write the session log ({ENOSPC} after "
                                       "1 records)")
    end = summarise(read_log(path)).end
    assert end.startswith("tracking: tracking error 9.0 deg exceeds 8.0 deg (")
    assert "the records between the failure and this end are not in the log" in end


def test_a_log_that_fails_at_its_last_fsync_fails_the_session(setpoint_file, tmp_path,
                                                              monkeypatch, loaded_machine_bench):
    """An I/O error on the end record's fsync (after the stream's last check): the gesture
    completed, but its log may not be on disk, so the result is not a success (exit 3) and
    says why."""
    end, sync = LogWriter.end, LogWriter._sync

    def end_then_fail(self, reason, **extra):
        self.disk_failed = True
        end(self, reason, **extra)

    def failing_sync(self):
        if getattr(self, "disk_failed", False):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        sync(self)

    monkeypatch.setattr(LogWriter, "end", end_then_fail)
    monkeypatch.setattr(LogWriter, "_sync", failing_sync)
    log_path = tmp_path / "session.jsonl"
    result = drive(setpoint_file, log_path, bench=loaded_machine_bench)
    assert result.reason == "log write failed" and result.exit_code == 3
    records = _whole_records(log_path)
    assert result.message == (
        f"gesture completed: ramped down and disarmed; {log_path}: cannot write the session "
        f"log ({os.strerror(errno.EIO)} after {len(records)} records)")


def test_a_byte_dump_that_fills_its_disk_stops_the_session_too(setpoint_file, tmp_path,
                                                               monkeypatch, loaded_machine_bench):
    """`--dump` on a disk that fills: before, the link's threads raised, the stop sequence
    failed and the bench was left to its watchdog. Now the same controlled stop; the session
    log, on another disk, is whole and ends with it; the dump decodes up to the failure."""
    from controller.dump import DumpWriter, decode_dump

    init = DumpWriter.__init__

    def on_a_disk_that_fills(self, path):
        init(self, path)
        self._file = _DiskFullAfter(self._file, room=20_000)

    monkeypatch.setattr(DumpWriter, "__init__", on_a_disk_that_fills)
    log_path, dump = tmp_path / "session.jsonl", tmp_path / "session.dump"
    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, log_path, port=simulated.port, bench=loaded_machine_bench,
                       dump=dump)
        state = bench_state(simulated.port)
    assert state == ("DISARMED", "NONE", 0.0)
    assert result.reason == "log write failed" and result.exit_code == 3
    assert result.message == (f"{dump}: cannot write the byte dump ({ENOSPC}); ramped down "
                              "over 0.3 s and disarmed")
    log = read_log(log_path)
    assert log.end["reason"] == "log write failed" and log.end["message"] == result.message
    assert [event["kind"] for event in log.events][-4:] == ["stop", "flush", "ramp down",
                                                            "disarmed"]
    messages, _ = decode_dump(dump)
    # the dump stopped with its disk: fewer messages than the log's setpoints and telemetry
    assert 100 < len(messages) < len(log.setpoints["k"]) + len(log.telemetry["host_time"])
