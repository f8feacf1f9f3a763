"""End to end: `bemore drive --port` streams a synthesized gesture to the emulated ATmega2560.

The gesture is the one `bemore synthesize` finds for the default athlete (t_f 2.963 s,
t_flexmax 1.729 s, φ_max 160°: a full 360° circle); re-running the optimiser takes 15-30 s, so
the test replays that design through the synthesis model and its setpoint writer (the same code
path as `bemore synthesize`, minus the search).

Pacing: the harness never runs ahead of the wall clock, but on a loaded 2-core machine it can run
slower than real time (0.4-1x was measured while other suites ran). The host streams in wall
time, so a slow emulation receives the stream faster, in emulated time, than it was planned.
The test therefore streams at 500 Hz in half-speed slow motion (`--rate 500 --speed 0.5`): an
emulation at ≥ 0.5x real time still sees the gesture at no more than its designed pace and the
link at ≤ 1 kHz, which the firmware sustains without late setpoints (test_avr_stream.py).
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from controller.log import read_log
from controller.replay import summarise
from tests.avr.emulated import SPEC, Client
from tests.waiting import eventually

DESIGN = {"final_time_s": 2.963320, "flexion_end_time_s": 1.728963, "max_flexion_deg": 160.0}


@pytest.fixture(scope="module")
def synthesized_setpoints(tmp_path_factory):
    """setpoints.csv of the synthesized gesture (and the rotation it makes about the bar, deg)."""
    from bemore.settings import load_identification, load_synthesis
    from bemore.synthesis.athlete import default_parameters
    from bemore.synthesis.gesture import GestureParameters
    from bemore.synthesis.outputs import write_setpoints
    from bemore.synthesis.problem import GestureProblem
    from bemore.synthesis.synthesize import exemplary_matrix

    athlete = default_parameters(load_identification())
    model, P, _ = exemplary_matrix(athlete)
    problem = GestureProblem(model, P, load_synthesis(), "abs_torque_integral", steps=500)
    x = problem.vector(GestureParameters(DESIGN["final_time_s"], DESIGN["flexion_end_time_s"],
                                         np.deg2rad(DESIGN["max_flexion_deg"])))
    profiles = problem.profiles(x, 1000.0)
    path = write_setpoints(tmp_path_factory.mktemp("gesture") / "setpoints.csv", profiles,
                           1000.0, athlete.source, "clear hip circle (synthesized design)")
    return path, float(np.rad2deg(profiles.rotation_rad[-1]))


def athlete_profile(tmp_path) -> str:
    """An athlete profile whose peak shoulder torque (200 N·m) takes the whole gesture.

    The default athlete's optimal gesture asks 192 N·m per shoulder at full pace (98 N·m at half
    pace) of the athlete in guided mode, above the 70 N·m of the default profile; in guided mode
    the bench sends no torque feed-forward (the emulated board's plant carries no gesture load),
    so only this athlete check is concerned.
    """
    path = tmp_path / "athlete.toml"
    path.write_text('name = "strong"\nsex = "F"\nbody_mass_kg = 41.1\nstature_m = 1.48\n'
                    "shoulder_torque_limit_Nm = 200.0\n"
                    "shoulder_flexion_range_deg = [-10.0, 170.0]\n")
    return str(path)


def drive_command(setpoints, port: str, log, profile: str) -> list[str]:
    """`bemore drive` of the test's gesture at 500 Hz, half speed, guided, on ``port``."""
    return [sys.executable, "-m", "bemore", "drive", str(setpoints), "--port", port,
            "--rate", "500", "--speed", "0.5", "--mode", "guided", "--no-view", "--log",
            str(log), "--profile", profile]


def test_drive_follows_a_synthesized_gesture_on_the_emulated_board(
        board, synthesized_setpoints, tmp_path):
    setpoints, rotation_deg = synthesized_setpoints
    assert 360.0 <= rotation_deg <= 362.0  # it is the synthesized circle, not any curve
    log = tmp_path / "session.jsonl"
    result = subprocess.run(drive_command(setpoints, board.port, log, athlete_profile(tmp_path)),
                            capture_output=True, text=True, timeout=180)
    stats = board.stop()
    assert result.returncode == 0, result.stdout + result.stderr + board.stats
    assert "gesture completed" in result.stdout

    session = read_log(log)
    summary = summarise(session)
    assert summary.end.startswith("completed")
    assert summary.faults == []
    # Followed: the guided position loop tracks the 160° gesture within a few degrees.
    assert summary.tracking_rms_deg < 3.0, summary.lines()
    assert summary.tracking_max_deg < 8.0, summary.lines()
    telemetry = session.telemetry
    armed = np.asarray(telemetry["state"]) == SPEC.states["ARMED"]
    measured_deg = np.rad2deg(np.asarray(telemetry["position_urad"])[armed] * 1e-6)
    assert measured_deg.max() > 150.0  # the arms really went up to the gesture's peak
    assert abs(measured_deg[-1]) < 5.0  # and came back down
    # Nothing was lost on the link, whatever the machine's load did to the pacing.
    assert summary.firmware_counters["bad_frames"] == 0
    assert summary.firmware_counters["seq_gaps"] == 0
    assert stats["rx_dropped"] == 0 and stats["resets"] == 0


def test_killing_bemore_drive_mid_gesture_trips_the_firmware_watchdog(
        board, synthesized_setpoints, tmp_path):
    setpoints, _ = synthesized_setpoints
    log = tmp_path / "session.jsonl"
    host = subprocess.Popen(drive_command(setpoints, board.port, log, athlete_profile(tmp_path)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end and host.poll() is None:
            if log.exists() and log.read_text().count('"type": "sp"') > 500:  # 1 s streamed
                break
            time.sleep(0.05)
        assert host.poll() is None, "the drive ended before it could be killed"
    finally:
        host.kill()  # SIGKILL: no controlled stop, no DISARM
        host.wait()
    # A new host finds the axis stopped by the firmware's own watchdog, torque ramped to zero.
    # The emulation can run at a third of real time on a loaded machine, so the 50 ms watchdog
    # (emulated time) may not have tripped yet when the host is gone: a HELLO to an axis still
    # ARMED is refused (BAD_STATE, the session kept), so it is asked again until it is taken.
    client = Client(board.port)
    try:
        eventually(lambda: client.hello(telemetry_period_ms=5)[1],
                   lambda result: result == SPEC.results["OK"],
                   "a HELLO taken once the axis is no longer ARMED")
        # every frame from here on was sent after the handshake; the ramp (1000 mN·m per tick)
        # may still be running: its end is waited for, then the state it ended in is asserted
        last = client.wait_for(lambda m: m.name == "TELEMETRY"
                               and m.fields["torque_mNm"] == 0).fields
    finally:
        client.close()
    assert last["state"] == SPEC.states["FAULT"]
    assert last["fault"] == SPEC.faults["WATCHDOG"]
    assert last["torque_mNm"] == 0
