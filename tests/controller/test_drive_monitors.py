"""Live monitors, the e-stop key and fault clearing, on the simulated bench."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.errors import BenchError
from bemore.paths import default_config
from controller.drive import drive
from controller.log import read_log
from controller.modes import ModeSettings
from controller.simbench import start_simulated_bench
from tests.controller.test_drive_simbench import InjectAfter, bench_state


def with_streaming(bench, **changes):
    return bench.model_copy(update={"streaming": bench.streaming.model_copy(update=changes)})


def with_limits(bench, **changes):
    return bench.model_copy(update={"limits": bench.limits.model_copy(update=changes)})


def test_tracking_monitor_stops_the_session(setpoint_file, tmp_path, bench):
    # the position loop lags the fast 160° gesture by ~0.4° RMS: a 0.2° limit must trip
    strict = with_streaming(bench, max_tracking_error_deg=0.2)
    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, tmp_path / "s.jsonl", port=simulated.port, bench=strict)
        state = bench_state(simulated.port)
    assert result.reason == "tracking"
    assert result.message.startswith("tracking error ")
    assert "exceeds 0.2 deg at t " in result.message
    assert result.message.endswith("ramped down over 0.3 s and disarmed")
    assert state == ("DISARMED", "NONE", 0.0)


def test_torque_monitor_stops_the_session(setpoint_file, tmp_path, bench):
    # the bench needs ~13-19 N·m to move the arms through the gesture: a 5 N·m limit trips
    # (guided: no feed-forward, which the pre-flight would refuse against 5 N·m)
    weak = with_limits(bench, max_torque_nm=5.0)
    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, tmp_path / "s.jsonl", ModeSettings(mode="guided"),
                       port=simulated.port, bench=weak)
        state = bench_state(simulated.port)
    assert result.reason == "torque"
    assert result.message.startswith("measured torque ")
    assert "exceeds 5 N·m" in result.message
    assert state == ("DISARMED", "NONE", 0.0)


def test_estop_key_then_fault_must_be_cleared(setpoint_file, tmp_path):
    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, tmp_path / "a.jsonl", port=simulated.port,
                       view=lambda session: InjectAfter(session, 0.3, lambda: session.request_stop(
                           "estop", "e-stop key pressed")))
        state = bench_state(simulated.port)
        with pytest.raises(BenchError, match="the bench has fault ESTOP_MESSAGE latched; check "
                                             "the bench, then clear it with --clear-fault"):
            drive(setpoint_file, tmp_path / "b.jsonl", port=simulated.port)
        # cleared, but the arms coasted after the cut: the bench refuses to start from there
        with pytest.raises(BenchError, match=r"the bench is at \d+\.\d deg and the gesture "
                                             r"starts at 0\.0 deg .*: move it to the start"):
            drive(setpoint_file, tmp_path / "c.jsonl", port=simulated.port, clear_fault=True)
        after = bench_state(simulated.port)
    assert result.reason == "estop" and result.exit_code == 3
    assert result.message == ("e-stop key pressed; ESTOP sent: torque cut at once (fault "
                              "ESTOP_MESSAGE latched)")
    assert state[:2] == ("FAULT", "ESTOP_MESSAGE")
    assert after == ("DISARMED", "NONE", 0.0)
    kinds = [event["kind"] for event in read_log(tmp_path / "c.jsonl").events]
    assert kinds[:2] == ["connected", "fault cleared"]


def test_live_view_renders_and_the_exit_code_says_how_it_ended(setpoint_file, tmp_path, bench):
    """With the view on (not a terminal: no keys), a session stopped by a fault exits with 3."""
    config = tmp_path / "bench.toml"
    source = default_config("bench.toml")
    config.write_text(source.read_text().replace("max_torque_nm = 240.0", "max_torque_nm = 5.0"))
    result = CliRunner().invoke(cli, ["drive", str(setpoint_file), "--log",
                                      str(tmp_path / "s.jsonl"), "--bench-config", str(config),
                                      "--mode", "guided"])
    assert result.exit_code == 3
    assert "bemore drive — e/space: E-STOP, q or Ctrl-C: stop" in result.stderr
    assert "angles in deg, torques in N·m; misses: sent after due − 1 ms" in result.stderr
    assert "FAULT" not in result.stderr  # the host stopped first: the firmware never faulted
    assert result.stderr.strip().splitlines()[-1].startswith("bemore: error: measured torque")
