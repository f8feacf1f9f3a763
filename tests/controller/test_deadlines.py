"""The host's deadline misses against the firmware's own late-setpoint counter, on the simulated
bench (the real firmware core behind a pty).

A host stall is injected between a slot's deadline and its write: the host must count it as a
miss (with the slots it skipped while stalled), and the firmware must count exactly the late
setpoints the host sent (same tolerance, protocol.toml [limits] late_tolerance_ms).
"""

from __future__ import annotations

import gc
import os
import time

import numpy as np

from bemore.settings import load_bench
from controller.log import LogWriter, read_log
from controller.modes import ModeSettings, build_plan
from controller.protocol import Message, load_spec
from controller.replay import summarise
from controller.scheduler import Scheduler
from controller.session import COMMANDED_RING, Session
from controller.simbench import start_simulated_bench
from tests.controller.gestures import make_gesture

STALL_SLOT = 400
STALL_S = 0.020  # well past the 5 ms tolerance, well within the 50 ms watchdog


class StallingScheduler(Scheduler):
    """The real scheduler, frozen for STALL_S right after the deadline of slot STALL_SLOT."""

    def wait_for(self, k: int) -> bool:
        on_time = super().wait_for(k)
        if on_time and k == STALL_SLOT:
            time.sleep(STALL_S)
        return on_time


def test_a_host_stall_is_a_miss_for_the_host_and_a_late_setpoint_for_the_firmware(tmp_path):
    tolerance_ms = load_spec().limits["late_tolerance_ms"]
    settings = ModeSettings(rate_hz=1000.0, ramp_down_s=0.3)
    plan = build_plan(make_gesture(duration_s=1.0, peak_deg=30.0), settings)
    log_path = tmp_path / "session.jsonl"
    affinity, policy = os.sched_getaffinity(0), os.sched_getscheduler(0)
    with start_simulated_bench() as simulated, LogWriter(log_path, {"test": "stall"}) as log:
        session = Session(simulated.port, load_bench(), log, settings)
        try:
            session.connect()
            session.arm()
            scheduler = StallingScheduler(1_000_000)
            result = session.stream(plan, scheduler)
        finally:
            session.close()
    assert result.ok, result.message
    # the stream gave back what it took: collector, CPU affinity, scheduling policy
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert os.sched_getaffinity(0) == affinity and os.sched_getscheduler(0) == policy
    lateness_ms = (scheduler.send_ns - (scheduler.t0_ns + scheduler.slots * 1_000_000)) * 1e-6
    stalled = int(np.flatnonzero(scheduler.slots == STALL_SLOT)[0])
    assert lateness_ms[stalled] > STALL_S * 1000  # written after the stall
    # the host skipped the stale slots instead of bursting them
    assert scheduler.slots[stalled + 1] - STALL_SLOT >= STALL_S * 1000 - 1
    # misses: the late slot, and the skipped slots stale for more than the tolerance (≈ 15)
    expected = STALL_S * 1000 - tolerance_ms + 1
    assert expected - 1 <= result.timing["deadline_misses"] <= expected + 3
    # the firmware counted as late exactly the setpoints the host sent past the tolerance
    summary = summarise(read_log(log_path))
    sent_late = int(np.count_nonzero(lateness_ms > tolerance_ms))
    assert sent_late >= 1
    assert summary.firmware_counters["late_setpoints"] == sent_late
    # and the replay of the log finds the same misses as the live session
    assert summary.deadline_misses == result.timing["deadline_misses"]


class _HelloOnly:
    """A link that answers HELLO with a given mcu_ticks (the rest of Session is not used)."""

    def __init__(self, mcu_ticks: int):
        self.mcu_ticks = mcu_ticks

    def request(self, name, reply, timeout_s, **fields):
        return Message("HELLO_REPLY", 0, {"mcu_ticks": self.mcu_ticks})


def test_a_hello_reply_one_tick_behind_the_telemetry_is_not_a_reset(tmp_path):
    """The firmware answers HELLO before it ticks: its reply may carry one tick less than the
    telemetry frame sent in the same tick (handled first). A restart starts again from 0."""
    with LogWriter(tmp_path / "log.jsonl", {"test": "probe"}) as log:
        session = Session("/dev/null", load_bench(), log, ModeSettings())
        session._ticks_seen = 571
        session.link = _HelloOnly(570)
        assert session._probe_reset(timeout_s=0.1) == ""
        session.link = _HelloOnly(3)
        assert session._probe_reset(timeout_s=0.1) == "mcu_ticks 3 after 571"


def test_the_tracking_reference_is_a_bounded_ring(tmp_path):
    """Only the last COMMANDED_RING ms of commanded positions are kept, however long the session
    (a session of 1000 repetitions must not grow without bound)."""
    with LogWriter(tmp_path / "log.jsonl", {"test": "ring"}) as log:
        session = Session("/dev/null", load_bench(), log, ModeSettings())
        for time_ms in range(3 * COMMANDED_RING):
            session._remember({"time_ms": time_ms, "position_urad": 10 * time_ms})
        last = 3 * COMMANDED_RING - 1
        assert session._commanded(last) == 10 * last
        assert session._commanded(last - COMMANDED_RING + 1) == 10 * (last - COMMANDED_RING + 1)
        assert session._commanded(last - COMMANDED_RING) is None  # overwritten
        assert len(session._commanded_time) == COMMANDED_RING
