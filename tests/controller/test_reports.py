"""One truth in the reports: drive's summary and replay agree on every count, the live view's
columns are for one instant, a fault after a stalled host says so; the simulated athlete."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from bemore.settings import load_bench
from controller.drive import drive
from controller.log import LogWriter, read_log
from controller.modes import ModeSettings, build_plan
from controller.protocol import Message, load_spec
from controller.replay import summarise
from controller.scheduler import miss_threshold_ns
from controller.session import Session
from controller.simbench import AthleteSection, athlete_effort, start_simulated_bench
from tests.controller.gestures import make_gesture
from tests.controller.test_deadlines import STALL_SLOT, StallingScheduler


def test_drive_and_replay_agree_on_every_count(setpoint_file, tmp_path):
    log = tmp_path / "s.jsonl"
    result = drive(setpoint_file, log, ModeSettings(mode="assistive", load_pct=60.0, reps=2,
                                                    rest_s=0.2))
    assert result.ok, result.message
    summary = summarise(read_log(log))
    assert summary.setpoints_sent == result.sent
    assert summary.telemetry_frames == result.telemetry
    assert summary.firmware_deadline_misses == result.firmware_late
    assert summary.deadline_misses == result.timing["deadline_misses"]
    assert summary.late_sends == result.timing["late_sends"]
    assert summary.shares == {"athlete": pytest.approx(0.4), "bench": pytest.approx(0.6)}
    text = "\n".join(summary.lines())
    assert (f"deadline misses: {result.firmware_late} at the firmware (after their due tick), "
            f"{result.timing['deadline_misses']} by the host") in text


def test_the_live_view_columns_are_for_one_instant(tmp_path):
    """Telemetry names the setpoint in force; the view's t, cmd, τ cmd are that setpoint's (not
    the last one sent, 20 ms further on), so err = meas − cmd on every row."""
    with LogWriter(tmp_path / "log.jsonl", {"test": "view"}) as log:
        session = Session("/dev/null", load_bench(), log, ModeSettings())
        session._armed = True
        for time_ms in range(100):  # sent up to 99 ms: 1 mrad and 10 mN·m per ms
            session._remember({"time_ms": time_ms, "position_urad": 1000 * time_ms,
                               "torque_mNm": 10 * time_ms})
        fields = {"seq_echo": 0, "mcu_ticks": 500, "setpoint_time_ms": 79,
                  "position_urad": 79_500, "velocity_urad_s": 0, "torque_mNm": 900, "state": 1,
                  "fault": 0, "limit_flags": 0, "bad_frames": 0, "late_setpoints": 0,
                  "seq_gaps": 0}
        session._on_telemetry(Message("TELEMETRY", 0, fields), time.perf_counter())
        status = session.status
        assert status.t_s == pytest.approx(0.079)
        assert status.commanded_rad == pytest.approx(0.079)  # in force, not the 0.099 sent
        assert status.commanded_torque_nm == pytest.approx(0.79)
        assert status.measured_rad == pytest.approx(0.0795)
        assert status.tracking_error_rad == pytest.approx(
            status.measured_rad - status.commanded_rad, abs=1e-12)
        # disarmed: nothing is commanded, so no stale command beside the new measurement
        session._armed = False
        session._on_telemetry(Message("TELEMETRY", 1, fields | {"state": 0, "mcu_ticks": 510,
                                                                "position_urad": 12_000}),
                              time.perf_counter())
        assert status.measured_rad == pytest.approx(0.012)
        assert math.isnan(status.commanded_rad) and math.isnan(status.tracking_error_rad)


def test_a_watchdog_fault_after_a_stalled_host_says_so(tmp_path):
    # the host stops sending for 150 ms: the firmware's queue runs dry 20 ms (lead) later and
    # its 50 ms watchdog trips; the log tells how long the host was silent
    settings = ModeSettings(mode="guided", rate_hz=1000.0, ramp_down_s=0.3)
    plan = build_plan(make_gesture(duration_s=1.0, peak_deg=30.0), settings)
    bench = load_bench()
    log_path = tmp_path / "session.jsonl"
    header = {"bench": bench.model_dump(), "settings": {"mode": "guided", "rate_hz": 1000.0}}
    with start_simulated_bench() as simulated, LogWriter(log_path, header) as log:
        session = Session(simulated.port, bench, log, settings)
        try:
            session.connect()
            with session.realtime():  # from before ARM, as Session.run does
                session.arm()
                scheduler = StallingScheduler(1_000_000, miss_threshold_ns(20_000_000))
                scheduler.stall_s = 0.150
                result = session.stream(plan, scheduler)
        finally:
            session.close()
    assert result.reason == "fault" and "WATCHDOG" in result.message
    summary = summarise(read_log(log_path))
    assert summary.faults == ["WATCHDOG"]
    assert summary.longest_send_gap_ms >= 150.0
    cause = summary.fault_cause()
    assert cause.startswith(f" (the host sent nothing for {summary.longest_send_gap_ms:.0f} ms")
    assert cause.endswith("a stalled host)")
    sent = read_log(log_path).setpoints
    assert STALL_SLOT in sent["k"].tolist()


def test_the_simulated_athlete_gives_her_share_with_noise_and_fatigue():
    settings = ModeSettings(mode="assistive", load_pct=40.0, reps=3, rest_s=0.5)
    plan = build_plan(make_gesture(), settings)
    athlete = AthleteSection(effort_noise=0.05, effort_time_s=0.2, fatigue_per_rep=0.1, seed=4)
    effort, reps = np.asarray(athlete_effort(plan, athlete)), np.asarray(plan.rep)
    for rep in (1, 2, 3):
        mean = effort[reps == rep].mean()
        assert mean == pytest.approx(0.9 ** (rep - 1), abs=0.05)  # fatigue 10 % per repetition
    noise = effort[reps == 1] - 1.0
    assert 0.01 < noise.std() < 0.1  # 5 % RMS, correlated over 0.2 s: a few independent draws
    assert np.array_equal(effort, athlete_effort(plan, athlete))  # seeded


def test_a_dry_run_shows_the_athletes_shortfall_in_the_measured_torque(setpoint_file, tmp_path):
    # passive: she gives nothing, the bench everything; guided: she gives everything (with
    # noise), the bench only corrects. The measured motor torque follows that split.
    peaks = {}
    for mode in ("passive", "guided"):
        log = tmp_path / f"{mode}.jsonl"
        result = drive(setpoint_file, log, ModeSettings(mode=mode))
        assert result.ok, result.message
        peaks[mode] = summarise(read_log(log)).peak_measured_torque_nm
    need = np.abs(make_gesture().torque_nm).max()  # 26.5 N·m
    # the motor also moves the axis itself (1 kg·m², friction: ~10 N·m on this gesture)
    assert need < peaks["passive"] < need + 15.0
    assert math.isfinite(peaks["guided"]) and peaks["guided"] < peaks["passive"] - 0.5 * need


def test_replay_counts_the_frames_of_each_limit_flag_and_says_which_only_count(tmp_path):
    """Two frames slew-limited (one also clamped): the summary names both flags with their
    frame counts; only the slew limit is a counted flag, the clamp is a stop criterion."""
    spec = load_spec()
    slew, clamp = spec.limit_flags["SLEW_LIMITED"], spec.limit_flags["TORQUE_CLAMPED"]
    base = {"seq_echo": 0, "mcu_ticks": 0, "setpoint_time_ms": 0, "position_urad": 0,
            "velocity_urad_s": 0, "torque_mNm": 0, "state": 1, "fault": 0, "limit_flags": 0,
            "bad_frames": 0, "late_setpoints": 0, "seq_gaps": 0}
    with LogWriter(tmp_path / "log.jsonl", {"settings": {"mode": "passive"}}) as log:
        for tick, flags in enumerate((0, slew, slew | clamp, 0)):
            log.telemetry(time.perf_counter(), base | {"mcu_ticks": tick, "limit_flags": flags})
    summary = summarise(read_log(tmp_path / "log.jsonl"))
    assert summary.limit_flag_frames == {"SLEW_LIMITED": 2, "TORQUE_CLAMPED": 1}
    text = summary.limit_flag_text()
    assert "SLEW_LIMITED in 2 frames" in text and "TORQUE_CLAMPED in 1 frame" in text
    assert "(SLEW_LIMITED: counted, not a stop criterion" in text


def test_replay_says_the_simulated_athlete_gives_nothing_in_passive_mode():
    from controller.replay import Summary

    fields = dict.fromkeys(("log", "athlete", "gesture", "mode", "start_utc", "firmware"), "")
    numbers = dict.fromkeys(("duration_s", "setpoints_sent", "telemetry_frames",
                             "tracking_rms_deg", "tracking_max_deg", "peak_commanded_torque_nm",
                             "peak_measured_torque_nm", "deadline_misses", "late_sends",
                             "skipped", "period_error_p50_ms", "period_error_p99_ms",
                             "period_error_max_ms"), 0)
    sim = {"effort_noise": 0.05, "fatigue_per_rep": 0.03}
    passive = Summary(**fields, **numbers, shares={"athlete": 0.0, "bench": 1.0},
                      simulated_athlete=sim).torque_explanation()
    assert "she gives no effort in this mode" in passive[-1] and "noise" not in passive[-1]
    assisted = Summary(**fields, **numbers, shares={"athlete": 0.4, "bench": 0.6},
                       simulated_athlete=sim).torque_explanation()
    assert "effort noise 5% RMS, fatigue 3% per repetition" in assisted[-1]
