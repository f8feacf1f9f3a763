"""The bench plays what synthesis makes: the default two steps, the feasible window, slow motion.

`bemore synthesize --out g` then `bemore drive g/setpoints.csv` with the shipped configuration,
on the simulated bench (with its gesture load and simulated athlete); the window that
`drive --plan` and a refused drive print, with bounds computed here from the file itself; the
slow-motion torque against the exemplary model's inverse dynamics at the slowed pace (Pinocchio).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.profile import DEFAULT_PROFILE
from bemore.settings import load_bench
from controller.log import read_log
from controller.modes import ModeSettings, build_plan
from controller.replay import summarise
from controller.setpoints import read_setpoints

ATHLETE_NM = DEFAULT_PROFILE.shoulder_torque_limit_Nm  # 70 N·m
BENCH_NM = load_bench().limits.max_torque_nm  # 240 N·m


@pytest.fixture(scope="module")
def sample_gesture(tmp_path_factory):
    """The default synthesis of the sample athlete, written as `bemore synthesize --out g`."""
    out = tmp_path_factory.mktemp("synthesis") / "g"
    result = CliRunner().invoke(cli, ["synthesize", "--no-animation", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _window(text: str) -> dict[str, list[str]]:
    """mode → the four cells (speeds 1, 0.75, 0.5, 0.25) of a printed window table."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("feasible window"))
    assert lines[start + 1].split() == ["mode", "speed", "1", "speed", "0.75", "speed", "0.5",
                                        "speed", "0.25"]
    rows = {}
    for line in lines[start + 2: start + 6]:
        mode, *cells = line.split(maxsplit=1)[0], *line.split()[1:]
        rows[mode] = " ".join(cells).replace(" %", "%").split()
    return rows


def _assistive_low(setpoints, speed: float) -> int:
    """Lowest whole-% assistive load at which the athlete's share (1 − load) of the torque the
    gesture needs at ``speed`` stays within her limit, from the file's own columns."""
    static, torque = np.asarray(setpoints.static_torque_nm), np.asarray(setpoints.torque_nm)
    need = static + speed**2 * (torque - static)
    return math.ceil(100.0 * (1.0 - ATHLETE_NM / np.abs(need).max()) - 1e-9)


