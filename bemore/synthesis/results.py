"""Plain result records of the synthesis; each serialises to JSON (SI units, degrees labelled)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bemore.optimize.result import OptimisationResult
from bemore.synthesis.gesture import GestureParameters

# Objective name → unit (∫|C|dt, max |C|, ∫C²dt of the total shoulder torque C).
OBJECTIVES = {
    "abs_torque_integral": "N·m·s",
    "peak_torque": "N·m",
    "squared_torque_integral": "N²·m²·s",
}


@dataclass
class Profiles:
    """Time series of one gesture, sampled on ``t_s`` (F,) from 0 to t_f.

    Angles in rad, velocities rad/s, accelerations rad/s², jerk rad/s³, torques N·m, lengths m.
    ``rotation_rad`` is the rotation about the bar accumulated since the start (positive in the
    circle direction). ``points`` maps a named point to its (F, 2) trajectory in the bar frame, in
    the order in which the stick figure joins them. ``static_torque_total_nm`` is the static
    (gravity) part of ``torque_total_nm``: the shoulder row of the exemplary model's inverse
    dynamics at the same configurations with zero velocity and acceleration (both shoulders).
    """

    t_s: np.ndarray
    angle_rad: np.ndarray
    velocity_rad_s: np.ndarray
    acceleration_rad_s2: np.ndarray
    jerk_rad_s3: np.ndarray
    torque_total_nm: np.ndarray
    rotation_rad: np.ndarray
    bar_x_m: np.ndarray
    bar_y_m: np.ndarray
    points: dict[str, np.ndarray] = field(default_factory=dict)
    static_torque_total_nm: np.ndarray | None = None

    @property
    def torque_per_shoulder_nm(self) -> np.ndarray:
        """Torque at one shoulder (N·m): each shoulder takes half of the total."""
        return 0.5 * self.torque_total_nm

    @property
    def static_torque_per_shoulder_nm(self) -> np.ndarray | None:
        """Static (gravity) torque at one shoulder (N·m), or None when not computed."""
        if self.static_torque_total_nm is None:
            return None
        return 0.5 * self.static_torque_total_nm


@dataclass
class ConstraintStatus:
    """One constraint at the returned gesture: value, allowed range, whether it holds."""

    name: str
    value: float
    lower: float | None
    upper: float | None
    unit: str
    satisfied: bool

    @property
    def violation(self) -> float:
        """How far outside its range the value is (0 when satisfied), in ``unit``."""
        below = (self.lower - self.value) if self.lower is not None else 0.0
        above = (self.value - self.upper) if self.upper is not None else 0.0
        return max(0.0, below, above)


@dataclass
class SynthesisResult:
    """What ``bemore synthesize`` found and how (written to gesture.json)."""

    design: GestureParameters
    objective: str
    objective_value: float
    objective_unit: str
    final_rotation_deg: float
    constraints: list[ConstraintStatus]
    feasible: bool
    method: str
    starts: int
    elapsed_s: float
    message: str
    inputs: dict[str, Any]
    # what the optimisers found and what it cost (search then polish, on their own grids): x, fun,
    # constraints, maxcv, nfev, njev, nit, nbatch, every local run, the history of batches
    optimisation: OptimisationResult
    design_position: dict[str, float] = field(default_factory=dict)
    peak_torque_per_shoulder_nm: float = float("nan")  # at the returned gesture, re-simulated
    engine_calls: int = 0  # simulate() calls of the in-process problems (0 on a Dask cluster)
    timings_s: dict[str, float] = field(default_factory=dict)  # wall time of each stage
    # what the gesture asks of the bench and the athlete (bemore.synthesis.requirements)
    bench_requirements: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (design variables in SI and φ_max also in degrees)."""
        data = asdict(self)
        data["design"] = self.design.to_dict()
        data["design"]["max_flexion_deg"] = float(np.rad2deg(self.design.max_flexion_rad))
        data["constraints"] = [
            {**asdict(item), "violation": item.violation} for item in self.constraints
        ]
        data["optimisation"] = self.optimisation.to_dict()
        return data
