"""Pre-flight: a session outside the limits is refused, naming every violation."""

from __future__ import annotations

import numpy as np
import pytest

from controller.modes import ModeSettings, build_plan
from controller.preflight import FirmwareLimits, PreflightError, preflight, require_clear
from tests.controller.gestures import make_gesture


def test_gesture_within_limits_passes(gesture, bench):
    # peak torque 26.5 N·m: resisted at 100 % the athlete produces 53 N·m (limit 70)
    plan = build_plan(gesture, ModeSettings(mode="resistive", load_pct=100.0))
    assert preflight(gesture, plan, bench, torque_gain=-1.0) == []


def test_too_far_and_too_strong_is_refused_with_a_table(bench):
    # 172° exceeds the athlete's 170° flexion (in the file and in the stream) but not the
    # bench's 175°; torque ×3.2 (peak ≈ 85 N·m) resisted at 80 %: the bench's feed-forward
    # reaches 68 N·m (within its 80) and the athlete must produce 1.8 × 85 N·m (above 70).
    gesture = make_gesture(peak_deg=172.0, torque_scale=3.2, path="big.csv")
    settings = ModeSettings(mode="resistive", load_pct=80.0)
    plan = build_plan(gesture, settings)
    with pytest.raises(PreflightError) as caught:
        require_clear(gesture, plan, bench, torque_gain=settings.torque_gain)
    error = caught.value
    found = {(v.where, v.quantity, v.source) for v in error.violations}
    assert found == {
        ("file", "angle", "athlete profile"),
        ("stream", "angle", "athlete profile"),
        ("stream", "athlete torque", "athlete profile"),
    }
    angle = next(v for v in error.violations if v.quantity == "angle")
    assert angle.limit == pytest.approx(170.0)
    assert angle.value == pytest.approx(172.0, abs=1e-6)
    # the angle exceeds 170° only around the peak at t = 1.2 s
    assert 1.0 < angle.start_s < 1.2 < angle.end_s < 1.4
    # each reported run of the athlete's torque limit is exactly a run of samples above 70 N·m
    # (on the stream: the gesture's 2401 samples at 1 kHz, then the final ramp)
    athlete = [1.8 * need for need in plan.need_nm]
    for run in (v for v in error.violations if v.quantity == "athlete torque"):
        first, last = round(run.start_s * 1000), round(run.end_s * 1000)
        assert all(abs(athlete[i]) > 70.0 for i in range(first, last + 1))
        assert first == 0 or abs(athlete[first - 1]) <= 70.0
        assert last == len(athlete) - 1 or abs(athlete[last + 1]) <= 70.0
    # at 100 % the feed-forward itself (85 N·m) exceeds a bench limited to 80 N·m
    weak_bench = bench.model_copy(
        update={"limits": bench.limits.model_copy(update={"max_torque_nm": 80.0})})
    full = build_plan(gesture, ModeSettings(mode="resistive", load_pct=100.0))
    assert ("stream", "torque", "bench.toml [limits]") in {
        (v.where, v.quantity, v.source) for v in preflight(gesture, full, weak_bench, None, -1.0)}
    text = str(error)
    count = len(error.violations)
    assert "\n" not in text
    assert text.startswith(f"big.csv: refused before arming: {count} limit violation(s)")
    table = error.table().splitlines()
    assert table[0].split()[:6] == ["where", "when", "(s)", "quantity", "value", "limit"]
    assert len(table) == count + 1


def test_firmware_limits_are_checked_on_the_stream(gesture, bench):
    tight = FirmwareLimits(torque_max_nm=150.0, velocity_max_rad_s=2.0, position_min_rad=-0.5,
                           position_max_rad=3.2, slew_max_nm_s=2000.0)
    plan = build_plan(gesture, ModeSettings())
    violations = preflight(gesture, plan, bench, tight)
    # peak velocity is 160°·π/2.4 s = 3.66 rad/s, above the firmware's 2 rad/s, twice per
    # gesture, in the velocity column and in the angle's own rate of change
    assert sorted((v.quantity, v.source) for v in violations) == (
        [("angle rate", "firmware")] * 2 + [("velocity", "firmware")] * 2)
    peak = max(v.value for v in violations if v.quantity == "velocity")
    assert peak == pytest.approx(209.44, abs=0.05)  # deg/s
    # slow motion at half speed brings it to 1.83 rad/s: accepted
    slow = build_plan(gesture, ModeSettings(speed=0.5))
    assert preflight(gesture, slow, bench, tight) == []


def test_torque_rate_limit(bench):
    # a 2° gesture in 0.15 s: torque 2·acceleration has amplitude 2·A·2π²/T² = 61 N·m (within
    # the 70 and 80 N·m limits) but changes at up to 61·2π/T = 2560 N·m/s (limit 2000)
    gesture = make_gesture(duration_s=0.15, peak_deg=2.0)
    plan = build_plan(gesture, ModeSettings(mode="assistive", load_pct=100.0))
    violations = preflight(gesture, plan, bench)
    assert {(v.quantity, v.source) for v in violations} == {("torque rate", "bench.toml [limits]")}
    worst = max(abs(v.value) for v in violations)
    assert 2000 < worst < 2600


def test_a_stop_from_any_setpoint_must_respect_the_torque_rate(bench):
    # passive, 100 N·m of feed-forward: a controlled stop ramps it to zero over ramp_down_s;
    # over 0.3 s that is 333 N·m/s (within 2000), over 0.04 s 2500 N·m/s: refused before arming
    gesture = make_gesture(duration_s=1.0, peak_deg=10.0)
    gesture.torque_nm = np.full(len(gesture.t_s), 100.0)
    gesture.static_torque_nm = gesture.torque_nm.copy()
    slow = build_plan(gesture, ModeSettings(ramp_down_s=0.3))
    assert not [v for v in preflight(gesture, slow, bench) if v.quantity == "stop torque rate"]
    fast = build_plan(gesture, ModeSettings(ramp_down_s=0.04))
    found = [v for v in preflight(gesture, fast, bench) if v.quantity == "stop torque rate"]
    assert found and found[0].source == "bench.toml [limits]"
    assert max(abs(v.value) for v in found) == pytest.approx(2500.0, rel=1e-3)


def test_wire_columns_are_checked_as_their_si_samples():
    """A Scaled column (wire integers · scale, built only when a limit is crossed) gives the
    same violations as its samples; the worst value of a run is the one furthest out, the
    first on a tie, whichever side it lies on."""
    from controller.preflight import Limit, Scaled, check_series

    wire = [0, 5, 12, -13, 4, 11, 11, 3, -12]  # ×0.5: 0 2.5 6 −6.5 2 5.5 5.5 1.5 −6
    t_s = [0.1 * k for k in range(len(wire))]
    limit = [Limit("torque", -5.0, 5.0, "test")]
    found = check_series("stream", t_s, {"torque": Scaled(wire, 0.5)}, limit)
    assert found == check_series("stream", t_s, {"torque": [0.5 * w for w in wire]}, limit)
    # runs: samples 2–3 (6 and −6.5: −6.5 is 1.5 out), 5–6 (5.5 twice), 8 (−6)
    assert [(round(v.start_s, 1), round(v.end_s, 1), v.value) for v in found] == [
        (0.2, 0.3, -6.5), (0.5, 0.6, 5.5), (0.8, 0.8, -6.0)]
    tie = check_series("stream", t_s[:2], {"torque": [6.0, -6.0]}, limit)
    assert [v.value for v in tie] == [6.0]
    assert check_series("stream", t_s, {"torque": Scaled(wire, 0.1)}, limit) == []
