"""Synthetic identification data made with the engine itself: known parameters, known noise.

The driven motion is the engine's built-in clear-hip-circle profile (1.52 s at 1 kHz, 1521
frames: the seed trial's length). The gymnast starts in a handstand, springs in equilibrium under
the starting load (``model.equilibrium``), turning about the bar at ``ROTATION_RATE_RAD_S``.
Measured joint centres = the engine's joint centres at the true parameters + Gaussian noise of
``noise_m`` per coordinate; the recorded initial state given to the problem is the true one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bemore.identify.problem import IdentificationProblem
from bemore.identify.space import ParameterSpace
from bemore.model import COST_POINTS, load_model, simulate
from bemore.model.profiles import HANDSTAND_HAND_ROTATION, clear_hip_circle_profile
from bemore.settings import load_gymnast, load_identification

RATE_HZ = 1000.0
ROTATION_RATE_RAD_S = 1.4


@dataclass
class SyntheticCase:
    """A problem built from known parameters (SI, dict) and its noise."""

    problem: IdentificationProblem
    truth: dict[str, float]
    noise_m: float


def handstand_start(model, P: np.ndarray, motion, rate_rad_s: float = ROTATION_RATE_RAD_S,
                    hand_rotation_rad: float = HANDSTAND_HAND_ROTATION
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Start states (B, n_free) each of the B parameter rows of ``P``: the hands at
    ``hand_rotation_rad`` (rad) about the bar, the springs in equilibrium under the motion's
    first driven posture, turning about the bar at ``rate_rad_s`` (rad/s), everything else
    at rest."""
    free = np.zeros(model.n_free)
    rotation = model.free_coordinates.index("hand_rotation")
    free[rotation] = hand_rotation_rad
    q0 = model.equilibrium(P, motion.q[0], free_q=free)
    qd0 = np.zeros_like(q0)
    qd0[:, rotation] = rate_rad_s
    return q0, qd0


def synthetic_case(
    truth: dict[str, float], noise_m: float, seed: int, frames: int = 1521
) -> SyntheticCase:
    """The identification problem of a synthetic trial made with ``truth``."""
    model = load_model("real_gymnast")
    motion = clear_hip_circle_profile(duration_s=(frames - 1) / RATE_HZ, rate_hz=RATE_HZ)
    P = model.parameter_matrix([truth])
    starts = handstand_start(model, P, motion)
    free_q0, free_qd0 = (a[0] for a in starts)
    simulation = simulate(model, P, motion, free_q0, free_qd0, outputs=("points",))
    assert simulation.valid[0]
    index = [model.point_names.index(name) for name in COST_POINTS]
    clean = simulation.points[0][:, index]
    noisy = clean + np.random.default_rng(seed).normal(0.0, noise_m, clean.shape)
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem(
        model, space, motion, free_q0, free_qd0, noisy, tuple(COST_POINTS)
    )
    # The truth of every identified parameter: the given values, the model's defaults elsewhere.
    complete = {name: float(P[0, model.parameter_names.index(name)]) for name in space.names}
    return SyntheticCase(problem=problem, truth={**complete, **truth}, noise_m=noise_m)
