"""Mode transforms: the shares of passive, guided, assistive/resistive load; slow motion with the
torque at the slowed pace; repetitions with rest."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bemore.errors import ConfigError
from controller.modes import MODES, ModeSettings, build_plan, quantise, shares, stop_ramp


@pytest.mark.parametrize(
    ("mode", "load", "athlete", "bench"),
    [("passive", 0.0, 0.0, 1.0), ("guided", 0.0, 1.0, 0.0), ("assistive", 30.0, 0.7, 0.3),
     ("resistive", 30.0, 1.3, -0.3)],
)
def test_every_mode_splits_the_gesture_torque(gesture, mode, load, athlete, bench):
    assert shares(mode, load) == pytest.approx((athlete, bench))
    plan = build_plan(gesture, ModeSettings(mode=mode, load_pct=load))
    k = 600
    assert plan.need_nm[k] == pytest.approx(gesture.torque_nm[k])
    assert plan.torque_nm[k] == pytest.approx(bench * gesture.torque_nm[k], abs=1e-3)


def test_the_default_mode_is_passive():
    assert ModeSettings().mode == "passive" and MODES[0] == "passive"
    assert ModeSettings().torque_gain == 1.0 and ModeSettings().athlete_share == 0.0


def test_guided_plan_follows_the_gesture_with_no_torque(gesture):
    plan = build_plan(gesture, ModeSettings(mode="guided", rate_hz=1000.0, ramp_down_s=0.3))
    # 2401 gesture samples then 300 ramp samples, one per ms
    assert len(plan) == 2401 + 300
    assert plan.time_ms[:5].tolist() == [0, 1, 2, 3, 4]
    assert plan.time_ms[-1] == 2700
    assert plan.position_urad[1200] == 2792526  # 160° = 2.7925268 rad, truncated to µrad
    assert set(plan.torque_mNm) == {0}
    assert plan.rep[0] == 1 and plan.rep[-1] == 0


def test_assistive_and_resistive_scale_the_torque(gesture):
    assistive = build_plan(gesture, ModeSettings(mode="assistive", load_pct=40.0))
    resistive = build_plan(gesture, ModeSettings(mode="resistive", load_pct=40.0))
    k = 600  # t = 0.6 s
    expected = 0.4 * gesture.torque_nm[k]
    assert assistive.torque_nm[k] == pytest.approx(expected, abs=1e-3)
    assert resistive.torque_nm[k] == pytest.approx(-expected, abs=1e-3)


def test_slow_motion_stretches_time_and_scales_velocity(gesture):
    assert np.array_equal(gesture.static_torque_nm, 25.0 * np.sin(gesture.angle_rad))
    plan = build_plan(gesture, ModeSettings(speed=0.5))
    # the 2.4 s gesture lasts 4.8 s: the peak (gesture t = 1.2 s) is reached at t = 2.4 s
    assert len(plan) == 4801 + 300
    assert plan.gesture_t_s[2400] == pytest.approx(1.2)
    assert plan.position_rad[2400] == pytest.approx(math.radians(160.0), abs=1e-6)
    k = 1200  # stream t = 1.2 s ↔ gesture t = 0.6 s, where velocity is maximal
    assert plan.velocity_rad_s[k] == pytest.approx(0.5 * gesture.velocity_rad_s[600], abs=1e-6)
    # the torque is gravity plus a quarter of the inertial term (make_gesture: 2·acceleration)
    k = 800  # stream t = 0.8 s ↔ gesture t = 0.4 s
    inertial = gesture.torque_nm[400] - gesture.static_torque_nm[400]
    assert plan.need_nm[k] == pytest.approx(gesture.static_torque_nm[400] + 0.25 * inertial)
    assert abs(inertial) > 1.0  # not a vacuous check


def test_slow_motion_needs_the_static_torque(gesture):
    gesture.static_torque_nm = None  # a hand-made file without the column
    with pytest.raises(ConfigError, match="shoulder_static_torque_nm"):
        build_plan(gesture, ModeSettings(speed=0.5))


def test_repetitions_with_smooth_rest(gesture):
    plan = build_plan(gesture, ModeSettings(reps=3, rest_s=1.0, rate_hz=500.0))
    per_rep, rest = 1201, 500
    assert len(plan) == 3 * per_rep + 2 * rest + 150
    assert plan.time_ms[1] == 2  # 500 Hz
    assert plan.rep.count(2) == per_rep
    assert plan.rep[per_rep] == 0  # the first rest sample
    # positions never jump by more than the gesture's own largest step
    steps = np.abs(np.diff(plan.position_rad))
    assert steps.max() < math.radians(160.0) * math.pi / 2.4 / 500 * 1.01


def test_stop_ramp_decelerates_to_rest():
    settings = ModeSettings(rate_hz=1000.0, ramp_down_s=0.2)
    position, velocity, torque = stop_ramp(1.0, 2.0, 30.0, settings)
    assert len(position) == 200
    assert velocity[-1] == 0.0 and torque[-1] == 0.0
    assert torque[99] == pytest.approx(15.0)
    # p = p0 + v0 (T − T²/2T) = 1 + 2·0.1 at the end
    assert position[-1] == pytest.approx(1.2)
    held = stop_ramp(1.0, 2.0, 30.0, settings, max_position_rad=1.1)[0]
    assert max(held) == 1.1


def test_quantise_truncates_towards_zero():
    assert quantise(np.array([1.9999999e-6, -1.9999999e-6]), 1e-6).tolist() == [1, -1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "freestyle"}, "mode 'freestyle'"),
        ({"mode": "guided", "load_pct": 20.0}, "only the assistive and resistive"),
        ({"mode": "passive", "load_pct": 20.0}, "only the assistive and resistive"),
        ({"mode": "resistive", "load_pct": 120.0}, "load 120 %"),
        ({"speed": 0.1}, "speed 0.1"),
        ({"speed": 1.5}, "speed 1.5"),
        ({"reps": 0}, "reps 0"),
        ({"rate_hz": 2000.0}, "rate 2000 Hz"),
    ],
)
def test_settings_are_validated(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ModeSettings(**kwargs)
