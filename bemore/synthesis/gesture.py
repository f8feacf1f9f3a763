"""The shoulder gesture: two joined 8th-order polynomials (docs/synthesis.md, after Williams 2013).

Phase 1 flexes the shoulder from 0 to φ_max on [0, t_flexmax]; phase 2 extends it back to 0 on
[t_flexmax, t_f]. Each phase is a polynomial of degree 8 in the normalised time
s = (t − t_start) / duration ∈ [0, 1], solved from nine conditions as a linear system:
angle, velocity, acceleration and jerk at both ends (rest to rest: all derivatives zero) and the
angle at mid-interval, φ(s = ½) = start + f·(end − start), with ``f`` the *mid fraction*.

What the conditions imply (tested in ``tests/synthesis/test_gesture.py``):

* the eight end conditions leave one free direction, s⁴(1 − s)⁴, whose t⁸ coefficient is 1 and
  whose value at s = ½ is 1/256; the 7th-order rest-to-rest polynomial already passes through
  half the amplitude at s = ½, so with f = ½ (the seed's choice) the t⁸ coefficient vanishes and
  the gesture is the 7th-order one. Any other f gives c₈ = 256·(f − ½)·amplitude.
* dφ/ds = s³(1 − s)³·(140 + 4·c₈/amplitude·(1 − 2s))·amplitude, so the phase is monotonic iff
  |f − ½| ≤ 35/256 ≈ 0.137: :data:`MONOTONIC_MID_FRACTION` is the widest box for the optional
  mid-fraction design variables that never makes the shoulder overshoot.
* every phase starts and ends with zero velocity, acceleration and jerk, so the joined profile is
  continuous up to the jerk at t_flexmax.

Angles in radians, times in seconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import factorial

import numpy as np

DEGREE = 8
N_COEFFICIENTS = DEGREE + 1
# Highest derivative imposed at the phase ends: 3 (the jerk).
END_DERIVATIVES = 3
# Mid fractions within ½ ± 35/256 keep each phase monotonic (see the module docstring).
MONOTONIC_MID_FRACTION = (0.5 - 35.0 / 256.0, 0.5 + 35.0 / 256.0)


def _derivative_row(s: float, order: int) -> np.ndarray:
    """Row r with r @ c = d^order/ds^order of Σ c_k s^k at ``s`` (dimensionless)."""
    row = np.zeros(N_COEFFICIENTS)
    for k in range(order, N_COEFFICIENTS):
        row[k] = factorial(k) / factorial(k - order) * s ** (k - order)
    return row


def boundary_matrix() -> np.ndarray:
    """The 9×9 system of one phase in normalised time: rows = conditions, columns = s^0..s^8.

    Rows 0–3: angle, velocity, acceleration, jerk at s = 0; rows 4–7: the same at s = 1;
    row 8: the angle at s = ½. Normalising time keeps the matrix well conditioned whatever the
    phase duration (a raw Vandermonde matrix in seconds would mix t⁰ and t⁸ ≈ 3⁸).
    """
    rows = [_derivative_row(0.0, order) for order in range(END_DERIVATIVES + 1)]
    rows += [_derivative_row(1.0, order) for order in range(END_DERIVATIVES + 1)]
    rows.append(_derivative_row(0.5, 0))
    return np.array(rows)


_BOUNDARY = boundary_matrix()


def phase_coefficients(
    start_rad: np.ndarray | float, end_rad: np.ndarray | float, mid_fraction: np.ndarray | float
) -> np.ndarray:
    """Coefficients (…, 9) of one rest-to-rest phase in normalised time s ∈ [0, 1].

    ``start_rad`` and ``end_rad`` are the angles at both ends (rad); ``mid_fraction`` places the
    angle at s = ½ at start + mid_fraction·(end − start). Broadcasts over leading dimensions:
    all the right-hand sides of a batch are solved in one ``numpy.linalg.solve`` call.
    Coefficient k multiplies s^k and is in rad.
    """
    start, end, fraction = np.broadcast_arrays(
        np.asarray(start_rad, float), np.asarray(end_rad, float), np.asarray(mid_fraction, float)
    )
    rhs = np.zeros((*start.shape, N_COEFFICIENTS))
    rhs[..., 0] = start
    rhs[..., 4] = end
    rhs[..., 8] = start + fraction * (end - start)
    flat = rhs.reshape(-1, N_COEFFICIENTS).T
    solution = np.linalg.solve(_BOUNDARY, flat)
    return solution.T.reshape(rhs.shape)


# Derivative factors k!/(k − d)! of s^k (rows d = 0..3, columns k = 0..8; 0 where k < d).
_FACTORS = np.array(
    [
        [factorial(k) / factorial(k - d) if k >= d else 0.0 for k in range(N_COEFFICIENTS)]
        for d in range(END_DERIVATIVES + 1)
    ]
)


def _sample_phases(t, final_time, flexion_end, flexion, extension, factors, out):
    """Fill out (4, B, F) with angle, velocity, acceleration, jerk of B two-phase gestures.

    Horner's rule over whole (B, F) arrays, one coefficient array per power (never a (B, F, 9)
    temporary), the operations in the order of the scalar recurrence
    ``acc = acc·s + factor·c_k`` then ``× duration^-d``: numpy, so that the synthesis loads no
    compiler (numba's start-up was ≈ 1 s of every ``bemore synthesize``).
    """
    t_f, t_m, time = final_time[:, None], flexion_end[:, None], t[None, :]
    first = time <= t_m
    start = np.where(first, 0.0, t_m)
    duration = np.where(first, t_m, t_f - t_m)
    s = np.minimum(np.maximum((time - start) / duration, 0.0), 1.0)
    coefficients = [np.where(first, flexion[:, k, None], extension[:, k, None])
                    for k in range(N_COEFFICIENTS)]
    outside = (time < 0.0) | (time > t_f)
    scale = np.ones_like(s)
    acc, term = np.empty_like(s), np.empty_like(s)  # in place: allocation was half the time
    for d in range(END_DERIVATIVES + 1):
        acc.fill(0.0)
        for k in range(N_COEFFICIENTS - 1, d - 1, -1):
            np.multiply(acc, s, out=acc)
            np.multiply(coefficients[k], factors[d, k], out=term)
            np.add(acc, term, out=acc)
        np.multiply(acc, scale, out=out[d])
        out[d][outside] = 0.0
        np.divide(scale, duration, out=scale)


@dataclass(frozen=True)
class GestureParameters:
    """The design variables of one gesture.

    final_time_s: t_f (s); flexion_end_time_s: t_flexmax (s); max_flexion_rad: φ_max (rad);
    mid_fraction_flexion / mid_fraction_extension: where each phase passes at its mid-interval,
    as a fraction of its amplitude (½ = the seed's gesture, the 7th-order polynomial).
    """

    final_time_s: float
    flexion_end_time_s: float
    max_flexion_rad: float
    mid_fraction_flexion: float = 0.5
    mid_fraction_extension: float = 0.5

    def to_dict(self) -> dict[str, float]:
        """Plain-JSON form (SI units)."""
        return {key: float(value) for key, value in asdict(self).items()}


def gesture_kinematics(
    t: np.ndarray,
    final_time_s: np.ndarray | float,
    flexion_end_time_s: np.ndarray | float,
    max_flexion_rad: np.ndarray | float,
    mid_fraction_flexion: np.ndarray | float = 0.5,
    mid_fraction_extension: np.ndarray | float = 0.5,
) -> np.ndarray:
    """Shoulder angle, velocity, acceleration and jerk (4, B, F) of B gestures at times t (F,) s.

    Design variables are scalars or (B,) arrays; units rad, rad/s, rad/s², rad/s³. Before 0 and
    after t_f the shoulder rests at 0. Phase 1 covers t ≤ t_flexmax, phase 2 the rest.
    """
    t = np.asarray(t, float)
    t_f, t_m, phi, f1, f2 = (
        np.atleast_1d(np.asarray(value, float))
        for value in (
            final_time_s,
            flexion_end_time_s,
            max_flexion_rad,
            mid_fraction_flexion,
            mid_fraction_extension,
        )
    )
    t_f, t_m, phi, f1, f2 = (
        np.ascontiguousarray(a) for a in np.broadcast_arrays(t_f, t_m, phi, f1, f2)
    )
    flexion = phase_coefficients(0.0, phi, f1)  # (B, 9)
    extension = phase_coefficients(phi, 0.0, f2)
    out = np.empty((END_DERIVATIVES + 1, t_f.size, t.size))
    _sample_phases(np.ascontiguousarray(t), t_f, t_m, flexion, extension, _FACTORS, out)
    return out


def sample_gesture(parameters: GestureParameters, t: np.ndarray) -> np.ndarray:
    """Angle, velocity, acceleration and jerk (4, F) of one gesture at times t (F,) s."""
    return gesture_kinematics(
        t,
        parameters.final_time_s,
        parameters.flexion_end_time_s,
        parameters.max_flexion_rad,
        parameters.mid_fraction_flexion,
        parameters.mid_fraction_extension,
    )[:, 0, :]


def gesture_design_derivatives(
    t: np.ndarray,
    final_time_s: np.ndarray | float,
    flexion_end_time_s: np.ndarray | float,
    max_flexion_rad: np.ndarray | float,
    mid_fraction_flexion: np.ndarray | float = 0.5,
    mid_fraction_extension: np.ndarray | float = 0.5,
    kinematics: np.ndarray | None = None,
) -> np.ndarray:
    """Exact derivatives (3, 3, B, F) of angle, velocity and acceleration (first axis; rad,
    rad/s, rad/s²) with respect to t_f, t_flexmax (per s) and φ_max (per rad) (second axis) of
    B gestures at times t (F,) s, the mid fractions held fixed.

    Each phase is X₀(t) = start + amp·p((t − a)/T) with p fixed by its mid fraction, so with
    X_d its d-th time derivative: ∂X_d/∂a = −X_{d+1}, ∂X_d/∂T = −X_{d+1}·(t − a)/T − d·X_d/T,
    and X_d is linear and homogeneous in φ_max (both phases' start and amplitude are ±φ_max or
    0). Phase 1 has a = 0, T = t_flexmax; phase 2 a = t_flexmax, T = t_f − t_flexmax. Before 0
    and after t_f the shoulder rests: zero derivatives. ``kinematics``: the gestures'
    :func:`gesture_kinematics` on t if the caller has them already (else computed).
    """
    t = np.asarray(t, float)
    kin = kinematics if kinematics is not None else gesture_kinematics(
        t, final_time_s, flexion_end_time_s, max_flexion_rad, mid_fraction_flexion,
        mid_fraction_extension)
    # Linear and homogeneous in φ_max: the derivative is the gesture of amplitude 1.
    phi = np.broadcast_to(np.asarray(max_flexion_rad, float), (kin.shape[1],))
    unit = np.divide(kin, phi[:, None], out=np.zeros_like(kin), where=phi[:, None] != 0.0)
    if np.any(phi == 0.0):
        unit = gesture_kinematics(t, final_time_s, flexion_end_time_s, 1.0,
                                  mid_fraction_flexion, mid_fraction_extension)
    B = kin.shape[1]
    t_f = np.broadcast_to(np.asarray(final_time_s, float), (B,))[:, None]
    t_m = np.broadcast_to(np.asarray(flexion_end_time_s, float), (B,))[:, None]
    time = t[None, :]
    first = time <= t_m
    start = np.where(first, 0.0, t_m)
    duration = np.where(first, t_m, t_f - t_m)
    inside = (time >= 0.0) & (time <= t_f)
    out = np.zeros((3, 3, B, t.size))
    for d in range(3):
        by_start = -kin[d + 1]
        by_duration = -kin[d + 1] * (time - start) / duration - d * kin[d] / duration
        out[d, 0] = np.where(first, 0.0, by_duration)
        out[d, 1] = np.where(first, by_duration, by_start - by_duration)
        out[d, 2] = unit[d]
        out[d, :2] *= inside
    return out
