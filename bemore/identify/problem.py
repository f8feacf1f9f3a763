"""The identification problem: twelve normalised parameters → joint-centre cost f1 of a trial.

A point x in [0, 1]^d maps to SI values ``lower + x·(upper − lower)`` (:class:`ParameterSpace`);
the parameters not identified keep the model's defaults. One call of :meth:`evaluate` simulates
the whole population over the trial from the recorded initial state (one engine call) and returns
f1 = Σ over frames and over the seven joint centres of the squared distance between measured and
simulated positions (m², DESIGN §2). Parameter vectors the engine cannot simulate get the finite
penalty ``frames × 7 × (10 m)²``: as if every joint centre were 10 m away at every frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bemore.errors import DataError
from bemore.identify.space import ParameterSpace
from bemore.optimize.problem import Problem

PENALTY_DISTANCE_M = 10.0


class IdentificationProblem(Problem):
    """f1 of a trial as a function of the normalised identified parameters.

    ``measured`` is (F, 7, 2) m (joint centres ``cost_points``, NaN = not seen), ``motion`` the
    engine's DrivenMotion, ``free_q0``/``free_qd0`` the recorded initial free state.
    """

    @classmethod
    def from_trial(cls, trial: Any, space: ParameterSpace, model: Any = None
                   ) -> IdentificationProblem:
        """The problem of a prepared ``bemore.trial.Trial`` on ``model`` (default: the
        real gymnast)."""
        if trial.driven is None:
            raise DataError(f"{trial.source}: the trial has no driven motion for the engine")
        if model is None:
            from bemore.model import load_model

            model = load_model("real_gymnast")
        return cls(model, space, trial.driven, trial.free_q0, trial.free_qd0,
                   trial.joint_centres, tuple(trial.joint_centre_names))

    def __init__(
        self,
        model: Any,
        space: ParameterSpace,
        motion: Any,
        free_q0: np.ndarray,
        free_qd0: np.ndarray,
        measured: np.ndarray,
        cost_points: tuple[str, ...],
    ) -> None:
        frames = measured.shape[0]
        super().__init__(
            np.zeros(space.dim),
            np.ones(space.dim),
            names=space.names,
            penalty=frames * len(cost_points) * PENALTY_DISTANCE_M**2,
        )
        unknown = [name for name in space.names if name not in model.parameter_names]
        if unknown:
            raise DataError(
                f"model {model.name} has no parameter {unknown[0]!r} "
                f"(known: {', '.join(model.parameter_names)})"
            )
        if measured.shape != (motion.t.size, len(cost_points), 2):
            raise DataError(
                f"measured joint centres have shape {measured.shape}, expected "
                f"({motion.t.size}, {len(cost_points)}, 2)"
            )
        self.model, self.space, self.motion = model, space, motion
        self.free_q0 = np.asarray(free_q0, dtype=float)
        self.free_qd0 = np.asarray(free_qd0, dtype=float)
        self.measured = np.ascontiguousarray(measured, dtype=float)
        self.cost_points = tuple(cost_points)
        self._defaults = model.parameter_matrix([{}])[0]
        self._columns = [model.parameter_names.index(name) for name in space.names]
        self._point_index = [model.point_names.index(name) for name in cost_points]

    def parameter_matrix(self, X: np.ndarray) -> np.ndarray:
        """Engine parameter matrix (N, n_model_parameters) for normalised points X (N, d)."""
        X = np.atleast_2d(X)
        P = np.repeat(self._defaults[None, :], X.shape[0], axis=0)
        P[:, self._columns] = self.space.to_physical(X)
        return P

    def _evaluate(self, X: np.ndarray) -> np.ndarray:
        from bemore.model import joint_centre_cost

        return joint_centre_cost(
            self.model,
            self.parameter_matrix(X),
            self.motion,
            self.free_q0,
            self.free_qd0,
            self.measured,
            names=self.cost_points,
        )

    def simulated_points(self, X: np.ndarray) -> np.ndarray:
        """All named points (N, F, n_points, 2) m of the normalised points X (N, d)."""
        from bemore.model import simulate

        simulation = simulate(
            self.model,
            self.parameter_matrix(X),
            self.motion,
            self.free_q0,
            self.free_qd0,
            outputs=("points",),
        )
        return simulation.points

    def residuals(self, X: np.ndarray) -> np.ndarray:
        """Stacked (simulated − measured) joint-centre coordinates (N, F·7·2) m.

        Not-seen measurements give 0 (they are out of the cost); members that cannot be
        simulated give the penalty distance everywhere, so their Σ r² is the penalty.
        """
        points = self.simulated_points(X)[:, :, self._point_index, :]
        difference = points - self.measured[None]
        difference = np.where(np.isnan(self.measured)[None], 0.0, difference)
        bad = ~np.all(np.isfinite(difference), axis=(1, 2, 3))
        difference[bad] = PENALTY_DISTANCE_M / np.sqrt(2.0)
        return difference.reshape(difference.shape[0], -1)
