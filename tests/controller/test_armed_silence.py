"""From ARM on, the firmware's watchdog counts every silence of the host, also the ones before
the first setpoint.

The season test (tests/records/test_season.py) failed under load with a WATCHDOG fault whose
report said "the host's longest silence was 5 ms": the host had written nothing for 50 ms between
ARM and its first heartbeat (a synced log event, and its main thread still at normal priority
with the garbage collector on), while the simulated bench ran on time; the report counted the
silences between setpoints only. Each test here makes that window slow on purpose, on the
simulated bench, with a deterministic stall longer than the 50 ms watchdog.

The simulated bench itself could also show the firmware a silence the host never left: when the
OS descheduled its tick loop, the bytes written meanwhile were registered at the tick they were
read, after the catch-up; the last test deschedules it on purpose (``freeze MS``).
"""

from __future__ import annotations

import gc
import re
import threading
import time

import numpy as np
import pytest

import controller.simbench as simbench_module
from controller.drive import drive
from controller.log import LogWriter, read_log
from controller.modes import ModeSettings
from controller.replay import summarise
from controller.session import Session
from tests.controller.gestures import make_gesture
from tests.controller.test_deadlines import TRANSIT_MS

STALL_S = 0.08  # longer than the 50 ms watchdog
WATCHDOG_MS = 50.0


def _drive(tmp_path):
    """A 0.6 s, 20° gesture at 250 Hz (150 setpoints: fewer than the 250 sends between two
    collections the stream runs itself), passive; (result, summary of its log)."""
    log = tmp_path / "session.jsonl"
    result = drive(make_gesture(duration_s=0.6, peak_deg=20.0), log, ModeSettings(rate_hz=250.0))
    return result, summarise(read_log(log))


def test_a_slow_garbage_collection_after_arm_does_not_starve_the_watchdog(tmp_path, monkeypatch):
    """Every automatic collection while armed takes 80 ms (a large heap on a busy machine: the
    season test's process took 25-70 ms for young collections and 0.9 s for a full one at load
    ≈ 10) and one is due at the next allocation: the armed phase runs without them."""
    collections = []
    armed = []

    def slow_collection(phase, info):
        if phase == "start" and armed and armed[0]._armed and len(collections) < 3:
            collections.append(info["generation"])
            time.sleep(STALL_S)

    arm = Session.arm

    def arm_with_a_large_heap(self):
        armed.append(self)
        gc.set_threshold(1)  # a collection at (nearly) every allocation
        arm(self)

    threshold = gc.get_threshold()
    monkeypatch.setattr(Session, "arm", arm_with_a_large_heap)
    gc.callbacks.append(slow_collection)
    try:
        result, summary = _drive(tmp_path)
    finally:
        gc.callbacks.remove(slow_collection)
        gc.set_threshold(*threshold)
    assert armed, "the session never armed"
    assert collections == []  # none ran between ARM and DISARM
    assert result.ok, result.message
    assert summary.faults == []
    # the collector is back on after the session
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_disk_slower_than_the_watchdog_does_not_starve_it(tmp_path, monkeypatch):
    """Every fsync takes 80 ms (a disk busy with other jobs): no event logged while armed
    waits for the disk; the end record still does (after DISARM)."""
    sync = LogWriter._sync
    synced_at = []

    def slow_sync(self):
        time.sleep(STALL_S)
        sync(self)
        synced_at.append(time.perf_counter())

    monkeypatch.setattr(LogWriter, "_sync", slow_sync)
    result, summary = _drive(tmp_path)
    assert result.ok, result.message
    assert summary.faults == []
    assert synced_at  # the slow disk was used: the connection and the end record are synced
    events = [event["kind"] for event in read_log(tmp_path / "session.jsonl").events]
    assert events[:3] == ["connected", "armed", "streaming"] and "disarmed" in events


def test_a_host_frozen_after_arm_still_trips_the_watchdog_and_the_report_says_so(tmp_path,
                                                                                monkeypatch):
    """The safety rule stands: a host that writes nothing for 80 ms after ARM (before its
    first setpoint) faults the firmware, and the report names the silence from ARM."""
    arm = Session.arm

    def arm_then_freeze(self):
        arm(self)
        time.sleep(STALL_S)

    monkeypatch.setattr(Session, "arm", arm_then_freeze)
    result, summary = _drive(tmp_path)
    assert not result.ok and result.reason == "fault", result.message
    assert summary.faults == ["WATCHDOG"]
    # from its last heartbeat to the telemetry reporting the fault: what the watchdog saw
    assert summary.longest_send_gap_ms >= WATCHDOG_MS
    assert summary.fault_cause() == (
        f" (the host sent nothing for {summary.longest_send_gap_ms:.0f} ms, longer than the "
        f"{WATCHDOG_MS:g} ms watchdog: a stalled host)")


