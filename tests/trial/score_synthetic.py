"""A synthetic SCoRE calibration trial, made without the estimator's code: a thorax cluster
swaying a little and an upper arm turning about a known gleno-humeral centre fixed in the
thorax (rotations by Rodrigues' formula, no fitting), marker noise (1 mm, white, isotropic by
default; low-pass filtered, anisotropic or different on each marker on request: not the
estimator's assumptions), in memory or written as a C3D."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bemore.trial.c3d import write_c3d
from bemore.trial.markers import Markers

# Thorax frame: x anterior, y up the trunk, z to the right (m).
THORAX = {"C7": (-0.07, 0.42, 0.0), "STERNUM": (0.09, 0.36, 0.0),
          "R_TROCHANTER": (0.0, -0.05, 0.10), "L_TROCHANTER": (0.0, -0.05, -0.10)}
CENTRE_IN_THORAX = np.array([0.0, 0.38, 0.17])  # the right gleno-humeral centre
# The acromion, above the centre; held fixed in the thorax here (a real scapula turns with the
# arm's elevation: the profile keeps the mean offset and its spread).
ACROMION_IN_THORAX = CENTRE_IN_THORAX + np.array([-0.01, 0.045, 0.005])
# Upper-arm markers about the centre, arm hanging (m).
ARM = {"R_UPPER_ARM_1": (0.04, -0.10, 0.03), "R_UPPER_ARM_2": (0.03, -0.16, 0.05),
       "R_UPPER_ARM_3": (-0.03, -0.13, 0.05), "R_ELBOW": (0.0, -0.28, 0.03)}


def rotation(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """(F, 3, 3) rotations by ``angle`` (F,) rad about the unit ``axis`` (3,): Rodrigues."""
    k = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
    return np.eye(3) + s * K + (1.0 - c) * (K @ K)


def calibration_markers(amplitude: float = 1.0, noise_m: float = 0.001, seed: int = 0,
                        duration_s: float = 6.0, rate_hz: float = 100.0,
                        arm_scale: float = 1.0, cutoff_hz: float | None = None,
                        axis_noise: tuple[float, float, float] = (1.0, 1.0, 1.0),
                        marker_noise_spread: float = 0.0
                        ) -> tuple[Markers, np.ndarray, np.ndarray]:
    """The calibration in memory: (markers, the true centre in the lab (F, 3) m, the markers'
    noise-free positions (F, M, 3) m). ``amplitude`` scales the arm's movement (1: flexion
    ±0.8 rad, abduction 0–1.0 rad, axial ±0.4 rad, circumducting); ``arm_scale`` the upper-arm
    markers' distances from the centre. The noise (``noise_m`` m RMS per coordinate) is
    low-pass filtered at ``cutoff_hz`` (2nd-order Butterworth, forward and backward, as a lab's
    smoothing does: errors correlated over frames), scaled per lab axis by ``axis_noise`` and
    per marker by exp(``marker_noise_spread``·N(0, 1))."""
    t = np.arange(round(duration_s * rate_hz)) / rate_hz
    w = 2.0 * np.pi * 0.5
    # The thorax sways: a few degrees, a few cm.
    R_thorax = (rotation([0, 0, 1], 0.05 * np.sin(0.7 * w * t))
                @ rotation([1, 0, 0], 0.04 * np.sin(0.5 * w * t + 1.0)))
    p_thorax = np.stack([1.0 + 0.02 * np.sin(0.3 * w * t), 1.1 + 0.01 * np.cos(0.4 * w * t),
                         0.5 + 0.015 * np.sin(0.6 * w * t)], axis=1)
    # The arm relative to the thorax: flexion about z, abduction about x, axial about y.
    R_arm = (rotation([0, 0, 1], amplitude * 0.8 * np.sin(w * t))
             @ rotation([1, 0, 0], amplitude * 0.5 * (1.0 - np.cos(w * t)))
             @ rotation([0, 1, 0], amplitude * 0.4 * np.sin(0.5 * w * t)))
    centre = np.einsum("fij,j->fi", R_thorax, CENTRE_IN_THORAX) + p_thorax
    labels, columns = [], []
    for label, local in (*THORAX.items(), ("R_ACROMION", ACROMION_IN_THORAX)):
        labels.append(label)
        columns.append(np.einsum("fij,j->fi", R_thorax, np.array(local)) + p_thorax)
    for label, local in ARM.items():
        labels.append(label)
        in_thorax = CENTRE_IN_THORAX + np.einsum("fij,j->fi", R_arm, arm_scale * np.array(local))
        columns.append(np.einsum("fij,fj->fi", R_thorax, in_thorax) + p_thorax)
    clean = np.stack(columns, axis=1)
    rng = np.random.default_rng(seed)
    noise = rng.normal(0.0, noise_m, clean.shape)
    if cutoff_hz is not None:
        from scipy.signal import butter, filtfilt

        numerator, denominator = butter(2, cutoff_hz / (0.5 * rate_hz))
        noise = filtfilt(numerator, denominator, noise, axis=0)
        noise *= noise_m / noise.std()
    noise *= np.asarray(axis_noise, dtype=float)
    if marker_noise_spread:
        noise *= np.exp(marker_noise_spread * rng.normal(size=(1, clean.shape[1], 1)))
    markers = Markers(t, clean + noise, tuple(labels), rate_hz, "synthetic calibration", "m")
    return markers, centre, clean


def calibration_trial(path: Path, amplitude: float = 1.0, noise_m: float = 0.001,
                      seed: int = 0, duration_s: float = 6.0, rate_hz: float = 100.0
                      ) -> np.ndarray:
    """Write the calibration C3D at ``path`` (:func:`calibration_markers`); return the true
    centre in the lab (F, 3) m."""
    markers, centre, _ = calibration_markers(amplitude, noise_m, seed, duration_s, rate_hz)
    write_c3d(path, markers, "synthetic SCoRE calibration (tests/trial/score_synthetic.py)")
    return centre
