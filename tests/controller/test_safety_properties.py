"""Property: whatever the mode, load, speed, repetitions and gesture, the host either refuses the
session before arming or every setpoint it would send — plan, rests, final ramp and the
controlled-stop ramp from any instant — is within the configured limits.

Setpoints are captured at the encoder level: encoded with the protocol codec, decoded back from
the wire bytes, and checked in SI units against the tightest of the athlete's, the bench's and the
firmware's limits.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bemore.settings import load_bench
from controller.modes import (
    LOADED_MODES,
    MODES,
    ModeSettings,
    build_plan,
    setpoint_fields,
    stop_setpoints,
)
from controller.preflight import (
    FirmwareLimits,
    athlete_limits,
    bench_limits,
    envelope,
    preflight,
    safe_angle_range,
)
from controller.protocol import FrameDecoder, decode_message, encode_message, load_spec
from controller.setpoints import Gesture

BENCH = load_bench()
SPEC = load_spec()
FIRMWARE = FirmwareLimits(
    torque_max_nm=SPEC.limits["torque_max_mNm"] * 1e-3,
    velocity_max_rad_s=SPEC.limits["velocity_max_urad_s"] * 1e-6,
    position_min_rad=SPEC.limits["position_min_urad"] * 1e-6,
    position_max_rad=SPEC.limits["position_max_urad"] * 1e-6,
    slew_max_nm_s=SPEC.limits["slew_max_mNm_per_tick"] * 1e-3 * SPEC.tick_hz,
)
LIMITS = envelope(athlete_limits() + bench_limits(BENCH, FIRMWARE))


@st.composite
def gestures(draw) -> Gesture:
    """A setpoint file's content: piecewise-linear columns through random knots, mostly valid."""
    rate = draw(st.sampled_from([100.0, 250.0, 500.0, 1000.0]))
    duration = draw(st.floats(0.2, 1.5))
    count = round(duration * rate) + 1
    knots = draw(st.integers(2, 6))
    t = np.arange(count) / rate
    knot_t = np.linspace(0.0, t[-1], knots)
    low, high = LIMITS["angle"]
    velocity_max = LIMITS["velocity"][1]
    torque_max = LIMITS["torque"][1]
    # margin > 1 lets some gestures exceed the limits: those must be refused
    margin = draw(st.sampled_from([0.5, 0.9, 1.0, 1.1]))
    columns = []
    for span in ((low * margin, high * margin), (-velocity_max * margin, velocity_max * margin),
                 (-torque_max * margin, torque_max * margin)):
        values = draw(st.lists(st.floats(*span), min_size=knots, max_size=knots))
        columns.append(np.interp(t, knot_t, values))
    # the static (gravity) part of the torque, for slow motion: some fraction of it
    static = columns[2] * draw(st.floats(0.0, 1.0))
    return Gesture("hypothesis.csv", rate, t, *columns, static_torque_nm=static)


mode_settings = st.builds(
    lambda mode, load, speed, reps, rest, rate, ramp: ModeSettings(
        mode=mode, load_pct=load if mode in LOADED_MODES else 0.0, speed=speed, reps=reps,
        rest_s=rest, rate_hz=rate, ramp_down_s=ramp),
    mode=st.sampled_from(MODES),
    load=st.floats(0.0, 100.0),
    speed=st.floats(0.25, 1.0),
    reps=st.integers(1, 3),
    rest=st.sampled_from([0.0, 0.05, 0.5]),
    rate=st.sampled_from([100.0, 500.0, 1000.0]),
    ramp=st.sampled_from([0.05, 0.3]),
)


def wire_round_trip(fields_list: list[dict[str, int]]) -> dict[str, np.ndarray]:
    """Encode every SETPOINT, decode the byte stream, return SI columns of what went out."""
    stream = b"".join(encode_message("SETPOINT", i & 0xFF, **fields)
                      for i, fields in enumerate(fields_list))
    messages = [decode_message(frame) for frame in FrameDecoder().feed(stream)]
    assert len(messages) == len(fields_list)
    return {name: np.array([m.si(name) for m in messages])
            for name in ("time_ms", "position_urad", "velocity_urad_s", "torque_mNm")}


def assert_within_limits(sent: dict[str, np.ndarray]) -> None:
    low, high = LIMITS["angle"]
    assert np.all(sent["position_urad"] >= low) and np.all(sent["position_urad"] <= high)
    assert np.all(np.abs(sent["velocity_urad_s"]) <= LIMITS["velocity"][1])
    assert np.all(np.abs(sent["torque_mNm"]) <= LIMITS["torque"][1])
    dt = np.diff(sent["time_ms"])
    assert np.all(dt > 0)
    # one wire unit of truncation per sample is the only slack (1 µrad, 1 mN·m per period)
    angle_rate = np.abs(np.diff(sent["position_urad"])) / dt
    assert np.all(angle_rate <= LIMITS["velocity"][1] + 2e-6 / dt)
    torque_rate = np.abs(np.diff(sent["torque_mNm"])) / dt
    assert np.all(torque_rate <= LIMITS["torque rate"][1] + 2e-3 / dt)


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gesture=gestures(), mode=mode_settings, abort=st.floats(0.0, 1.0))
def test_host_never_sends_beyond_the_limits(gesture, mode, abort):
    plan = build_plan(gesture, mode)
    if preflight(gesture, plan, BENCH, FIRMWARE, mode.torque_gain):
        event("refused before arming")
        return  # nothing is sent
    event("streamed")
    planned = [setpoint_fields(plan, k) for k in range(len(plan))]
    assert_within_limits(wire_round_trip(planned))
    # a controlled stop at any instant: the stream so far, then the stop ramp
    k = min(int(abort * len(plan)), len(plan) - 1)
    ramp = stop_setpoints(planned[k], mode, *safe_angle_range(BENCH, FIRMWARE))
    sent = wire_round_trip(planned[: k + 1] + ramp)
    assert_within_limits(sent)
    assert sent["velocity_urad_s"][-1] == 0.0 and sent["torque_mNm"][-1] == 0.0


def test_a_gesture_beyond_the_limits_is_always_refused():
    """The property above is not vacuous: the margin-1.1 gestures are refused."""
    t = np.arange(1001) / 1000.0
    angle = np.full(t.size, LIMITS["angle"][1] * 1.1)
    gesture = Gesture("over.csv", 1000.0, t, angle, np.zeros(t.size), np.zeros(t.size))
    for mode in MODES:
        load = 50.0 if mode in LOADED_MODES else 0.0
        plan = build_plan(gesture, ModeSettings(mode=mode, load_pct=load))
        quantities = {v.quantity for v in preflight(gesture, plan, BENCH, FIRMWARE)}
        assert quantities == {"angle"}
    assert math.degrees(LIMITS["angle"][1]) == 170.0  # the athlete's flexion limit binds
