"""The gesture optimisation problem: design variables, objective, constraints, batch evaluation.

Design variables (physical units): t_f (s), t_flexmax (s), φ_max (rad), and optionally the
mid-interval fractions of both phases (see :mod:`bemore.synthesis.gesture`). Constraints, all
declared as ``lower ≤ value ≤ upper``: t_f − t_flexmax ≥ min_extension_duration_s (linear), the
rotation about the bar at t_f within the configured band (degrees, nonlinear) and, optionally,
the peak torque of one shoulder below the athlete's limit (N·m). The bounds are the box. The
exemplary gymnast starts from the handstand (arms and body vertical above the bar, φ = 0) with
its springs in static equilibrium, at rest unless a start rotation rate is given.

One batched evaluation (:meth:`GestureProblem.evaluate_batch`) simulates a whole batch of
designs in one engine call: every design has its own driven motion on ONE shared uniform grid
of step ``step_s``, padded to the longest t_f of the batch (after its own t_f a shoulder rests
at φ = 0). Each member's rotation is read at its own t_f by cubic Hermite interpolation of the
rotation and its rate between the two samples around t_f, and its integrals run to t_f with a
partial last interval, so objective and rotation are smooth (C¹) functions of t_f. A member's
figures do not depend on the batch it was evaluated in (fixed step, causal integration).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bemore.errors import OptimisationError
from bemore.model import DrivenMotion, Model, simulate
from bemore.model.equilibrium import oracle_motion, spring_equilibrium
from bemore.optimize.constrained import ConstrainedProblem
from bemore.settings import Synthesis
from bemore.synthesis.gesture import MONOTONIC_MID_FRACTION, GestureParameters, gesture_kinematics
from bemore.synthesis.results import OBJECTIVES, Profiles

HANDSTAND_HAND_ROTATION_RAD = np.pi / 2  # arms vertical above the bar (docs/model.md)
HAND_ROTATION = 2  # index of hand_rotation among the free coordinates (docs/model.md)
# Shortest phase simulated (s): a trial point with t_f − t_flexmax below it (which SLSQP may
# visit inside a line search) is simulated with t_flexmax pulled back, keeping it finite; the
# linear constraint itself still sees the true t_f − t_flexmax.
MIN_PHASE_S = 0.05
# Objective, rotation and peak torque given to a gesture the engine cannot simulate (diverged).
FAILED_OBJECTIVE = 1e9
FAILED_ROTATION_DEG = -1e3
FAILED_TORQUE_NM = 1e6
# What the optimiser divides each constraint by (s, deg, N·m): brings tenths of seconds, a 2°
# band and tens of N·m to comparable sizes.
CONSTRAINT_SCALES = {"extension_duration_s": 1.0, "final_rotation_deg": 10.0,
                     "peak_torque_per_shoulder_nm": 100.0}


def abs_linear_integral(start: np.ndarray, end: np.ndarray, width_s: np.ndarray) -> np.ndarray:
    """∫|C|dt (…) over intervals of ``width_s`` where C runs linearly from ``start`` to ``end``.

    Exact for the piecewise-linear interpolant, zero crossing included: (|a| + |b|)/2·w without
    a sign change, (a² + b²)/(2(|a| + |b|))·w with one. Unlike the trapezoid rule on |C|, this is
    C¹ in a and b (slope ±w/2 on both sides of a zero), so the objective has no kink each time a
    sample's torque changes sign under a design change — what finite-difference SQP needs.
    """
    a, b = np.abs(start), np.abs(end)
    same = start * end >= 0.0
    total = np.where(same, 1.0, a + b)
    crossing = (start**2 + end**2) / (2.0 * total)
    return width_s * np.where(same, 0.5 * (a + b), crossing)


def objective_value(name: str, torque_nm: np.ndarray, t_s: np.ndarray) -> np.ndarray:
    """Objective (…) of total shoulder torques (…, F) sampled on t_s (F,) s.

    ``abs_torque_integral``: ∫|C|dt (N·m·s) of the linear interpolant
    (:func:`abs_linear_integral`); ``peak_torque``: max |C| (N·m); ``squared_torque_integral``:
    ∫C²dt (N²·m²·s, trapezoid rule).
    """
    if name == "abs_torque_integral":
        widths = np.diff(t_s)
        return abs_linear_integral(torque_nm[..., :-1], torque_nm[..., 1:], widths).sum(axis=-1)
    if name == "squared_torque_integral":
        return np.trapezoid(torque_nm**2, t_s, axis=-1)
    if name == "peak_torque":
        return np.abs(torque_nm).max(axis=-1)
    raise OptimisationError(f"unknown objective {name!r} (allowed: {', '.join(OBJECTIVES)})")


def integrals_to(
    final_time_s: np.ndarray, step_s: float, torque_nm: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """∫₀^{t_f}|C|dt (N·m·s), ∫₀^{t_f}C²dt (N²·m²·s), max |C| on [0, t_f] (N·m), each (B,).

    ``torque_nm`` (B, F) is sampled at k·step_s; t_f (B,) lies inside the grid (before its last
    sample). Both integrals are those of the linear interpolant of C (:func:`abs_linear_integral`
    for |C|, the trapezoid rule for C²) over the whole intervals, then over a partial last
    interval to t_f with C(t_f) interpolated linearly: C¹ in t_f.
    """
    B, F = torque_nm.shape
    k, theta = _bracket(final_time_s, step_s, F)
    rows = np.arange(B)
    at_k = torque_nm[rows, k]
    end = at_k + theta * (torque_nm[rows, k + 1] - at_k)
    partial = theta * step_s
    pieces = (
        abs_linear_integral(torque_nm[:, :-1], torque_nm[:, 1:], step_s),
        0.5 * step_s * (torque_nm[:, 1:] ** 2 + torque_nm[:, :-1] ** 2),
    )
    whole = [np.concatenate([np.zeros((B, 1)), np.cumsum(p, axis=1)], axis=1)[rows, k]
             for p in pieces]
    abs_integral = whole[0] + abs_linear_integral(at_k, end, partial)
    squared_integral = whole[1] + 0.5 * partial * (at_k**2 + end**2)
    before = np.where(np.arange(F)[None, :] <= k[:, None], np.abs(torque_nm), 0.0).max(axis=1)
    return abs_integral, squared_integral, np.maximum(before, np.abs(end))


def hermite_at(
    final_time_s: np.ndarray, step_s: float, value: np.ndarray, rate: np.ndarray
) -> np.ndarray:
    """Value (B,) at t_f (B,) of signals sampled at k·step_s, value and rate (B, F) in SI.

    Cubic Hermite interpolation between the two samples around t_f (error O(step⁴)).
    """
    B, F = value.shape
    k, s = _bracket(final_time_s, step_s, F)
    rows = np.arange(B)
    h00 = 2 * s**3 - 3 * s**2 + 1
    h10 = s**3 - 2 * s**2 + s
    h01 = -2 * s**3 + 3 * s**2
    h11 = s**3 - s**2
    return (
        h00 * value[rows, k]
        + h10 * step_s * rate[rows, k]
        + h01 * value[rows, k + 1]
        + h11 * step_s * rate[rows, k + 1]
    )


def _bracket(final_time_s: np.ndarray, step_s: float, F: int) -> tuple[np.ndarray, np.ndarray]:
    """Index k (B,) with k·step ≤ t_f < (k + 1)·step and the fraction θ ∈ [0, 1) (B,)."""
    position = np.asarray(final_time_s, float) / step_s
    k = np.clip(np.floor(position).astype(int), 0, F - 2)
    return k, position - k


def grid_for(final_time_s: np.ndarray, step_s: float) -> np.ndarray:
    """The shared time grid (F,) s of a batch: k·step_s up to the first sample after max t_f."""
    count = int(np.floor(float(np.max(final_time_s)) / step_s + 1e-9)) + 2
    return np.arange(count) * step_s


@dataclass
class StartState:
    """Free coordinates and velocities (n_free,) of the exemplary gymnast at t = 0 (SI)."""

    free_q0: np.ndarray
    free_qd0: np.ndarray


def handstand_start(model: Model, P: np.ndarray, rotation_rate_rad_s: float = 0.0) -> StartState:
    """The handstand: φ = 0, arms vertical, springs in static equilibrium under gravity.

    ``rotation_rate_rad_s`` is the initial rotation rate about the bar (rad/s, positive in the
    circle's direction); 0 is the handstand at rest.
    """
    guess = np.zeros(model.n_free)
    guess[HAND_ROTATION] = HANDSTAND_HAND_ROTATION_RAD
    # From the engine's kernel (loaded anyway), not Model.equilibrium's numba dynamics (≈ 12 s
    # to compile on a first run); the same state to 0.1 µm (tests/synthesis/test_problem.py).
    at_rest = np.zeros(model.n_driven)
    q0 = spring_equilibrium(model, P, guess, oracle_motion(at_rest, at_rest, at_rest))[0]
    if not np.all(np.isfinite(q0)):
        raise OptimisationError("the handstand has no static equilibrium for these parameters")
    qd0 = np.zeros(model.n_free)
    qd0[HAND_ROTATION] = rotation_rate_rad_s
    return StartState(free_q0=q0, free_qd0=qd0)


@dataclass
class GestureEvaluation:
    """What one batched evaluation gives for every design (B,): objective and constraints, the
    rotation about the bar at t_f (deg), ∫|C|dt (N·m·s), ∫C²dt (N²·m²·s) and peak |C| (N·m) of
    the total shoulder torque C on [0, t_f], whether the engine could simulate each design, and
    the number of engine calls the batch took."""

    objective: np.ndarray
    constraints: np.ndarray
    rotation_deg: np.ndarray
    abs_torque_integral: np.ndarray
    squared_torque_integral: np.ndarray
    peak_torque_nm: np.ndarray
    valid: np.ndarray
    engine_calls: int

    def to_dict(self) -> dict[str, list | int]:
        """Plain-JSON form."""
        return {key: (value.tolist() if isinstance(value, np.ndarray) else value)
                for key, value in vars(self).items()}


class GestureProblem(ConstrainedProblem):
    """The synthesis problem for one athlete model; evaluates a batch of designs at a time.

    A :class:`~bemore.optimize.ConstrainedProblem`: the design box is the configured bounds
    (``names``: t_f s, t_flexmax s, φ_max rad, optionally the two mid fractions), the constraints
    are named by ``constraint_names`` (units in ``constraint_units``).

    ``P`` (1, n_parameters) holds the exemplary model's parameters. Designs are simulated on a
    shared grid of step ``step_s`` (default: the longest allowed t_f divided by ``steps``), each
    sample interval integrated in ``substeps`` steps. ``rotation_margin_deg`` narrows the
    rotation band seen by the optimiser so that the returned gesture still satisfies the
    configured band when it is re-simulated on a finer grid. ``start_rate_rad_s``: initial
    rotation rate about the bar. ``torque_limit_nm``: when given, the peak torque of ONE shoulder
    (half the total) must stay at or below it (N·m), an extra nonlinear constraint, given to
    the optimiser narrowed by the fraction ``torque_margin``.
    """

    def __init__(
        self,
        model: Model,
        P: np.ndarray,
        synthesis: Synthesis,
        objective: str = "abs_torque_integral",
        free_midpoints: bool = False,
        steps: int = 400,
        rotation_margin_deg: float = 0.0,
        substeps: int = 1,
        step_s: float | None = None,
        start_rate_rad_s: float = 0.0,
        torque_limit_nm: float | None = None,
        start: StartState | None = None,
        torque_margin: float = 0.0,
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
        bounds = synthesis.bounds
        self.step_s = float(step_s) if step_s else bounds.final_time_s.upper / int(steps)
        self.steps = round(bounds.final_time_s.upper / self.step_s)
        self.substeps = int(substeps)
        self.start = start or handstand_start(model, self.P, start_rate_rad_s)
        self.torque_limit_nm = torque_limit_nm
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
        band = synthesis.constraints.final_rotation_deg
        self.rotation_band_deg = (band.lower, band.upper)
        constraint_names = ["extension_duration_s", "final_rotation_deg"]
        low = [synthesis.constraints.min_extension_duration_s, band.lower + rotation_margin_deg]
        high = [np.inf, band.upper - rotation_margin_deg]
        if torque_limit_nm is not None:
            if not torque_limit_nm > 0:
                raise OptimisationError(f"torque limit {torque_limit_nm} N·m: must be positive")
            constraint_names.append("peak_torque_per_shoulder_nm")
            low.append(-np.inf)
            # narrowed by the relative margin for the optimiser, as the rotation band is, so that
            # the verified gesture holds the limit itself at every re-simulated sample
            high.append(float(torque_limit_nm) * (1.0 - torque_margin))
        super().__init__(
            lower, upper, names,
            constraint_lower=low, constraint_upper=high, constraint_names=constraint_names,
            constraint_units=[
                {"extension_duration_s": "s", "final_rotation_deg": "deg"}.get(name, "N·m")
                for name in constraint_names
            ],
            constraint_scale=[CONSTRAINT_SCALES[name] for name in constraint_names],
        )
        self.simulations = 0
        self.engine_calls = 0

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

    def kinematics(self, X: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Shoulder angle, velocity, acceleration, jerk (4, B, F) of designs X (B, n) on t (F,).

        A trial point with t_f − t_flexmax < MIN_PHASE_S is simulated with t_flexmax pulled back.
        """
        X = np.atleast_2d(np.asarray(X, float))
        columns = [X[:, i] for i in range(X.shape[1])]
        columns[1] = np.minimum(columns[1], columns[0] - MIN_PHASE_S)
        return gesture_kinematics(t, *columns)

    def simulate_batch(
        self, X: np.ndarray, t: np.ndarray, substeps: int, points: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
        """Simulate designs X (B, n) on the shared grid t (F,) s in ONE engine call.

        Returns the total shoulder torque (B, F) N·m, free q and q̇ (B, F, n_free) SI, named
        points (B, F, n_points, 2) m or None, and whether each member could be simulated (B,).
        """
        X = np.atleast_2d(np.asarray(X, float))
        kin = self.kinematics(X, t)
        motion = DrivenMotion(t, kin[0][..., None], kin[1][..., None], kin[2][..., None])
        outputs = ("free_q", "free_qd", "efforts") + (("points",) if points else ())
        sim = simulate(
            self.model,
            np.repeat(self.P, len(X), axis=0),
            motion,
            self.start.free_q0,
            self.start.free_qd0,
            outputs=outputs,
            substeps=substeps,
        )
        self.simulations += len(X)
        self.engine_calls += 1
        return (
            sim.efforts[:, :, 0],
            sim.free_q,
            sim.free_qd,
            sim.points if points else None,
            np.asarray(sim.valid, bool),
        )

    def simulate_design(
        self, x: np.ndarray, t: np.ndarray, substeps: int = 1, points: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, bool]:
        """Simulate design x on grid t (F,): torque (F,) N·m, free q (F, 5), free q̇ (F, 5),
        points (F, n_points, 2) m or None, and whether the engine could simulate it."""
        torque, q, qd, pts, ok = self.simulate_batch(np.asarray(x)[None], t, substeps, points)
        return torque[0], q[0], qd[0], (pts[0] if points else None), bool(ok[0])

    def evaluate_batch(self, X: np.ndarray) -> GestureEvaluation:
        """Objective, constraints, rotation and torque figures of designs X (B, n), one engine
        call on the shared grid (see the module docstring)."""
        X = np.atleast_2d(np.asarray(X, float))
        t_f = X[:, 0]
        t = grid_for(t_f, self.step_s)
        calls = self.engine_calls
        torque, q, qd, _, valid = self.simulate_batch(X, t, self.substeps)
        with np.errstate(invalid="ignore"):
            valid = valid & np.all(np.isfinite(torque), axis=1)
        torque = np.where(valid[:, None], torque, 0.0)
        rotation = hermite_at(
            t_f, self.step_s, q[:, :, HAND_ROTATION], qd[:, :, HAND_ROTATION]
        ) - self.start.free_q0[HAND_ROTATION]
        abs_integral, squared_integral, peak = integrals_to(t_f, self.step_s, torque)
        objective = {"abs_torque_integral": abs_integral,
                     "squared_torque_integral": squared_integral,
                     "peak_torque": peak}[self.objective]
        objective = np.where(valid, objective, FAILED_OBJECTIVE)
        rotation_deg = np.where(valid, np.rad2deg(rotation), FAILED_ROTATION_DEG)
        peak = np.where(valid, peak, FAILED_TORQUE_NM)
        columns = [X[:, 0] - X[:, 1], rotation_deg]
        if self.torque_limit_nm is not None:
            columns.append(0.5 * peak)  # each shoulder takes half
        return GestureEvaluation(
            objective=objective,
            constraints=np.column_stack(columns),
            rotation_deg=rotation_deg,
            abs_torque_integral=np.where(valid, abs_integral, FAILED_OBJECTIVE),
            squared_torque_integral=np.where(valid, squared_integral, FAILED_OBJECTIVE),
            peak_torque_nm=peak,
            valid=valid,
            engine_calls=self.engine_calls - calls,
        )

    def _evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objective (B,) and constraint values (B, m) of the designs X (B, n): one engine call."""
        result = self.evaluate_batch(X)
        return result.objective, result.constraints

    # ------------------------------------------------------------------ outputs

    def static_torque(self, free_q: np.ndarray, angle_rad: np.ndarray) -> np.ndarray:
        """Static shoulder torque (F,) N·m, both shoulders, at configurations (free q (F, n_free),
        shoulder angle (F,)): inverse dynamics with zero velocities and accelerations (gravity).

        The spring-dampers act on the free coordinates only, so the shoulder row of the inverse
        dynamics along any pace of the same path is τ_static + pace²·(τ − τ_static): velocity
        products and accelerations both scale with pace² (``bemore drive --speed``).
        """
        from bemore.model.kinematics import static_driven_effort

        V, _ = self.model.fields(self.P[:1])
        return static_driven_effort(self.model._T, V[0], np.atleast_2d(free_q),
                                    np.asarray(angle_rad, dtype=float)[:, None],
                                    self.model.n_driven - 1)

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
            static_torque_total_nm=self.static_torque(q, kin[0]),
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