@pytest.mark.parametrize("freeze_ms", [30, 80])
def test_a_descheduled_simulated_bench_sees_no_silence_the_host_never_left(tmp_path, monkeypatch,
                                                                           freeze_ms):
    """The simulated bench's tick loop descheduled for 30 or 80 ms mid-stream (``freeze``: what
    the OS does to a process on a busy machine, never to a microcontroller). Its receiver thread
    stamps each byte's arrival and the firmware, catching up its ticks, handles each at the tick
    it arrived in. Registered when read instead (after the freeze), 30 ms made freeze − lead = 10
    setpoints late while the host was on time, dropped the feed-forward and raised the peak
    torque from 36 to 51 N·m; 80 ms was a WATCHDOG fault with the host's longest silence 12 ms.

    The host's own record (the log: its sends' lateness, its longest silence) is the reference:
    on a loaded machine the host itself may fall behind or fall silent (a 40 ms stall of the
    streaming thread gave 31 misses by the host and 38 late at the firmware; a 47, 51 or 120 ms
    one a WATCHDOG fault), and the firmware must count what the host did, nothing the freeze
    added."""
    started = []
    start = simbench_module.start_simulated_bench

    def keep(*args, **kwargs):
        started.append(start(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(simbench_module, "start_simulated_bench", keep)
    log = tmp_path / "session.jsonl"
    result = drive(make_gesture(duration_s=1.0, peak_deg=30.0), log,
                   ModeSettings(rate_hz=1000.0), sim_inject=[(0.3, f"freeze {freeze_ms}")])
    # the tick loop was descheduled that long (the simulated bench's own measure), mid-stream:
    # the freeze came in force before the stream's end or stop
    assert started[0].tick_timing()["max_tick_lag_ms"] >= freeze_ms
    session = read_log(log)
    kinds = [event["kind"] for event in session.events]
    assert "injection" in kinds and kinds.index("injection") < kinds.index("stop"), kinds
    summary = summarise(session)
    # no fault, or a WATCHDOG the host's own silence explains: as long as the watchdog, less
    # the pty's transit (a write that took that much longer to arrive than the one before it
    # lengthens the silence the firmware sees; a 47 ms silence of the host tripped it once) ...
    assert result.ok or summary.faults == ["WATCHDOG"], result.message
    assert summary.faults == [] or summary.longest_send_gap_ms >= WATCHDOG_MS - TRANSIT_MS, \
        summary.lines()
    # ... and no late setpoint the host did not send late: the host counts a send later than
    # its lead less 1 ms, the firmware one that arrives after its due tick, which a send up to
    # the transit earlier may also do (as in test_deadlines.py)
    lateness_ms = sent_late_ms(session)
    threshold_ms = summary.miss_threshold_ms
    near = int(np.count_nonzero((lateness_ms > threshold_ms - TRANSIT_MS)
                                & (lateness_ms <= threshold_ms)))
    assert summary.firmware_counters["late_setpoints"] <= summary.deadline_misses + near, (
        summary.firmware_counters["late_setpoints"], summary.deadline_misses, near)


def sent_late_ms(session) -> np.ndarray:
    """How late (ms) the host wrote each setpoint of the plan after its slot's send deadline,
    from the log (what ``controller.replay.summarise`` counts its deadline misses on)."""
    streaming = next(event for event in session.events if event["kind"] == "streaming")
    period_ms = 1000.0 / streaming["rate_hz"]
    planned = np.asarray(session.setpoints["rep"]) >= 0  # not a stop ramp (rep −1)
    sent_s = np.asarray(session.setpoints["host_time"])[planned]
    slots = np.asarray(session.setpoints["k"])[planned]
    return (sent_s - streaming["t0_host_time"]) * 1000.0 - slots * period_ms


def test_an_injection_the_simulated_bench_refuses_is_said_in_the_result(tmp_path):
    """A dry run's injection the simulated bench does not apply (here one the command line
    would have refused: drive() called directly) leaves the rehearsal without that fault: the
    session goes on, and its result and log say so in one line, no traceback from the timer."""
    failures_in_threads = []
    previous_hook = threading.excepthook
    threading.excepthook = failures_in_threads.append
    try:
        log = tmp_path / "session.jsonl"
        result = drive(make_gesture(duration_s=0.5, peak_deg=20.0), log,
                       ModeSettings(rate_hz=1000.0), sim_inject=[(0.1, "levitate 3")])
    finally:
        threading.excepthook = previous_hook
    assert failures_in_threads == []
    assert result.ok
    assert re.search(r" \(rehearsal incomplete: /dev/\S+: the simulated bench has no command "
                     r"'levitate 3'\)$", result.message), result.message
    errors = [e for e in read_log(log).events if e["kind"] == "error"]
    assert len(errors) == 1 and errors[0]["message"].endswith("has no command 'levitate 3'")


def test_injections_are_logged_in_force_and_one_after_the_end_is_said(tmp_path):
    """A rehearsal's log tells its injected faults from real ones; an injection timed after the
    session's end never happened, and the result says so."""
    log = tmp_path / "session.jsonl"
    result = drive(make_gesture(duration_s=0.5, peak_deg=20.0), log, ModeSettings(rate_hz=1000.0),
                   sim_inject=[(0.1, "delay 0"), (100.0, "driver on")])
    assert result.ok
    assert result.message.endswith("(rehearsal incomplete: the injection 'driver on' at 100 s "
                                   "came after the session's end)")
    events = read_log(log).events
    assert [e["message"] for e in events if e["kind"] == "injection"] == ["delay 0"]
