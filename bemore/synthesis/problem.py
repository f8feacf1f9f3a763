"""The gesture optimisation problem: design variables, objective, constraints, batch evaluation.

Design variables (physical units): t_f (s), t_flexmax (s), φ_max (rad), and optionally the
mid-interval fractions of both phases (see :mod:`bemore.synthesis.gesture`). Constraints, all
declared as ``lower ≤ value ≤ upper``: t_f − t_flexmax ≥ min_extension_duration_s (linear), and
the rotation about the bar at t_f within the configured band (degrees, nonlinear). The bounds
are the box. The exemplary gymnast starts from the handstand (arms and body vertical above the
bar, φ = 0) with its springs in static equilibrium and zero velocities.

Each gesture is simulated on its own uniform grid of ``steps`` intervals over [0, t_f]: the
grid stretches with t_f, so the objective and the final rotation are smooth functions of the
design variables (no sample appears or vanishes under a finite-difference step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bemore.errors import OptimisationError
from bemore.model import DrivenMotion, Model, simulate
from bemore.settings import Synthesis
from bemore.synthesis.gesture import MONOTONIC_MID_FRACTION, GestureParameters, gesture_kinematics
from bemore.synthesis.results import OBJECTIVES, Profiles

HANDSTAND_HAND_ROTATION_RAD = np.pi / 2  # arms vertical above the bar (docs/model.md)
HAND_ROTATION = 2  # index of hand_rotation among the free coordinates (docs/model.md)
# Shortest phase simulated (s): a trial point with t_f − t_flexmax below it (which SLSQP may
# visit inside a line search) is simulated with t_flexmax pulled back, keeping it finite; the
# linear constraint itself still sees the true t_f − t_flexmax.
MIN_PHASE_S = 0.05
# Objective and rotation given to a gesture the engine cannot simulate (state diverged).
FAILED_OBJECTIVE = 1e9
FAILED_ROTATION_DEG = -1e3


def objective_value(name: str, torque_nm: np.ndarray, t_s: np.ndarray) -> np.ndarray:
    """Objective (…) of total shoulder torques (…, F) sampled on t_s (F,) s (trapezoid rule).

    ``abs_torque_integral``: ∫|C|dt (N·m·s); ``peak_torque``: max |C| (N·m);
    ``squared_torque_integral``: ∫C²dt (N²·m²·s).
    """
    if name == "abs_torque_integral":
        return np.trapezoid(np.abs(torque_nm), t_s, axis=-1)
    if name == "squared_torque_integral":
        return np.trapezoid(torque_nm**2, t_s, axis=-1)
    if name == "peak_torque":
        return np.abs(torque_nm).max(axis=-1)
    raise OptimisationError(f"unknown objective {name!r} (allowed: {', '.join(OBJECTIVES)})")


@dataclass(frozen=True)
class StartState:
    """Free coordinates and velocities (n_free,) of the exemplary gymnast at t = 0 (SI)."""

    free_q0: np.ndarray
    free_qd0: np.ndarray


def handstand_start(model: Model, P: np.ndarray) -> StartState:
    """The handstand at rest: φ = 0, arms vertical, springs in static equilibrium."""
    guess = np.zeros(model.n_free)
    guess[HAND_ROTATION] = HANDSTAND_HAND_ROTATION_RAD
    q0 = model.equilibrium(P, np.zeros(model.n_driven), free_q=guess)[0]
    if not np.all(np.isfinite(q0)):
        raise OptimisationError("the handstand has no static equilibrium for these parameters")
    return StartState(free_q0=q0, free_qd0=np.zeros(model.n_free))


class GestureProblem:
    """The synthesis problem for one athlete model; evaluates a batch of designs at a time.

    ``P`` (1, n_parameters) holds the exemplary model's parameters; ``steps`` is the number of
    sample intervals per gesture, each integrated in ``substeps`` steps; ``rotation_margin_deg``
    narrows the rotation band seen by the optimiser so that the returned gesture still satisfies
    the configured band when it is re-simulated on a finer grid.
    """

    def __init__(
        self,
        model: Model,
        P: np.ndarray,
        synthesis: Synthesis,
        objective: str = "abs_torque_integral",
        free_midpoints: bool = False,
        steps: int = 500,
        rotation_margin_deg: float = 0.0,
        substeps: int = 1,
    ):
        if objective not in OBJECTIVES:
            raise OptimisationError(
                f"unknown objective {objective!r} (allowed: {', '.join(OBJECTIVES)})"
            )
        self.model = model
        self.P = np.atleast_2d(np.asarray(P, float))
        self.synthesis = synthesis
        self.objective = objective
        self.free_midpoints = free_midpoints
        self.steps = int(steps)
        self.substeps = int(substeps)
        self.start = handstand_start(model, self.P)
        bounds = synthesis.bounds
        names = ["final_time_s", "flexion_end_time_s", "max_flexion_rad"]
        lower = [
            bounds.final_time_s.lower,
            bounds.flexion_end_time_s.lower,
            np.deg2rad(bounds.max_flexion_deg.lower),
        ]
        upper = [
            bounds.final_time_s.upper,
            bounds.flexion_end_time_s.upper,
            np.deg2rad(bounds.max_flexion_deg.upper),
        ]
        if free_midpoints:
            names += ["mid_fraction_flexion", "mid_fraction_extension"]
            lower += [MONOTONIC_MID_FRACTION[0]] * 2
            upper += [MONOTONIC_MID_FRACTION[1]] * 2
        self.names = tuple(names)
        self.lower = np.array(lower)
        self.upper = np.array(upper)
        band = synthesis.constraints.final_rotation_deg
        self.rotation_band_deg = (band.lower, band.upper)
        self.constraint_names = ("extension_duration_s", "final_rotation_deg")
        self.constraint_units = ("s", "deg")
        self.constraint_lower = np.array(
            [synthesis.constraints.min_extension_duration_s, band.lower + rotation_margin_deg]
        )
        self.constraint_upper = np.array([np.inf, band.upper - rotation_margin_deg])
        # What the optimiser divides the constraints by (s, deg): brings a 2° band and
        # tenths of seconds to comparable sizes.
        self.constraint_scale = np.array([1.0, 10.0])
        self.simulations = 0

    # ------------------------------------------------------------------ design vectors

    def design(self, x: np.ndarray) -> GestureParameters:
        """The gesture of one design vector (n,) in physical units."""
        values = [float(v) for v in x]
        return GestureParameters(*values)

    def vector(self, design: GestureParameters) -> np.ndarray:
        """The design vector (n,) of a gesture (inverse of :meth:`design`)."""
        values = design.to_dict()
        return np.array([values[name] for name in self.names])

    def linear_margin(self, X: np.ndarray) -> np.ndarray:
        """t_f − t_flexmax − minimum (B,) s: ≥ 0 where the linear constraint holds."""
        X = np.atleast_2d(X)
        return X[:, 0] - X[:, 1] - self.synthesis.constraints.min_extension_duration_s

    # ------------------------------------------------------------------ simulation

    def _motion(self, x: np.ndarray, t: np.ndarray) -> DrivenMotion:
        """Driven shoulder motion of design x on the time grid t (F,) s."""
        design = self.design(x)
        t_m = min(design.flexion_end_time_s, design.final_time_s - MIN_PHASE_S)
        kin = gesture_kinematics(
            t,
            design.final_time_s,
            t_m,
            design.max_flexion_rad,
            design.mid_fraction_flexion,
            design.mid_fraction_extension,
        )[:, 0]
        return DrivenMotion(t, kin[0][:, None], kin[1][:, None], kin[2][:, None])

    def simulate_design(
        self, x: np.ndarray, t: np.ndarray, substeps: int = 1, points: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, bool]:
        """Simulate design x on grid t (F,): torque (F,) N·m, free q (F, 5), free q̇ (F, 5),
        points (F, n_points, 2) m or None, and whether the engine could simulate it."""
        outputs = ("free_q", "free_qd", "efforts") + (("points",) if points else ())
        sim = simulate(
            self.model,
            self.P,
            self._motion(x, t),
            self.start.free_q0,
            self.start.free_qd0,
            outputs=outputs,
            substeps=substeps,
        )
        self.simulations += 1
        pts = sim.points[0] if points else None
        return sim.efforts[0, :, 0], sim.free_q[0], sim.free_qd[0], pts, bool(sim.valid[0])

    def evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objective (B,) and constraint values (B, 2) of the designs X (B, n).

        The engine batches parameter vectors under one shared driven motion, and every design
        here has its own motion, so each design is one engine call on its own time grid.
        """
        X = np.atleast_2d(np.asarray(X, float))
        f = np.empty(len(X))
        rotation = np.empty(len(X))
        for row, x in enumerate(X):
            t = np.linspace(0.0, x[0], self.steps + 1)
            torque, q, _, _, ok = self.simulate_design(x, t, substeps=self.substeps)
            if ok and np.all(np.isfinite(torque)):
                f[row] = objective_value(self.objective, torque, t)
                rotation[row] = np.rad2deg(q[-1, HAND_ROTATION] - self.start.free_q0[HAND_ROTATION])
            else:
                f[row], rotation[row] = FAILED_OBJECTIVE, FAILED_ROTATION_DEG
        return f, np.column_stack([X[:, 0] - X[:, 1], rotation])

    # ------------------------------------------------------------------ outputs

    def profiles(self, x: np.ndarray, rate_hz: float = 1000.0, substeps: int = 2) -> Profiles:
        """Every profile of design x sampled at ``rate_hz`` from 0 to the first sample ≥ t_f.

        After t_f the shoulder rests at 0 (the torque keeps it there). ``substeps`` integration
        steps per sample. ``rotation_rad`` is the
        hand rotation since the start; points are relative to the bar's rest position.
        """
        t_f = float(x[0])
        count = int(np.ceil(t_f * rate_hz - 1e-9)) + 1
        t = np.arange(count) / rate_hz
        torque, q, _, points, ok = self.simulate_design(x, t, substeps=substeps, points=True)
        if not ok:
            raise OptimisationError("the engine could not simulate the returned gesture")
        design = self.design(x)
        kin = gesture_kinematics(
            t,
            design.final_time_s,
            design.flexion_end_time_s,
            design.max_flexion_rad,
            design.mid_fraction_flexion,
            design.mid_fraction_extension,
        )[:, 0]
        names = self.model.point_names
        order = [name for name in ("toe", "hip", "shoulder", "bar") if name in names]
        return Profiles(
            t_s=t,
            angle_rad=kin[0],
            velocity_rad_s=kin[1],
            acceleration_rad_s2=kin[2],
            jerk_rad_s3=kin[3],
            torque_total_nm=torque,
            rotation_rad=q[:, HAND_ROTATION] - self.start.free_q0[HAND_ROTATION],
            bar_x_m=q[:, 0],
            bar_y_m=q[:, 1],
            points={name: points[:, names.index(name)] for name in order},
        )
