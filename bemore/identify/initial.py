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
* **rotation about the bar**: angle as seen; rate a nuisance unknown ``initial.rotation_rate``
  within the prepared rate ± ``rate_margin_rad_per_s``; the other rates as prepared.

The nuisance unknowns are normalised to [0, 1] like the parameters and appended after them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bemore.errors import ModelError
from bemore.identify.space import Box
from bemore.settings import InitialState as InitialStateSettings

RATE = "initial.rotation_rate"
REST_X, REST_Y = "bar.rest_offset_x", "bar.rest_offset_y"
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
            trial.free_q0, trial.free_qd0, trial.free_seen[0, SHOULDER], trial.driven, settings
        )

    @classmethod
    def from_arrays(
        cls,
        free_q0: np.ndarray,
        free_qd0: np.ndarray,
        shoulder_seen: np.ndarray,
        motion: Any,
        settings: InitialStateSettings,
    ) -> StartState:
        """From the prepared free state (5,), the seen shoulder translations (2,) m and the
        driven motion (its first frame is used)."""
        rate = float(free_qd0[HAND_ROTATION])
        margin = settings.rate_margin_rad_per_s
        names, units = [RATE], ["rad/s"]
        lower, upper = [rate - margin], [rate + margin]
        if settings.bar_rest_margin_m > 0:
            for name in (REST_X, REST_Y):
                names.append(name)
                units.append("m")
                lower.append(-settings.bar_rest_margin_m)
                upper.append(settings.bar_rest_margin_m)
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
        self, model: Any, P: np.ndarray, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per member: parameters with the bar rest set (B, n_params), q0 (B, 5), q̇0 (B, 5) and
        the equilibrium free state (B, 5) (NaN rows for members the engine cannot simulate).

        ``P`` are the members' model parameters (rest columns are overwritten), ``X`` (B, dim)
        their normalised nuisance unknowns.
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
        equilibrium = spring_equilibrium(model, P, self.free_q0, self.oracle)
        offset = np.zeros((B, 2))
        for k, name in enumerate((REST_X, REST_Y)):
            if name in self.names:
                offset[:, k] = values[:, self.names.index(name)]
        P[:, columns] = self.free_q0[BAR] - equilibrium[:, BAR] + offset
        q0 = np.repeat(self.free_q0[None, :], B, axis=0)
        if self.shoulder_start == "equilibrium":
            q0[:, SHOULDER] = equilibrium[:, SHOULDER]
        else:
            q0[:, SHOULDER] = self.shoulder_seen
        qd0 = np.repeat(self.free_qd0[None, :], B, axis=0)
        qd0[:, HAND_ROTATION] = values[:, self.names.index(RATE)]
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
                "about the bar at the first frame, and the bar springs' rest position (bar start "
                "− equilibrium deflection + offset); see docs/identify.md 'Initial state'"
            ),
        }


ORACLE_STEP_S = 1e-5  # one integrator step this long reads the accelerations (see below)


def oracle_motion(driven_q: np.ndarray, driven_qd: np.ndarray, driven_qdd: np.ndarray) -> Any:
    """The driven state (n_driven,) each, SI, as a two-sample motion one ``ORACLE_STEP_S`` long
    (exact for a constant acceleration). Built once per trial: the engine caches its tables per
    motion object, and a new object per call would evict the trial's own."""
    from bemore.model import DrivenMotion

    h = ORACLE_STEP_S
    q, qd, qdd = (np.asarray(a, dtype=float) for a in (driven_q, driven_qd, driven_qdd))
    return DrivenMotion(
        t=np.array([0.0, h]),
        q=np.stack([q, q + qd * h + 0.5 * qdd * h * h]),
        qd=np.stack([qd, qd + qdd * h]),
        qdd=np.stack([qdd, qdd]),
    )


