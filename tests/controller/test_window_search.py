"""The feasible window's load search finds exactly what plain bisection finds, with fewer
pre-flights: every cell (loads, reason) is compared with a bisection reference."""

from __future__ import annotations

import dataclasses

import pytest

from controller import window
from controller.modes import ModeSettings
from controller.preflight import compiled_firmware_limits
from controller.profile import DEFAULT_PROFILE
from tests.controller.gestures import make_gesture


def bisect_reference(ok, low, high, rising, predict=None):
    """Plain bisection on [low, high] (the reference; ``predict`` is ignored): the first
    passing load (``rising``) or the last passing one; None if none passes."""
    if rising:
        if not ok(high):
            return None
        while low < high:
            middle = (low + high) // 2
            if ok(middle):
                high = middle
            else:
                low = middle + 1
        return low
    if not ok(low):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if ok(middle):
            low = middle
        else:
            high = middle - 1
    return low


def counted_window(monkeypatch, search, *args, **kwargs):
    """(cells, number of pre-flights) of feasible_window with ``search`` as the load search."""
    calls = []
    violations = window._violations

    def counting(*a, **k):
        calls.append(a[6])  # the load
        return violations(*a, **k)

    with monkeypatch.context() as patch:
        patch.setattr(window, "_search", search)
        patch.setattr(window, "_violations", counting)
        cells = window.feasible_window(*args, **kwargs)
    return cells, len(calls)


def with_limits(bench, **limits):
    """``bench`` with some of its [limits] replaced."""
    return bench.model_copy(update={"limits": bench.limits.model_copy(update=limits)})


def athlete(torque_nm):
    """The default athlete with another peak shoulder torque (N·m)."""
    return dataclasses.replace(DEFAULT_PROFILE, shoulder_torque_limit_Nm=torque_nm)


FAST = ModeSettings(rate_hz=200.0)  # fewer setpoints per plan: the search is the same

# (gesture torque scale, athlete torque limit N·m, bench [limits] overrides, static torque?)
# the default gesture needs 26.5 N·m at its peak; the bench allows 120 N·m, 2000 N·m/s
CASES = {
    "defaults": (1.0, 70.0, {}, True),
    "guided refused, assistive window": (3.0, 40.0, {}, True),
    "athlete limit at half the peak": (1.0, 13.25, {}, True),
    "athlete limit at a quarter of the peak": (1.0, 26.5 * 0.25, {}, True),
    "bench torque bounds the assistive high end": (2.0, 30.0, {"max_torque_nm": 31.7}, True),
    "bench torque rate bounds it": (2.0, 30.0, {"max_torque_rate_nm_s": 80.0}, True),
    "resistive bounded by the bench": (1.0, 500.0, {"max_torque_nm": 17.3}, True),
    "resistive bounded by the athlete": (1.0, 41.0, {}, True),
    "nothing loaded passes": (1.0, 10.0, {"max_torque_nm": 2.0}, True),
    "window of one load": (1.0, 19.7, {"max_torque_nm": 7.0}, True),
    "no static torque": (2.0, 30.0, {"max_torque_nm": 31.7}, False),
}


@pytest.mark.parametrize("case", CASES)
def test_search_finds_what_bisection_finds(case, bench, monkeypatch):
    scale, torque_limit, limits, static = CASES[case]
    gesture = make_gesture(torque_scale=scale, rate_hz=200.0)
    if not static:
        gesture = dataclasses.replace(gesture, static_torque_nm=None)
    args = (gesture, with_limits(bench, **limits), athlete(torque_limit),
            compiled_firmware_limits(), FAST)
    cells, probes = counted_window(monkeypatch, window._search, *args)
    expected, reference_probes = counted_window(monkeypatch, bisect_reference, *args)
    assert [(c.mode, c.speed, c.loads, c.reason) for c in cells] == [
        (c.mode, c.speed, c.loads, c.reason) for c in expected]
    assert [c.worst for c in cells] == [c.worst for c in expected]
    assert probes <= reference_probes


def test_cases_cover_the_boundaries(bench, monkeypatch):
    """The cases above do reach the situations they are named for (checked on the reference)."""
    seen = {}
    for case, (scale, torque_limit, limits, static) in CASES.items():
        gesture = make_gesture(torque_scale=scale, rate_hz=200.0)
        if not static:
            gesture = dataclasses.replace(gesture, static_torque_nm=None)
        cells, _ = counted_window(monkeypatch, bisect_reference, gesture,
                                  with_limits(bench, **limits), athlete(torque_limit),
                                  compiled_firmware_limits(), FAST)
        seen[case] = {(c.mode, c.speed): c for c in cells}
    assert not seen["guided refused, assistive window"]["guided", 1.0].passes
    assert seen["guided refused, assistive window"]["assistive", 1.0].passes
    low, high = seen["bench torque bounds the assistive high end"]["assistive", 1.0].loads
    assert 1 < low <= high < 100
    low, high = seen["bench torque rate bounds it"]["assistive", 1.0].loads
    assert high < 100
    assert 1 < seen["resistive bounded by the bench"]["resistive", 1.0].loads[1] < 100
    assert 1 < seen["resistive bounded by the athlete"]["resistive", 1.0].loads[1] < 100
    assert not any(seen["nothing loaded passes"]["assistive", s].passes for s in window.SPEEDS)
    low, high = seen["window of one load"]["assistive", 1.0].loads
    assert low == high
    no_static = seen["no static torque"]
    assert no_static["assistive", 0.5].reason == window.NO_STATIC
    assert no_static["assistive", 1.0].passes
