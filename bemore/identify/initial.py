"""The trial's initial state: what the simulation starts from, and its nuisance unknowns.

The clear hip circle is near-critical (+0.01 rad/s of initial rotation rate turns the final
handstand by 0.04 rad, docs/consistency.md), so the initial state cannot simply be read off the
markers. Per simulated member (parameter vector ``p``):

* **bar**: the bar starts where the markers see it (``free_q0[:2]``, the origin of the default
  study plane). Its springs' rest position ``bar.rest_x/y`` is what the markers cannot see: the
  start minus the spring deflection of ``model.equilibrium`` (gravity + the driven motion's
  start acceleration, free velocities 0; the synthetic generator's definition) for THAT member's
  parameters, plus a nuisance offset ``bar.rest_offset_x/y`` within ± ``bar_rest_margin_m``: the
  equilibrium needs the driven accelerations at the first frame, which the filtered markers
  estimate poorly (on the bundled sample the vertical rest is 1.8 mm off);
* **shoulder springs**: their equilibrium translation (``shoulder_start = "equilibrium"``) or
  the translation the markers see (``"seen"``; on real data it carries the C7/STERNUM neck's
  offset of a few cm, which would start the springs loaded by hundreds of newtons);
* **shoulder springs' rest** (acromions on the trunk's side only): the arm's end is placed by a
  recipe calibrated at the springs' median deflection (:mod:`bemore.trial.acromion`), a bias of
  a few mm that the springs' rest ``shoulder.rest_offset_ap/pd`` within ±
  ``shoulder_rest_margin_m`` takes up (in the model: ``shoulder.rest_ap/pd``);
* **rotation about the bar**: rate a nuisance unknown ``initial.rotation_rate`` within the
  prepared rate ± ``rate_margin_rad_per_s``; angle a nuisance unknown ``initial.rotation_angle``
  within the prepared angle ± ``angle_margin_rad`` (a few mrad of error in the filtered
  markers' start angle bias a slow handstand start's trunk mass by tens of percent); the other
  rates as prepared.

The nuisance unknowns are normalised to [0, 1] like the parameters and appended after them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bemore.errors import ModelError
from bemore.identify.space import Box
from bemore.model.equilibrium import oracle_motion, spring_equilibrium
from bemore.settings import InitialState as InitialStateSettings

RATE = "initial.rotation_rate"
ANGLE = "initial.rotation_angle"
REST_X, REST_Y = "bar.rest_offset_x", "bar.rest_offset_y"
BAR_RATE = ("initial.bar_rate_x", "initial.bar_rate_y")
SHOULDER_REST = ("shoulder.rest_offset_ap", "shoulder.rest_offset_pd")
SHOULDER_REST_PARAMETERS = ("shoulder.rest_ap", "shoulder.rest_pd")
HAND_ROTATION = 2  # index of the rotation about the bar among the free coordinates
BAR = slice(0, 2)  # bar_x, bar_y among the free coordinates
SHOULDER = slice(3, 5)  # shoulder_ap, shoulder_pd among the free coordinates


@dataclass(frozen=True)
class StartState(Box):
    """Initial-state unknowns of one trial and how each member's start is built from them.

    ``names``/``units``/``lower``/``upper``: the nuisance unknowns (SI: rad/s, m);
    ``free_q0``/``free_qd0``/``shoulder_seen``: the prepared start (SI); ``driven_start``: driven
    (q, q̇, q̈) at the first frame; ``shoulder_start``: "equilibrium" or "seen".
    """

    names: tuple[str, ...]
    units: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    free_q0: np.ndarray
    free_qd0: np.ndarray
    shoulder_seen: np.ndarray
    driven_start: tuple[np.ndarray, np.ndarray, np.ndarray]
    shoulder_start: str
    oracle: Any = None  # the driven start as a one-step motion (see free_accelerations)

    @classmethod
    def from_trial(cls, trial: Any, settings: InitialStateSettings) -> StartState:
        """The start of a prepared ``bemore.trial.Trial`` with the configured margins."""
        return cls.from_arrays(
            trial.free_q0, trial.free_qd0, trial.free_seen[0, SHOULDER], trial.driven, settings,
            shoulder_rest=trial.arm_end is not None,
        )

    @classmethod
    def from_arrays(
        cls,
        free_q0: np.ndarray,
        free_qd0: np.ndarray,
        shoulder_seen: np.ndarray,
        motion: Any,
        settings: InitialStateSettings,
        shoulder_rest: bool = False,
        bar_rate_margin_m_per_s: float = 0.0,
    ) -> StartState:
        """From the prepared free state (5,), the seen shoulder translations (2,) m and the
        driven motion (its first frame is used); ``shoulder_rest``: the shoulder springs' rest
        is an unknown too (the arm's end came from a recipe, acromions on the trunk's side);
        ``bar_rate_margin_m_per_s`` > 0: the bar's start velocity is an unknown too, within the
        prepared one ± this (m/s; a trial with bar forces, whose damping term c·v sees it)."""
        rate = float(free_qd0[HAND_ROTATION])
        margin = settings.rate_margin_rad_per_s
        names, units = [RATE], ["rad/s"]
        lower, upper = [rate - margin], [rate + margin]
        if settings.angle_margin_rad > 0:
            angle = float(free_q0[HAND_ROTATION])
            names.append(ANGLE)
            units.append("rad")
            lower.append(angle - settings.angle_margin_rad)
            upper.append(angle + settings.angle_margin_rad)
        if settings.bar_rest_margin_m > 0:
            for name in (REST_X, REST_Y):
                names.append(name)
                units.append("m")
                lower.append(-settings.bar_rest_margin_m)
                upper.append(settings.bar_rest_margin_m)
        if bar_rate_margin_m_per_s > 0:
            for k, name in enumerate(BAR_RATE):
                names.append(name)
                units.append("m/s")
                lower.append(float(free_qd0[BAR][k]) - bar_rate_margin_m_per_s)
                upper.append(float(free_qd0[BAR][k]) + bar_rate_margin_m_per_s)
        if shoulder_rest and settings.shoulder_rest_margin_m > 0:
            for name in SHOULDER_REST:
                names.append(name)
                units.append("m")
                lower.append(-settings.shoulder_rest_margin_m)
                upper.append(settings.shoulder_rest_margin_m)
        return cls(
            names=tuple(names),
            units=tuple(units),
            lower=np.array(lower),
            upper=np.array(upper),
            free_q0=np.asarray(free_q0, dtype=float).copy(),
            free_qd0=np.asarray(free_qd0, dtype=float).copy(),
            shoulder_seen=np.asarray(shoulder_seen, dtype=float).copy(),
            driven_start=(motion.q[0].copy(), motion.qd[0].copy(), motion.qdd[0].copy()),
            shoulder_start=settings.shoulder_start,
            oracle=oracle_motion(motion.q[0], motion.qd[0], motion.qdd[0]),
        )

    def start(
        self, model: Any, P: np.ndarray, X: np.ndarray,
        prepared: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per member: parameters with the bar rest set (B, n_params), q0 (B, 5), q̇0 (B, 5) and
        the equilibrium free state (B, 5) (NaN rows for members the engine cannot simulate).

        ``P`` are the members' model parameters (rest columns are overwritten), ``X`` (B, dim)
        their normalised nuisance unknowns. ``prepared``: per member, the prepared start
        (free q0 (B, 5), q̇0 (B, 5), seen shoulder translations (B, 2)) instead of the trial's
        (e.g. noisy copies of the trial; the nuisance unknowns keep their values).
        """
        values = self.to_physical(np.atleast_2d(X))
        B = P.shape[0]
        try:
            columns = [model.parameter_names.index(name) for name in ("bar.rest_x", "bar.rest_y")]
        except ValueError:
            raise ModelError(
                f"model {model.name} has no parameters bar.rest_x, bar.rest_y (the bar springs' "
                "rest position): the identification needs them"
            ) from None
        P = P.copy()
        P[:, columns] = 0.0
        if SHOULDER_REST[0] in self.names:
            for parameter, name in zip(SHOULDER_REST_PARAMETERS, SHOULDER_REST, strict=True):
                P[:, model.parameter_names.index(parameter)] = values[:, self.names.index(name)]
        free_q0, free_qd0, shoulder_seen = prepared or (self.free_q0, self.free_qd0,
                                                        self.shoulder_seen)
        start = np.array(np.broadcast_to(free_q0, (B, len(self.free_q0))))
        if ANGLE in self.names:
            start[:, HAND_ROTATION] = values[:, self.names.index(ANGLE)]
        equilibrium = spring_equilibrium(model, P, start, self.oracle)
        offset = np.zeros((B, 2))
        for k, name in enumerate((REST_X, REST_Y)):
            if name in self.names:
                offset[:, k] = values[:, self.names.index(name)]
        P[:, columns] = start[:, BAR] - equilibrium[:, BAR] + offset
        q0 = start
        if self.shoulder_start == "equilibrium":
            q0[:, SHOULDER] = equilibrium[:, SHOULDER]
        else:
            q0[:, SHOULDER] = shoulder_seen
        qd0 = np.array(np.broadcast_to(free_qd0, (B, len(self.free_qd0))))
        qd0[:, HAND_ROTATION] = values[:, self.names.index(RATE)]
        for k, name in enumerate(BAR_RATE):
            if name in self.names:
                qd0[:, k] = values[:, self.names.index(name)]
        return P, q0, qd0, equilibrium

    def describe(self) -> list[dict[str, Any]]:
        """The nuisance box as JSON-ready rows (name, unit, lower, upper)."""
        return [
            {"name": name, "unit": unit, "lower": float(low), "upper": float(high)}
            for name, unit, low, high in zip(
                self.names, self.units, self.lower, self.upper, strict=True
            )
        ]

    def record(self, model: Any, P: np.ndarray, x: np.ndarray) -> dict[str, Any]:
        """JSON-ready description of one member's start (athlete.json ``initial_state``)."""
        P1, q0, qd0, _ = self.start(model, P[None, :], x[None, :])
        values = self.to_physical(x)
        rest = [float(P1[0, model.parameter_names.index(n)]) for n in ("bar.rest_x", "bar.rest_y")]
        unknowns = {
            name: {
                "value": float(value),
                "unit": unit,
                "lower": float(low),
                "upper": float(high),
                "position": float((value - low) / (high - low)),
            }
            for name, unit, value, low, high in zip(
                self.names, self.units, values, self.lower, self.upper, strict=True
            )
        }
        return {
            "unknowns": unknowns,
            "prepared_rotation_rate_rad_s": float(self.free_qd0[HAND_ROTATION]),
            "bar_rest_m": rest,
            "free_q0": q0[0].tolist(),
            "free_qd0": qd0[0].tolist(),
            "shoulder_start": self.shoulder_start,
            "notes": (
                "nuisance unknowns of this trial, not athlete parameters: the rotation rate "
                "and angle about the bar at the first frame, the bar springs' rest position (bar "
                "start − equilibrium deflection + offset), with bar forces the bar's start "
                "velocity and, acromions on the trunk's side, the "
                "shoulder springs' rest (the arm-end recipe's bias); see docs/identify.md "
                "'Initial state'"
            ),
        }
