"""Built-in driven-coordinate profiles (smooth, analytic derivatives).

:func:`clear_hip_circle_profile` gives the real gymnast's 9 driven coordinates for a
handstand-to-handstand clear-hip-circle-like gesture: the shoulders and hips pike and open again,
the arms stay nearly straight with slowly varying apparent lengths, the toes stay pointed. It is
the built-in profile of ``bemore simulate`` and what tests and synthetic trials use.
"""

from __future__ import annotations

import numpy as np

from bemore.errors import DataError
from bemore.model.simulate import DrivenMotion

# name: (value at the start and end, amplitude of the raised-cosine excursion at mid-trial)
CLEAR_HIP_CIRCLE = {
    "wrist": (0.0, 0.25),              # rad
    "forearm_length": (0.206, -0.012),  # m
    "elbow": (0.0, 0.08),              # rad
    "upper_arm_length": (0.290, -0.015),  # m
    "shoulder_flexion": (0.0, 1.9),    # rad: pike of the clear hip circle, then open
    "neck": (0.0, -0.15),              # rad
    "hip": (0.0, 1.2),                 # rad
    "knee": (0.0, 0.05),               # rad
    "ankle": (1.3, 0.05),              # rad: toes pointed
}
HANDSTAND_HAND_ROTATION = np.pi / 2  # rad: arms vertical above the bar


def raised_cosine(t: np.ndarray, duration_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """s(t) = (1 − cos 2πt/T)/2 and its first two derivatives (0 → 1 at T/2 → 0)."""
    w = 2.0 * np.pi / duration_s
    return (1.0 - np.cos(w * t)) / 2.0, w * np.sin(w * t) / 2.0, w * w * np.cos(w * t) / 2.0


def clear_hip_circle_profile(duration_s: float = 1.52, rate_hz: float = 1000.0,
                             amplitudes: dict[str, float] | None = None,
                             starts: dict[str, float] | None = None) -> DrivenMotion:
    """Driven motion (real gymnast order, see docs/model.md) sampled at ``rate_hz`` (Hz).

    ``amplitudes`` overrides the mid-trial excursion of some coordinates, ``starts`` their
    value at the start and end (SI units; e.g. another body's arm lengths).
    """
    if duration_s <= 0 or rate_hz <= 0:
        raise DataError("profile: duration_s and rate_hz must be positive")
    n = round(duration_s * rate_hz) + 1
    t = np.arange(n) / rate_hz
    s, sd, sdd = raised_cosine(t, duration_s)
    table = dict(CLEAR_HIP_CIRCLE)
    for name, amplitude in (amplitudes or {}).items():
        if name not in table:
            raise DataError(f"profile: unknown coordinate {name!r}")
        table[name] = (table[name][0], amplitude)
    for name, start in (starts or {}).items():
        if name not in table:
            raise DataError(f"profile: unknown coordinate {name!r}")
        table[name] = (start, table[name][1])
    base = np.array([v[0] for v in table.values()])
    amp = np.array([v[1] for v in table.values()])
    return DrivenMotion(t, base + s[:, None] * amp, sd[:, None] * amp, sdd[:, None] * amp)


def shoulder_flexion_profile(duration_s: float = 2.4, max_flexion_rad: float = 2.6,
                             rate_hz: float = 1000.0) -> DrivenMotion:
    """Exemplary model: shoulder flexion 0 → max → 0 (raised cosine), one column."""
    n = round(duration_s * rate_hz) + 1
    t = np.arange(n) / rate_hz
    s, sd, sdd = raised_cosine(t, duration_s)
    return DrivenMotion(t, max_flexion_rad * s[:, None], max_flexion_rad * sd[:, None],
                        max_flexion_rad * sdd[:, None])