def test_default_synthesize_then_drive_completes(sample_gesture, tmp_path):
    setpoints = sample_gesture / "setpoints.csv"
    gesture_json = json.loads((sample_gesture / "gesture.json").read_text())
    needs = gesture_json["bench_requirements"]["per_shoulder"]
    gesture = read_setpoints(setpoints)
    assert needs["peak_torque_nm"] == pytest.approx(np.abs(gesture.torque_nm).max(), rel=1e-6)
    # the shipped bench is sized for it: the passive mode (the bench gives 100 %) fits
    assert needs["peak_torque_nm"] < BENCH_NM
    log = tmp_path / "s.jsonl"
    result = CliRunner().invoke(cli, ["drive", str(setpoints), "--log", str(log), "--no-view"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "gesture completed: ramped down and disarmed"
    session = read_log(log)
    assert session.header["settings"]["mode"] == "passive"
    summary = summarise(session)
    assert summary.tracking_max_deg < 5.0
    # the bench gave the whole gesture's torque: measured within 25 % of the feed-forward peak
    assert summary.peak_measured_torque_nm == pytest.approx(needs["peak_torque_nm"], rel=0.25)


def test_plan_and_a_refused_drive_print_the_window(sample_gesture, tmp_path):
    setpoints = sample_gesture / "setpoints.csv"
    gesture = read_setpoints(setpoints)
    runner = CliRunner()
    planned = runner.invoke(cli, ["drive", str(setpoints), "--plan"])
    assert planned.exit_code == 0, planned.output
    window = _window(planned.stdout)
    # her share alone (191.7 N·m at full pace) is beyond her 70 N·m: guided and resistive
    # never pass; passive at every speed; assistive from the load where 1 − load fits her
    # limit up to 100 % (the bench's 240 N·m takes the whole gesture)
    assert window["passive"] == ["ok"] * 4
    assert window["guided"] == ["—"] * 4
    assert window["resistive"] == ["—"] * 4
    low_1, low_half = _assistive_low(gesture, 1.0), _assistive_low(gesture, 0.5)
    assert window["assistive"][0] == f"{low_1}–100%"
    assert window["assistive"][2] == f"{low_half}–100%"
    assert low_1 == 64  # 1 − 70/191.7 = 63.5 %
    assert low_half < low_1  # slower: less inertial torque, she can take more
    # a load just below the window is refused; the refusal prints the same window
    log = tmp_path / "refused.jsonl"
    refused = runner.invoke(cli, ["drive", str(setpoints), "--log", str(log), "--no-view",
                                  "--mode", "assistive", "--load", str(low_1 - 1)])
    assert refused.exit_code == 2
    assert "athlete torque" in refused.stderr
    assert _window(refused.stderr) == window
    assert not log.exists()
    # the last line says what the mode needs at that speed, and the load it was refused at
    assert refused.stderr.strip().splitlines()[-1].endswith(
        f"assistive at speed 1 passes with --load {low_1} to 100 (this session: --load "
        f"{low_1 - 1})")


@pytest.mark.parametrize("speed", [1.0, 0.9])  # 0.9: a speed the window table has no column of
def test_a_loaded_mode_refused_at_its_default_load_says_so_and_what_passes(sample_gesture,
                                                                          tmp_path, speed):
    # a new user's `--mode assistive` without --load: refused at the default 50 %, which the
    # line must name, with the loads that pass at her speed (bounds from the file itself)
    setpoints = sample_gesture / "setpoints.csv"
    low = _assistive_low(read_setpoints(setpoints), speed)
    assert low > 50  # the default load is refused at these speeds
    log = tmp_path / "s.jsonl"
    refused = CliRunner().invoke(cli, ["drive", str(setpoints), "--log", str(log), "--no-view",
                                       "--mode", "assistive", "--speed", str(speed)])
    assert refused.exit_code == 2, refused.output
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bemore: error: {setpoints}: refused before arming: ")
    assert last.endswith(f"; assistive at speed {speed:g} passes with --load {low} to 100 "
                         "(this session: 50 %, the default load)")
    assert not log.exists()
    # resistive: no load passes (her share alone is beyond her limit)
    refused = CliRunner().invoke(cli, ["drive", str(setpoints), "--log", str(log), "--no-view",
                                       "--mode", "resistive", "--speed", str(speed)])
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.strip().splitlines()[-1].endswith(
        f"; resistive at speed {speed:g} passes at no load (this session: 50 %, the default "
        "load)")


def test_slow_motion_torque_is_inverse_dynamics_at_the_slowed_pace(sample_gesture):
    from bemore.settings import load_identification
    from bemore.synthesis.athlete import default_parameters
    from bemore.synthesis.synthesize import exemplary_matrix
    from tests.synthesis import pinocchio_exemplary

    gesture_json = json.loads((sample_gesture / "gesture.json").read_text())
    gesture = read_setpoints(sample_gesture / "setpoints.csv")
    speed = 0.5
    plan = build_plan(gesture, ModeSettings(speed=speed))  # passive: the bench sends it all
    # The motion of the whole model at pace 1: the free coordinates from profiles.csv-like
    # re-simulation of the written design, accelerations by the model's own dynamics.
    model, P, values = exemplary_matrix(default_parameters(load_identification()))
    from bemore.settings import load_synthesis
    from bemore.synthesis.problem import GestureProblem

    problem = GestureProblem(model, P, load_synthesis(), step_s=1e-3, substeps=2)
    design = gesture_json["design"]
    x = np.array([design["final_time_s"], design["flexion_end_time_s"],
                  design["max_flexion_rad"]])
    t = np.asarray(gesture.t_s[: round(design["final_time_s"] * 1000)])
    _, free_q, free_qd, _, ok = problem.simulate_design(x, t, substeps=2)
    assert ok
    sample = slice(100, len(t) - 100, 50)  # every 50 ms
    q = np.column_stack([free_q, gesture.angle_rad[: len(t)]])[sample]
    v = np.column_stack([free_qd, gesture.velocity_rad_s[: len(t)]])[sample]
    free_acc = np.gradient(free_qd, t, axis=0)[sample]
    angle_acc = np.gradient(gesture.velocity_rad_s[: len(t)], t)[sample]
    a = np.column_stack([free_acc, angle_acc])
    oracle = pinocchio_exemplary.build(values)
    # the same path at half pace: velocities × 0.5, accelerations × 0.25, gravity unchanged
    slowed = 0.5 * pinocchio_exemplary.rnea_torque(oracle, q, speed * v, speed**2 * a)
    full = 0.5 * pinocchio_exemplary.rnea_torque(oracle, q, v, a)
    # gesture time τ plays at stream time τ / speed
    k = np.round(t[sample] / speed * plan.rate_hz).astype(int)
    sent = np.asarray(plan.need_nm)[k]
    # passive: the bench sends it
    assert np.asarray(plan.torque_nm)[k] == pytest.approx(sent, abs=1e-3)
    # central differences of the accelerations cost accuracy (O(h²)): 1 % of the peak
    assert np.abs(sent - slowed).max() <= 0.01 * np.abs(full).max()
    # and it is not the full-pace torque replayed: they differ by far more than that
    assert np.abs(full - slowed).max() > 0.2 * np.abs(full).max()
