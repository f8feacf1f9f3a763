"""Test gestures for the controller tests (importable as ``tests.controller.gestures``)."""

from __future__ import annotations

import math

import numpy as np

from controller.setpoints import Gesture


def make_gesture(duration_s: float = 2.4, peak_deg: float = 160.0, rate_hz: float = 1000.0,
                 torque_scale: float = 1.0, path: str = "memory") -> Gesture:
    """A rest-to-rest shoulder gesture 0 → peak → 0 (sin² profile) with a plausible torque.

    angle = A·sin²(πt/T), velocity = A·π/T·sin(2πt/T); the torque is a gravity-like term
    25·sin(angle) N·m plus an inertial term 2·acceleration N·m (peak 26.5 N·m for the defaults);
    the static torque (slow motion) is the gravity-like term.
    """
    t = np.arange(round(duration_s * rate_hz) + 1) / rate_hz
    amplitude = math.radians(peak_deg)
    angle = amplitude * np.sin(np.pi * t / duration_s) ** 2
    velocity = amplitude * np.pi / duration_s * np.sin(2 * np.pi * t / duration_s)
    acceleration = amplitude * 2 * np.pi**2 / duration_s**2 * np.cos(2 * np.pi * t / duration_s)
    static = torque_scale * 25.0 * np.sin(angle)
    torque = static + torque_scale * 2.0 * acceleration
    return Gesture(path, rate_hz, t, angle, velocity, torque,
                   metadata={"athlete": "default", "gesture": f"sin² 0→{peak_deg:g}°→0"},
                   static_torque_nm=static)