def free_accelerations(model: Any, P: np.ndarray, free_q: np.ndarray, oracle: Any) -> np.ndarray:
    """Free accelerations (B, n_free) at the free positions ``free_q`` (B, n_free), free
    velocities 0, at the driven start of ``oracle`` (:func:`oracle_motion`), read from ONE
    engine step of ``ORACLE_STEP_S``: v(h)/h, the Rosenbrock step's (M + γhC + γ²h²K)⁻¹·force.

    Why not ``model.hybrid``: its separate numba kernel costs ~27 s to compile on a first run
    and ~1 s to load from cache on every run, against 3 s for the whole identification; the
    engine's simulation kernel is loaded anyway. The damping term makes these accelerations up
    to a few % off, but not where the springs' accelerations vanish: with a_s = 0,
    (M + γhC)·a = M·a because C acts on the spring coordinates only, so the first stage is
    exact there and only the hand rotation's motion during the step (O(h²)) moves the zero.
    Measured: the equilibrium lands within 0.1 µm of ``model.equilibrium`` over 200 members
    across the box (h = 1e-5 s; shorter steps lose digits to rounding: 17 µm at 3e-7 s).
    NaN rows: not simulable.

    One engine thread: a step of 200–1000 members lasts 1–7 ms, and waiting for a second
    core that another process holds cost more than it saved (measured over the seed protocol
    at load 2.3–2.9: 0.72–0.77 s of equilibria with both threads, 0.29 s with one; the same
    numbers).
    """
    from bemore.model import simulate

    h = float(oracle.t[1] - oracle.t[0])
    free_q = np.asarray(free_q, dtype=float)
    simulation = simulate(
        model, P, oracle, free_q, np.zeros_like(free_q), outputs=("free_qd",), threads=1
    )
    return simulation.free_qd[:, 1, :] / h


def spring_equilibrium(
    model: Any,
    P: np.ndarray,
    free_q: np.ndarray,
    oracle: Any,
    step_m: float = 1e-7,
    chord_steps: int = 3,
) -> np.ndarray:
    """Free states (B, n_free) where the spring coordinates do not accelerate: the definition of
    ``model.equilibrium`` (free velocities 0, at the driven start of ``oracle``, springs from
    their rest), in
    ``chord_steps`` Newton steps sharing ONE batched finite-difference Jacobian taken at the
    rest: 7 states per member in 3 engine calls (:func:`free_accelerations`), for every
    population of the identification.

    The deflections are millimetres, so the Jacobian barely changes on the way: each step
    divides the error by ~40 (tests/identify/test_initial.py checks the result against
    ``model.equilibrium``). Members the engine cannot simulate get NaN rows.
    """
    P = model.as_matrix(P)
    B, nf = P.shape[0], model.n_free
    V, valid = model.fields(P)
    springs = [model.free_coordinates.index(c) for c in model.spring_coordinates]
    n = len(springs)
    q = np.array(np.broadcast_to(np.asarray(free_q, dtype=float), (B, nf)))
    rest = model.tree.spring_fields[springs, 2]
    q[:, springs] = V[:, rest]
    # One batch: the state, then the state with each spring coordinate moved by step_m.
    states = np.repeat(q[None], n + 1, axis=0)
    for c, i in enumerate(springs):
        states[c + 1, :, i] += step_m
    acc = free_accelerations(model, np.tile(P, (n + 1, 1)), states.reshape(-1, nf), oracle)
    acc = acc[:, springs].reshape(n + 1, B, n)
    J = np.moveaxis((acc[1:] - acc[0][None]) / step_m, 0, -1)  # (B, n, n): d acc_i / d q_c
    valid &= np.all(np.isfinite(J), axis=(1, 2)) & np.all(np.isfinite(acc[0]), axis=1)
    J[~valid] = np.eye(n)
    residual = np.where(valid[:, None], acc[0], 0.0)
    q[:, springs] -= np.linalg.solve(J, residual[..., None])[..., 0]
    for _ in range(chord_steps - 1):
        acc = free_accelerations(model, P, q, oracle)
        residual = np.where(valid[:, None], np.nan_to_num(acc[:, springs]), 0.0)
        q[:, springs] -= np.linalg.solve(J, residual[..., None])[..., 0]
    q[~valid] = np.nan
    return q
