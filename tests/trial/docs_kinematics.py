"""Forward kinematics written from docs/model.md's "Geometry in terms of the coordinates", for
tests only: an implementation independent of bemore.trial's inverse (coordinates.py)."""

from __future__ import annotations

import numpy as np

HAND, TRUNK, HEAD, THIGH, SHANK, FOOT = 0.075, 0.428, 0.210, 0.419, 0.362, 0.175


def _unit(angle: np.ndarray) -> np.ndarray:
    return np.stack([np.cos(angle), np.sin(angle)], axis=-1)


def points_from_coordinates(free: np.ndarray, driven: np.ndarray) -> np.ndarray:
    """(F, 10, 2) points bar … head_top from (F, 5) free and (F, 9) driven coordinates."""
    bar_x, bar_y, hand_rotation, ap, pd = free.T
    wrist, forearm, elbow, upper_arm, flexion, neck, hip, knee, ankle = driven.T
    a_hand = hand_rotation
    a_forearm = a_hand + wrist
    a_upper = a_forearm + elbow
    a_trunk = a_upper - flexion
    a_head = a_trunk + np.pi + neck
    a_thigh = a_trunk - hip
    a_shank = a_thigh + knee
    a_foot = a_shank - np.pi / 2 + ankle
    p_bar = np.stack([bar_x, bar_y], axis=-1)
    p_wrist = p_bar + HAND * _unit(a_hand)
    p_elbow = p_wrist + forearm[:, None] * _unit(a_forearm)
    y_upper = _unit(a_upper + np.pi / 2)
    p_shoulder = p_elbow + (upper_arm + pd)[:, None] * _unit(a_upper) + ap[:, None] * y_upper
    p_neck = p_shoulder
    p_hip = p_shoulder + TRUNK * _unit(a_trunk)
    p_knee = p_hip + THIGH * _unit(a_thigh)
    p_ankle = p_knee + SHANK * _unit(a_shank)
    p_toe = p_ankle + FOOT * _unit(a_foot)
    p_head = p_neck + HEAD * _unit(a_head)
    return np.stack([p_bar, p_wrist, p_elbow, p_shoulder, p_neck, p_hip, p_knee, p_ankle,
                     p_toe, p_head], axis=1)


def circle_coordinates(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A smooth clear-hip-circle-like motion: (F, 5) free and (F, 9) driven coordinates."""
    s = t / t[-1]
    bump = np.sin(np.pi * s) ** 2
    free = np.stack([
        0.01 * np.sin(2 * np.pi * s),
        -0.015 - 0.01 * bump,
        np.pi / 2 + 2 * np.pi * (s - np.sin(2 * np.pi * s) / (2 * np.pi)),
        np.zeros_like(s),
        np.zeros_like(s),
    ], axis=-1)
    driven = np.stack([
        0.2 * bump,
        0.24 - 0.02 * bump,
        0.1 * bump,
        0.28 - 0.015 * bump,
        2.6 * bump,
        -0.2 * bump,
        1.4 * bump,
        0.3 * bump,
        1.2 + 0.2 * bump,
    ], axis=-1)
    return free, driven
