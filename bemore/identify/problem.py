"""The identification problem: twelve normalised parameters → joint-centre cost f1 of a trial.

A point x in [0, 1]^d maps to SI values ``lower + x·(upper − lower)`` (:class:`ParameterSpace`);
the parameters not identified keep the model's defaults. With a :class:`StartState`, x carries
after the parameters the trial's initial-state nuisance unknowns (initial rotation rate, bar
rest offsets; :mod:`bemore.identify.initial`), and each member starts from its own initial
state; without one, every member starts from the given ``free_q0``/``free_qd0``. One call of
:meth:`evaluate` simulates the whole population over the trial (one engine call) and returns
f1 = Σ over frames and over the seven joint centres of the squared distance between measured and
simulated positions (m², docs/identify.md "The problem"). Parameter vectors the engine cannot
simulate get the finite penalty ``frames × 7 × (10 m)²``: as if every joint centre were 10 m
away at every frame.

``samples_per_step`` (configs/identification.toml ``search_samples_per_step``) lets
:meth:`evaluate` take one integrator step per that many samples: at 2, half the engine's work
for 0.05 mm on the points against a tight reference (docs/model.md). It only steers the search;
``coarse_samples_per_step`` (``polish_coarse_samples_per_step``) likewise steers only the
polish's first stage (bemore.identify.run). :meth:`simulated_points`, :meth:`residuals` and
:meth:`exact_cost` — everything reported — step every sample by default. A value that does not
divide the trial's sample intervals is halved until it does (:func:`stepping`; :attr:`notes`
and :attr:`coarse_notes` say so).

**Bar forces** (a trial whose file carries the bar's force channels, docs/identify.md "Bar
forces"): the cost adds Σ over frames and the two axes of (s·(F_sim − F_meas))², F_sim the
bar spring-dampers' force of the simulation (``Model.spring_forces``), s (m/N per axis) =
√weight·(σ_p/√f_p)/(σ_F/√f_F): each residual normalised by its noise density (σ the raw noise,
f its sampling rate), expressed back in the markers' m. :meth:`residuals` then carries, per
frame, the 14 joint-centre coordinates followed by the 2 scaled force residuals, less their
part that the force channels' fitted offsets, gains, cross-talks and lag explain
(:attr:`channel_errors`, :mod:`bemore.identify.force_channels`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bemore.errors import DataError
from bemore.identify.force_channels import ForceChannelErrors
from bemore.identify.initial import SHOULDER, StartState
from bemore.identify.space import ParameterSpace
from bemore.optimize.problem import Problem

PENALTY_DISTANCE_M = 10.0
BAR_AXES = ("bar_x", "bar_y")  # the bar spring-dampers' coordinates (model x, y)
FORCE_NOISE_FLOOR = 1e-3  # σ_F at least this fraction of the axis' RMS force (noise-free data)


def force_scales(marker_noise_m: float, marker_rate_hz: float, force_noise_n: np.ndarray,
                 force_rate_hz: float, bar_force: np.ndarray, weight: float) -> np.ndarray:
    """(2,) m/N: what turns a force residual (N) into its joint-centre equivalent (m) — each
    normalised by its noise density σ/√f (σ: raw noise, f: its sampling rate in Hz), times
    √weight. ``bar_force`` (F, 2) N sets the floor of σ_F (:data:`FORCE_NOISE_FLOOR` of its
    RMS). DataError when the marker noise is unknown (NaN): nothing to weigh against.

    >>> force_scales(0.001, 100.0, np.array([20.0, 20.0]), 2000.0, np.ones((3, 2)), 1.0)
    array([0.00022361, 0.00022361])
    """
    if not np.isfinite(marker_noise_m) or marker_noise_m <= 0.0:
        raise DataError("bar forces: the marker noise of the trial is unknown, so the force "
                        "term cannot be weighed against the markers ([forces] use = false)")
    return np.sqrt(weight) * (marker_noise_m / np.sqrt(marker_rate_hz)) / force_noise_density(
        force_noise_n, force_rate_hz, bar_force)


def force_noise_density(force_noise_n: np.ndarray, force_rate_hz: float, bar_force: np.ndarray
                        ) -> np.ndarray:
    """(2,) N/√Hz: each axis' force noise density σ/√f (σ: the raw channels' noise, N, sampled
    at ``force_rate_hz``), σ floored at :data:`FORCE_NOISE_FLOOR` of the axis' RMS force
    (``bar_force`` (F, 2) N). DataError when an axis has neither noise nor force.

    >>> force_noise_density(np.array([20.0, 0.0]), 400.0, np.array([[0.0, 3000.0]])).tolist()
    [1.0, 0.15]
    """
    floor = FORCE_NOISE_FLOOR * np.sqrt(np.mean(np.asarray(bar_force) ** 2, axis=0))
    sigma = np.maximum(np.nan_to_num(np.asarray(force_noise_n, dtype=float)), floor)
    if np.any(sigma <= 0.0):
        raise DataError("bar forces: an axis has neither noise nor force")
    return sigma / np.sqrt(force_rate_hz)


def body_mass_uncertainty(identification: Any, segments: Any,
                          body_mass_kg: float | None) -> float:
    """How well the body the fit scales to knows its mass (kg, 1 SD): ``identification``'s
    ``[mass_budget] body_mass_uncertainty_kg`` for a body mass given, else the segment table's
    total (``segments``) times ``[inertial] mass_spread``: the table is one gymnast's."""
    if body_mass_kg is not None:
        return float(identification.mass_budget.body_mass_uncertainty_kg)
    from bemore.model.body import table_mass_kg

    return float(identification.inertial.mass_spread * table_mass_kg(segments))


START_STEP = 1e-4  # normalised units: central differences of the start's spring equilibrium
DIFFERENCE_STEP = 1e-6  # normalised units: one-sided differences of a coarse Jacobian's columns
# The shoulder spring-dampers of a trial that cannot see them (acromions on the trunk's side, no
# marker fixed on the arm): the arm the trial drives already carries their deflection, so the
# fit runs them locked (N/m, N·s/m: 0.1 mm under 1 kN, damping ratio ≈ 0.9 on the trunk).
LOCKED_SHOULDER = {"shoulder.stiffness_ap": 1e7, "shoulder.stiffness_pd": 1e7,
                   "shoulder.damping_ap": 3e4, "shoulder.damping_pd": 3e4}


def stepping(intervals: int, requested: int, setting: str) -> tuple[int, tuple[str, ...]]:
    """The samples per integrator step used for ``requested`` (≥ 1) on a trial of ``intervals``
    sample intervals, and the note saying why when it differs: the engine steps over whole
    groups of intervals and no frame is dropped, so ``requested`` is halved (rounded down)
    until it divides ``intervals``. DataError (one line naming ``setting``) for a value
    below 1.

    >>> stepping(1520, 4, "search_samples_per_step")
    (4, ())
    >>> stepping(1518, 4, "search_samples_per_step")[0]
    2
    >>> stepping(1519, 2, "search_samples_per_step")[0]
    1
    """
    if isinstance(requested, bool) or not isinstance(requested, int | np.integer) \
            or requested < 1:
        raise DataError(f"{setting} {requested!r}: must be a whole number of samples, 1 or more")
    used = int(requested)
    while intervals % used:
        used //= 2
    if used == requested:
        return used, ()
    return used, (f"{setting} {requested}: {intervals} sample intervals are not a multiple of "
                  f"{requested}; {used} sample{'s' if used > 1 else ''} per integrator step "
                  "used instead",)


class IdentificationProblem(Problem):
    """f1 of a trial as a function of the normalised identified parameters.

    ``measured`` is (F, 7, 2) m (joint centres ``cost_points``, NaN = not seen), ``motion`` the
    engine's DrivenMotion, ``free_q0``/``free_qd0`` the recorded initial free state; ``start``
    (optional) the initial-state unknowns fitted with the parameters; ``marker_noise_m`` the
    trial's marker noise (m, what the fit is judged against; NaN: unknown); ``body`` the model
    parameters the trial measured and the fit keeps (SI, e.g. ``trunk.neck_to_hip``).
    """

    @classmethod
    def from_trial(cls, trial: Any, space: ParameterSpace, model: Any = None,
                   samples_per_step: int = 1, body_mass_kg: float | None = None,
                   segments: Any = None, forces: Any = None,
                   body_mass_uncertainty_kg: float | None = None,
                   coarse_samples_per_step: int | None = None,
                   segment_table_uncertainty: tuple[float, float, float] | None = None,
                   soft_tissue_mm: dict[str, float] | None = None
                   ) -> IdentificationProblem:
        """The problem of a prepared ``bemore.trial.Trial`` on ``model`` (default: the
        real gymnast), with the initial-state unknowns of ``space.initial_state``; the search
        cost steps ``samples_per_step`` samples at a time, the polish's first stage
        ``coarse_samples_per_step`` (None: the search's; see the module docstring).

        The athlete's body (:func:`bemore.model.body.body_parameters`): the segment table
        ``segments`` (default: ``configs/gymnast.toml``'s) scaled to ``body_mass_kg`` (None: the
        table's) and to the segment lengths the trial's joint centres show; the model
        parameters of that body that ``model`` has are kept fixed by the fit.

        A trial whose shoulder springs are unobservable (``trial.shoulder_springs_observable``
        False: acromions on the trunk's side, no marker fixed on the arm) is fitted without the
        ``shoulder.*`` parameters (:attr:`held`, reported at their seed values) and with the
        springs locked (:data:`LOCKED_SHOULDER`): their deflection is in the driven arm.

        ``forces``: the force term's settings (``bemore.settings.ForceTerm``; default: on,
        weight 1); used when the trial carries bar forces (``trial.bar_force``).

        ``body_mass_uncertainty_kg``: how well the body mass is known (kg, 1 SD; None: the
        configured default, :func:`body_mass_uncertainty`), counted in the standard errors
        (:mod:`bemore.identify.propagation`); ``segment_table_uncertainty``: how far her
        segments may be from the table's (relative standard uncertainties of a mass, a centre of
        mass and a radius of gyration; None: ``identification.toml [segment_table]``), counted
        there too; ``soft_tissue_mm``: how far each joint centre's markers may slide on the
        skin (mm, 1 SD, keyed by joint centre; None: ``identification.toml [soft_tissue]``),
        counted there too."""
        if trial.driven is None:
            raise DataError(f"{trial.source}: the trial has no driven motion for the engine")
        if model is None:
            from bemore.model import load_model

            model = load_model("real_gymnast")
        from bemore.model.body import body_parameters
        from bemore.settings import ForceTerm, load_gymnast

        motion = _driven_by_name(trial, model)
        forces = forces if forces is not None else ForceTerm()
        use = forces.use and getattr(trial, "bar_force", None) is not None
        start = None
        if space.initial_state is not None:
            # With forces the bar's start velocity is fitted too: the markers' start fit
            # misreads the bar's first oscillation (docs/identify.md, "Bar forces").
            margin = forces.bar_rate_margin_m_per_s if use else 0.0
            start = StartState.from_arrays(trial.free_q0, trial.free_qd0,
                                           trial.free_seen[0, SHOULDER], motion,
                                           space.initial_state,
                                           shoulder_rest=getattr(trial, "arm_end", None)
                                           is not None, bar_rate_margin_m_per_s=margin)
        held: list[dict[str, Any]] = []
        if not getattr(trial, "shoulder_springs_observable", True):
            # Acromions on the trunk's side and nothing fixed on the arm: the springs'
            # deflection is in the driven arm, not separable (docs/trials.md, "Acromion side").
            space, held = space.without([name for name in space.names
                                         if name.startswith("shoulder.")])
        table = segments if segments is not None else load_gymnast().segments
        body = {name: value
                for name, value in body_parameters(table, body_mass_kg,
                                                   trial.segment_lengths_m).items()
                if name in model.parameter_names}
        if held:
            # The deflection is in the arm the trial drives: the springs must not add it again.
            body.update({name: value for name, value in LOCKED_SHOULDER.items()
                         if name in model.parameter_names})
        bar_force, scales = None, None
        if use:
            bar_force = trial.bar_force
            scales = force_scales(trial.marker_noise_m, trial.rate_hz_original,
                                  trial.bar_force_noise_n, trial.bar_force_rate_hz, bar_force,
                                  forces.weight)
        problem = cls(model, space, motion, trial.free_q0, trial.free_qd0,
                      trial.joint_centres, tuple(trial.joint_centre_names), start,
                      samples_per_step, trial.marker_noise_m, body, bar_force, scales,
                      coarse_samples_per_step=coarse_samples_per_step)
        problem.held = held
        if use:
            problem.force_weight, problem.chain_noise = forces.weight, forces.chain_noise
            problem.force_channel_uncertainty = (forces.offset_uncertainty_n,
                                                 forces.gain_uncertainty,
                                                 forces.lag_uncertainty_ms)
            # The channels' offset, gain, cross-talk and lag fitted with the parameters (by
            # projection, bemore.identify.force_channels).
            problem.channel_errors = ForceChannelErrors.of_force(
                bar_force, motion.t, scales, tuple(forces.fitted_channel_errors))
            problem.force_noise_density = force_noise_density(
                trial.bar_force_noise_n, trial.bar_force_rate_hz, bar_force)
            if getattr(trial, "bar_force_sample_noise_n", None) is not None:
                problem.force_sample_noise_n = np.asarray(trial.bar_force_sample_noise_n,
                                                          dtype=float)
        # What the body and the data came from: the noise propagation (bemore.identify.
        # propagation) measures the body again on noisy copies of the trial.
        problem.trial, problem.body_source = trial, (table, body_mass_kg)
        if None in (body_mass_uncertainty_kg, segment_table_uncertainty, soft_tissue_mm):
            from bemore.settings import load_identification

            identification = load_identification()
            if body_mass_uncertainty_kg is None:
                body_mass_uncertainty_kg = body_mass_uncertainty(identification, table,
                                                                 body_mass_kg)
            if segment_table_uncertainty is None:
                declared = identification.segment_table
                segment_table_uncertainty = (declared.mass, declared.com, declared.gyration)
            if soft_tissue_mm is None:
                soft_tissue_mm = identification.soft_tissue.by_point()
        problem.body_mass_uncertainty_kg = float(body_mass_uncertainty_kg)
        problem.segment_table_uncertainty = tuple(float(u) for u in segment_table_uncertainty)
        problem.soft_tissue_mm = {name: float(u) for name, u in soft_tissue_mm.items()}
        problem.conventions = trial.conventions() if hasattr(trial, "conventions") else {}
        return problem

    def __init__(
        self,
        model: Any,
        space: ParameterSpace,
        motion: Any,
        free_q0: np.ndarray,
        free_qd0: np.ndarray,
        measured: np.ndarray,
        cost_points: tuple[str, ...],
        start: StartState | None = None,
        samples_per_step: int = 1,
        marker_noise_m: float = float("nan"),
        body: dict[str, float] | None = None,
        bar_force: np.ndarray | None = None,
        force_scale: np.ndarray | None = None,
        coarse_samples_per_step: int | None = None,
    ) -> None:
        frames = measured.shape[0]
        nuisance = start.names if start is not None else ()
        dim = space.dim + len(nuisance)
        super().__init__(
            np.zeros(dim),
            np.ones(dim),
            names=(*space.names, *nuisance),
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
        self.model, self.space, self.motion, self.start = model, space, motion, start
        self.marker_noise_m = float(marker_noise_m)
        self.free_q0 = np.asarray(free_q0, dtype=float)
        self.free_qd0 = np.asarray(free_qd0, dtype=float)
        self.measured = np.ascontiguousarray(measured, dtype=float)
        self.cost_points = tuple(cost_points)
        self.body = dict(body or {})
        # Bar forces (F, 2) N in the model plane and their scales (2,) m/N, or None.
        self.bar_force = None if bar_force is None else np.ascontiguousarray(bar_force, float)
        self.force_scale = None if force_scale is None else np.asarray(force_scale, float)
        # The force term's weight (inside force_scale) and whether the identification weighs
        # the residuals with the trial chain's input noise (bemore.identify.chain_noise).
        self.force_weight, self.chain_noise = 1.0, False
        # The body mass's standard uncertainty (kg), counted in the standard errors
        # (bemore.identify.propagation); 0: the body is taken as exact.
        self.body_mass_uncertainty_kg = 0.0
        # How far her segments may be from the table's (mass, centre of mass, radius of
        # gyration: relative standard uncertainties), counted in the standard errors
        # (bemore.identify.propagation); zeros: the table taken as exact.
        self.segment_table_uncertainty = (0.0, 0.0, 0.0)
        # How far each joint centre's markers may slide on the skin (mm, 1 SD, keyed by joint
        # centre), counted in the standard errors (bemore.identify.propagation); empty: the
        # markers taken as riding on the bone.
        self.soft_tissue_mm: dict[str, float] = {}
        # The force channels' offset (N), gain (fraction) and lag (ms) standard uncertainties,
        # counted in the standard errors (bemore.identify.propagation); 0: taken as exact.
        self.force_channel_uncertainty = (0.0, 0.0, 0.0)
        # The force channels' errors fitted with the parameters, projected out of the force
        # residuals (bemore.identify.force_channels); None: the channels taken as they read.
        self.channel_errors: ForceChannelErrors | None = None
        # (2,) N/√Hz: the force channels' noise density (force_noise_density), what the fitted
        # channel errors' standard errors count of the force noise; None: unknown.
        self.force_noise_density: np.ndarray | None = None
        # (2,) N: each axis' force noise per prepared sample (the trial's
        # bar_force_sample_noise_n), what the force verdict expects of a model that follows the
        # force; None: unknown.
        self.force_sample_noise_n: np.ndarray | None = None
        if self.bar_force is not None and (self.bar_force.shape != (frames, 2)
                                           or self.force_scale is None):
            raise DataError(f"bar forces have shape {self.bar_force.shape}, expected "
                            f"({frames}, 2) with their scales")
        # Parameters the trial cannot determine, held at their seed values (rows of
        # ParameterSpace.without), and the trial's conventions record (Trial.conventions()).
        self.held: list[dict[str, Any]] = []
        self.conventions: dict[str, Any] = {}
        self.trial: Any = None  # the prepared trial (from_trial), or None
        self.body_source: tuple[Any, float | None] | None = None  # (segment table, body mass)
        self._defaults = model.parameter_matrix([self.body])[0]
        self._columns = [model.parameter_names.index(name) for name in space.names]
        self._point_index = [model.point_names.index(name) for name in cost_points]
        # The exact Jacobian's kernel stores the engine's default cost points only (the kernel
        # the warm-up builds), or every point when this problem's are not all among them; the
        # positions of this problem's points in what it stores (None: exactly those, in order).
        from bemore.model.sensitivity import program_selection

        stored = program_selection(model)
        if set(self._point_index) <= set(stored):
            self._stored_points: tuple[int, ...] | None = stored
            self._stored_index = (None if tuple(self._point_index) == stored else
                                  [stored.index(i) for i in self._point_index])
        else:
            self._stored_points, self._stored_index = None, self._point_index
        # Samples per integrator step of the search's cost and of the polish's first stage
        # (None: the search's), as asked and as used on this trial's intervals (stepping).
        if coarse_samples_per_step is None:
            coarse_samples_per_step = samples_per_step
        self.requested_samples_per_step = samples_per_step
        # notes / coarse_notes: why the search's / the first stage's value differs (or ()).
        self.samples_per_step, self.notes = stepping(frames - 1, samples_per_step,
                                                     "search_samples_per_step")
        self.coarse_samples_per_step, self.coarse_notes = stepping(
            frames - 1, coarse_samples_per_step, "polish_coarse_samples_per_step")

    def split(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised points (N, dim) → (model parameters (N, d), nuisance unknowns (N, k))."""
        X = np.atleast_2d(X)
        return X[:, : self.space.dim], X[:, self.space.dim :]

    def parameter_matrix(self, X: np.ndarray) -> np.ndarray:
        """Engine parameter matrix (N, n_model_parameters) for normalised points X (N, dim)
        (without the per-member bar rest: see :meth:`members`)."""
        parameters, _ = self.split(X)
        P = np.repeat(self._defaults[None, :], parameters.shape[0], axis=0)
        P[:, self._columns] = self.space.to_physical(parameters)
        return P

    def members(self, X: np.ndarray, parameter_changes: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the engine simulates for X (N, dim): parameters (N, n_model_parameters), free
        q0 (N, 5) and q̇0 (N, 5) — the trial's own start unless the problem has a ``start``.
        ``parameter_changes`` (N, n_model_parameters), SI: added to the engine parameters
        before the start is made (a fixed value of the body moved, e.g.)."""
        P = self.parameter_matrix(X)
        if parameter_changes is not None:
            P = P + parameter_changes
        if self.start is None:
            return P, self.free_q0, self.free_qd0
        P, q0, qd0, _ = self.start.start(self.model, P, self.split(X)[1])
        return P, q0, qd0

    def _evaluate(self, X: np.ndarray) -> np.ndarray:
        return self._cost(X, self.samples_per_step)

    def exact_cost(self, X: np.ndarray) -> np.ndarray:
        """f1 (N,) m² of X (N, dim) with one integrator step per sample (NaN: not simulable),
        whatever :attr:`samples_per_step` the search uses."""
        return self._cost(np.atleast_2d(X), 1)

    @property
    def has_forces(self) -> bool:
        """True when the cost carries the bar-force term."""
        return self.bar_force is not None

    @property
    def columns_per_frame(self) -> int:
        """Residuals per frame: the joint centres' coordinates, then 2 forces if any."""
        return 2 * len(self.cost_points) + (2 if self.has_forces else 0)

    def _cost(self, X: np.ndarray, samples_per_step: int) -> np.ndarray:
        from bemore.model import joint_centre_cost, simulate

        P, q0, qd0 = self.members(X)
        if not self.has_forces:
            return joint_centre_cost(
                self.model, P, self.motion, q0, qd0, self.measured, names=self.cost_points,
                samples_per_step=samples_per_step,
            )
        sim = simulate(self.model, P, self.motion, q0, qd0, outputs=("free_q", "free_qd"),
                       measured=self.measured, points=self.cost_points,
                       samples_per_step=samples_per_step)
        force = self._force_residuals(P, sim.free_q, sim.free_qd)
        return sim.cost + np.sum(force**2, axis=(1, 2))

    def _force_residuals(self, P: np.ndarray, free_q: np.ndarray, free_qd: np.ndarray,
                         corrected: bool = True) -> np.ndarray:
        """Scaled force residuals (N, F, 2) m: s·(F_sim − F_meas) (see the module docstring),
        with the fitted channel errors' part projected out unless ``corrected`` is False."""
        force = self.model.spring_forces(P, free_q, free_qd, BAR_AXES)
        np.subtract(force, self.bar_force, out=force)
        force *= self.force_scale
        if corrected and self.channel_errors is not None:
            force = self.channel_errors.project(force)
        return force

    def fitted_channel_errors(self, x: np.ndarray, uncertainty: tuple[Any, np.ndarray,
                                                                        np.ndarray | None]
                              | None = None) -> dict[str, Any] | None:
        """The force channels' errors fitted at the point x (dim,) (offsets N, gains and
        cross-talks %, lag ms; :meth:`ForceChannelErrors.estimate`), or None when none are
        fitted. One engine call.

        ``uncertainty``: (the propagated inputs as the fit saw them, a
        :class:`~bemore.identify.propagation.PropagatedNoise` or None; the fit's Jacobian
        (m, dim) at x; the covariance beyond those inputs (dim, dim) or None,
        ``Identifiability.unpropagated_covariance``) — then also their
        ``standard_errors``, same units and keys (:func:`~bemore.identify.force_channels.
        error_covariance`: the inputs, the model error and the force noise inside the
        errors' span; the unprojected force rows' Jacobian from the same engine call)."""
        if self.channel_errors is None:
            return None
        X = np.atleast_2d(np.asarray(x, dtype=float))
        if uncertainty is None:
            raw = self._simulate_points(X, project_channels=False)[1][0]
            return self.channel_errors.estimate(raw, self.bar_force, self.motion.t)
        from bemore.identify.force_channels import (
            error_covariance,
            row_noise_variance,
            span_noise_covariance,
        )

        noise, jacobian, unpropagated = uncertainty
        residuals, J = self.jacobian(X, project_channels=False)
        record = self.channel_errors.estimate(self.scaled_force_part(residuals[0]),
                                              self.bar_force, self.motion.t)
        sensitivity = self.channel_errors.coefficients(
            self.scaled_force_part(np.ascontiguousarray(J[0].T))).T  # (k, d)
        k = len(self.channel_errors.labels)
        members = noise.channel_error_members(jacobian) if noise is not None else None
        if members is None:
            members = ((np.zeros((0, k)), np.zeros((0, X.shape[1]))),
                       (np.zeros((0, k)), np.zeros((0, X.shape[1])), np.zeros(0)))
        density = self.force_noise_density if self.force_noise_density is not None else (
            np.zeros(2))
        row_rate_hz = 1.0 / float(self.motion.t[1] - self.motion.t[0])
        covariance = error_covariance(
            sensitivity, *members, unpropagated,
            span_noise_covariance(self.channel_errors,
                                  row_noise_variance(self.force_scale, density, row_rate_hz)))
        record["standard_errors"] = self.channel_errors.standard_errors(covariance)
        return record

    def joint_centre_part(self, residuals: np.ndarray) -> np.ndarray:
        """The joint-centre coordinates (…, F·7·2) m of stacked :meth:`residuals` (…, m)."""
        if not self.has_forces:
            return residuals
        frames = self.measured.shape[0]
        shaped = residuals.reshape(*residuals.shape[:-1], frames, self.columns_per_frame)
        return shaped[..., : 2 * len(self.cost_points)].reshape(*residuals.shape[:-1], -1)

    def force_part(self, residuals: np.ndarray) -> np.ndarray | None:
        """The force residuals (…, F, 2) N (unscaled: simulated − measured) of stacked
        :meth:`residuals`, or None without forces."""
        if not self.has_forces:
            return None
        return self.scaled_force_part(residuals) / self.force_scale

    def scaled_force_part(self, residuals: np.ndarray) -> np.ndarray:
        """The scaled force rows (…, F, 2) m of stacked :meth:`residuals` (…, m) (a view when
        ``residuals`` is contiguous: writing it writes them); a problem with bar forces only."""
        frames = self.measured.shape[0]
        shaped = residuals.reshape(*residuals.shape[:-1], frames, self.columns_per_frame)
        return shaped[..., 2 * len(self.cost_points):]

    def simulated_points(self, X: np.ndarray) -> np.ndarray:
        """All named points (N, F, n_points, 2) m of the normalised points X (N, dim)."""
        return self._simulate_points(X)[0]

    def _simulate_points(self, X: np.ndarray, samples_per_step: int = 1,
                         parameter_changes: np.ndarray | None = None,
                         members: tuple[np.ndarray, ...] | None = None,
                         project_channels: bool = True
                         ) -> tuple[np.ndarray, np.ndarray | None]:
        """Named points (N, F, n_points, 2) m and, with forces, the scaled force residuals
        (N, F, 2) m (else None; the fitted channel errors' part projected out unless
        ``project_channels`` is False); one integrator step per ``samples_per_step`` samples;
        ``parameter_changes`` as for :meth:`members`; ``members``: :meth:`members` of X when
        already made."""
        from bemore.model import simulate

        P, q0, qd0 = members or self.members(X, parameter_changes)
        outputs = ("points", "free_q", "free_qd") if self.has_forces else ("points",)
        simulation = simulate(self.model, P, self.motion, q0, qd0, outputs=outputs,
                              samples_per_step=samples_per_step)
        if not self.has_forces:
            return simulation.points, None
        return simulation.points, self._force_residuals(P, simulation.free_q,
                                                        simulation.free_qd, project_channels)

    def start_record(self, x: np.ndarray) -> dict[str, Any] | None:
        """JSON-ready initial state of the point x (dim,) (None without nuisance unknowns)."""
        if self.start is None:
            return None
        _, nuisance = self.split(x)
        return self.start.record(self.model, self.parameter_matrix(x)[0], nuisance[0])

    def residuals(self, X: np.ndarray, samples_per_step: int = 1,
                  parameter_changes: np.ndarray | None = None,
                  members: tuple[np.ndarray, ...] | None = None,
                  project_channels: bool = True) -> np.ndarray:
        """Stacked (simulated − measured) joint-centre coordinates (N, F·7·2) m; with bar
        forces (N, F·16): each frame's 14 coordinates then its 2 scaled force residuals (m).
        One integrator step per sample (``samples_per_step`` 2: per two, the search's cost).
        ``parameter_changes`` (N, n_model_parameters), SI: added to the engine parameters
        (:meth:`members`); ``members``: :meth:`members` of X when already made;
        ``project_channels`` False: the force rows as measured, the fitted channel errors' part
        left in (what estimates them).

        Not-seen measurements give 0 (they are out of the cost); members that cannot be
        simulated give the penalty distance everywhere (forces: 0), so their Σ r² is the
        penalty.
        """
        # One copy (the cost points), then in place: the residuals of a Jacobian's 31 members
        # are 5 MB, and each extra pass over them costs about as much as a quarter of the
        # simulation (measured: 19.5 → 1.5 ms for 31 members of the sample).
        points, force = self._simulate_points(X, samples_per_step, parameter_changes, members,
                                              project_channels)
        difference = np.take(points, self._point_index, axis=2)
        np.subtract(difference, self.measured, out=difference)
        unseen = np.isnan(self.measured)
        if unseen.any():
            difference[:, unseen] = 0.0
        if force is not None:
            members, frames = difference.shape[:2]
            difference = np.concatenate([difference.reshape(members, frames, -1), force],
                                        axis=2)
            bad = ~np.isfinite(difference).all(axis=(1, 2))
            difference[bad, :, :2 * len(self.cost_points)] = PENALTY_DISTANCE_M / np.sqrt(2.0)
            difference[bad, :, 2 * len(self.cost_points):] = 0.0
            return difference.reshape(members, -1)
        difference = difference.reshape(difference.shape[0], -1)
        bad = ~np.isfinite(difference).all(axis=1)
        difference[bad] = PENALTY_DISTANCE_M / np.sqrt(2.0)
        return difference

    def start_derivatives(self, X: np.ndarray, step: float = START_STEP
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Derivatives of what the engine simulates for X (N, dim) with respect to each
        coordinate of x: parameters dP (N, dim, n_model_parameters) SI per unit of x, start
        dq0 and dq̇0 (N, dim, 5). The parameters' own columns are linear in x; the bar rest and
        the equilibrium shoulder start solve the spring equilibrium (Newton), differenced
        centrally with ``step`` (no trial simulation: a static solve per point)."""
        return self._members_and_start_derivatives(X, step)[1]

    def _members_and_start_derivatives(self, X: np.ndarray, step: float = START_STEP,
                                       also: np.ndarray | None = None
                                       ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
        """:meth:`members` of X and :meth:`start_derivatives`, the spring equilibria of X and
        of its 2·dim differenced points solved in ONE batch (a member's equilibrium does not
        depend on its batch: the same numbers as two calls). ``also`` (K, dim): more points
        solved in the same batch; their :meth:`members` are then returned first, as a third
        item."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        N, d = X.shape
        eye = np.eye(d) * step
        points = np.concatenate([X[:, None, :], X[:, None, :] + eye, X[:, None, :] - eye],
                                axis=1).reshape(-1, d)
        if also is None:
            P, q0, qd0 = self.members(points)
        else:
            K = also.shape[0]
            P, q0, qd0 = self.members(np.concatenate([also, points]))
            extra = tuple(a[:K] if a.ndim == 2 else a for a in (P, q0, qd0))
            P, q0, qd0 = (a[K:] if a.ndim == 2 else a for a in (P, q0, qd0))
            return (*self._members_and_start_derivatives_of(P, q0, qd0, N, d, step), extra)
        return self._members_and_start_derivatives_of(P, q0, qd0, N, d, step)

    def _members_and_start_derivatives_of(self, P: np.ndarray, q0: np.ndarray,
                                          qd0: np.ndarray, N: int, d: int, step: float
                                          ) -> tuple[tuple[np.ndarray, ...],
                                                     tuple[np.ndarray, ...]]:
        """The members and start derivatives of N points from the :meth:`members` of their
        (2·d + 1)·N points (each point, then its d forward, then its d backward steps)."""
        nf, width = self.model.n_free, 2 * d + 1
        P = P.reshape(N, width, -1)
        q0 = np.broadcast_to(q0, (width * N, nf)).reshape(N, width, nf)
        qd0 = np.broadcast_to(qd0, (width * N, nf)).reshape(N, width, nf)
        members = tuple(np.ascontiguousarray(a[:, 0]) for a in (P, q0, qd0))
        derivatives = tuple((a[:, 1:d + 1] - a[:, d + 1:]) / (2.0 * step) for a in (P, q0, qd0))
        return members, derivatives

    def residuals_and_jacobian(self, X: np.ndarray, Y: np.ndarray, samples_per_step: int = 1,
                               differences: bool = False
                               ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """``residuals(X)`` and ``jacobian(Y)`` (same ``samples_per_step`` and ``differences``),
        the same numbers, with the spring equilibria of both (X's points, Y's and their
        differenced points) solved in one batch: a batch costs ≈ 1.4–1.9 ms on the sample
        whatever its size (three one-step engine calls; ≈ 15 µs more per point), and the
        lock-step polish asks for both in most rounds (68 of 89 on the sample). The points of
        Y's differenced columns join X's in one residual call."""
        X, Y = np.atleast_2d(np.asarray(X, dtype=float)), np.atleast_2d(np.asarray(Y, dtype=float))
        return self._beside(X, Y, samples_per_step, self._differenced(Y, differences), True)

    def jacobian(self, X: np.ndarray, samples_per_step: int = 1,
                 prepared: tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]] | None = None,
                 project_channels: bool = True, differences: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Residuals (N, m) of X (N, dim), as :meth:`residuals` gives them with the same
        ``samples_per_step``, and their exact
        Jacobian (N, m, dim) in m per unit of x: the engine's forward-mode sensitivities
        (:mod:`bemore.model.sensitivity`) chained with :meth:`start_derivatives`; with bar
        forces, the force rows from the free state's sensitivities
        (``Model.spring_force_tangents``). A member that
        cannot be simulated gets the penalty residuals and a zero Jacobian. ``prepared``: the
        members and start derivatives of X (``_members_and_start_derivatives``) when made;
        ``project_channels`` as for :meth:`residuals`.

        ``differences``: the last columns that
        :func:`bemore.model.sensitivity.differenced_directions` names (the tangents' directions
        left over after whole vectors) are one-sided differences instead: the residuals of each
        point moved by :data:`DIFFERENCE_STEP` along that coordinate, in one residual call
        beside the tangents' (``prepared`` cannot be given then: the moved points' equilibria
        are solved with X's). What a coarse polish stage takes; a column whose moved point
        cannot be simulated is 0."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        differenced = self._differenced(X, differences)
        if not differenced:
            return self._tangent_jacobian(X, samples_per_step, prepared, project_channels)
        if prepared is not None:
            raise ValueError("jacobian: prepared members with differences (the moved points' "
                             "are solved with X's: residuals_and_jacobian)")
        return self._beside(X[:0], X, samples_per_step, differenced, project_channels)[1]

    def _beside(self, X: np.ndarray, Y: np.ndarray, samples_per_step: int, differenced: int,
                project_channels: bool) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """The residuals of X (K, dim) and the Jacobian of Y (N, dim), its last
        ``differenced`` columns differences: the spring equilibria of X's points, Y's, Y's
        start-differenced points and its moved points solved in one batch, then X's and the
        moved points' residuals in one call beside the tangents' (a member's numbers do not
        depend on its threads)."""
        from bemore.model.generated import run_beside

        moved, steps = self._differenced_points(Y, differenced)
        simulated = np.concatenate([X, moved])
        members, derivatives, extra = self._members_and_start_derivatives(Y, also=simulated)
        residuals, (r, J) = run_beside(
            lambda: self.residuals(simulated, samples_per_step, members=extra,
                                   project_channels=project_channels),
            lambda: self._tangent_jacobian(Y, samples_per_step, (members, derivatives),
                                           project_channels, differenced))
        K = X.shape[0]
        return residuals[:K], self._with_differences(r, J, residuals[K:], steps)

    @staticmethod
    def _differenced(X: np.ndarray, differences: bool) -> int:
        """How many of the last columns of X's (N, dim) Jacobian are differences."""
        from bemore.model.sensitivity import differenced_directions

        return differenced_directions(X.shape[1]) if differences else 0

    def _differenced_points(self, X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The points (N·k, dim) whose residuals difference the last k columns of X's (N, dim)
        Jacobian, each point moved along one of those coordinates, and the signed steps taken
        (N, k): :data:`DIFFERENCE_STEP` forwards, backwards where that would leave the box (to
        rounding: the steps are what the points moved).

        >>> problem = IdentificationProblem.__new__(IdentificationProblem)
        >>> problem.upper = np.ones(3)
        >>> moved, steps = problem._differenced_points(np.array([[0.5, 0.2, 1.0]]), 2)
        >>> (moved - [0.5, 0.2, 1.0]) / DIFFERENCE_STEP, steps / DIFFERENCE_STEP
        (array([[ 0.,  1.,  0.],
               [ 0.,  0., -1.]]), array([[ 1., -1.]]))
        """
        N, d = X.shape
        columns = np.arange(d - k, d)
        signed = np.where(X[:, columns] + DIFFERENCE_STEP <= self.upper[columns],
                          DIFFERENCE_STEP, -DIFFERENCE_STEP)
        moved = np.repeat(X[:, None, :], k, axis=1)
        moved[:, np.arange(k), columns] += signed
        # The steps taken, exactly (x + h rounds: the difference is divided by what moved).
        steps = moved[:, np.arange(k), columns] - X[:, columns]
        return moved.reshape(N * k, d), steps

    def _with_differences(self, r: np.ndarray, J: np.ndarray, moved_residuals: np.ndarray,
                          steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """r (N, m) and J (N, m, dim) with J's last k columns (room the tangents left) filled
        with the one-sided differences of ``moved_residuals`` (N·k, m) over ``steps`` (N, k);
        0 for a member that cannot be simulated, or whose moved point cannot."""
        N, k = steps.shape
        if not k:
            return r, J
        failed = self._penalised(moved_residuals).reshape(N, k) | self._penalised(r)[:, None]
        columns = (moved_residuals.reshape(N, k, -1) - r[:, None, :]) / steps[:, :, None]
        columns[failed] = 0.0
        J[:, :, -k:] = columns.transpose(0, 2, 1)
        return r, J

    def _penalised(self, residuals: np.ndarray) -> np.ndarray:
        """Which rows of ``residuals`` (N, m) are those of a member that cannot be simulated:
        the penalty distance on every joint-centre coordinate (:meth:`residuals`)."""
        N = residuals.shape[0]
        coordinates = residuals.reshape(N, self.measured.shape[0], -1)[:, :, :2 * len(
            self.cost_points)]
        return np.all(coordinates == PENALTY_DISTANCE_M / np.sqrt(2.0), axis=(1, 2))

    def _tangent_jacobian(self, X: np.ndarray, samples_per_step: int = 1,
                          prepared: tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]
                          | None = None, project_channels: bool = True, room: int = 0
                          ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`jacobian` from the tangents alone, of all columns but the last ``room``
        (left uninitialised, for the caller to fill)."""
        from bemore.model.sensitivity import point_sensitivities

        N, d = X.shape
        (P, q0, qd0), (dP, dq0, dqd0) = prepared or self._members_and_start_derivatives(X)
        tangents = d - room
        dP, dq0, dqd0 = dP[:, :tangents], dq0[:, :tangents], dqd0[:, :tangents]
        stored = len(self._stored_points or range(len(self.model.point_names)))
        out = np.empty((N, d, self.measured.shape[0], stored, 2)) if room else None
        result = point_sensitivities(self.model, P, self.motion, q0, qd0, dP, dq0, dqd0,
                                     states=self.has_forces, samples_per_step=samples_per_step,
                                     points=self._stored_points, out=out)
        if self._stored_index is None:  # the kernel stored exactly this problem's points
            difference, derivative = result.points, result.derivatives  # (N, d, F, 7, 2)
        else:
            difference = np.take(result.points, self._stored_index, axis=2)
            derivative = np.take(result.derivatives, self._stored_index, axis=3)
        np.subtract(difference, self.measured, out=difference)
        unseen = np.isnan(self.measured)
        if unseen.any():
            difference[:, unseen] = 0.0
            derivative[:, :, unseen] = 0.0
        frames = self.measured.shape[0]
        if self.has_forces:
            # Each frame's 14 coordinates then its 2 scaled force residuals, as residuals().
            force = self._force_residuals(P, result.free_q, result.free_qd,
                                          project_channels)  # (N, F, 2)
            d_force = np.zeros((N, d, frames, len(BAR_AXES)))  # the last ``room``: the caller's
            d_force[:, :tangents] = self.model.spring_force_tangents(
                P, result.free_q, result.free_qd, dP, result.d_free_q, result.d_free_qd,
                BAR_AXES) * self.force_scale  # (N, d, F, 2)
            if self.channel_errors is not None and project_channels:
                d_force = self.channel_errors.project(d_force)
            difference = np.concatenate([difference.reshape(N, frames, -1), force], axis=2)
            derivative = np.concatenate([derivative.reshape(N, d, frames, -1), d_force],
                                        axis=3)
        difference = difference.reshape(N, -1)
        # Each member's (m, d) Jacobian in column-major order, a view: the least-squares
        # solvers' QR copies its columns, contiguous here (a C-order copy cost 1.2 ms a member).
        J = derivative.reshape(N, d, -1).transpose(0, 2, 1)
        bad = ~(np.isfinite(difference).all(axis=1)
                & np.isfinite(J[:, :, :tangents]).all(axis=(1, 2)))
        if self.has_forces:
            shaped = difference.reshape(N, frames, -1)
            shaped[bad, :, :2 * len(self.cost_points)] = PENALTY_DISTANCE_M / np.sqrt(2.0)
            shaped[bad, :, 2 * len(self.cost_points):] = 0.0
        else:
            difference[bad] = PENALTY_DISTANCE_M / np.sqrt(2.0)
        J[bad] = 0.0
        return difference, J


def _driven_by_name(trial: Any, model: Any) -> Any:
    """The trial's driven motion with its columns in ``model``'s driven-coordinate order,
    matched by name (a model that drives a coordinate the trial does not give is refused)."""
    from bemore.model import DrivenMotion

    names = tuple(trial.driven_names)
    missing = [name for name in model.driven_coordinates if name not in names]
    if missing:
        raise DataError(
            f"{trial.source}: model {model.name} drives {', '.join(missing)}, which the trial "
            f"does not give (it gives {', '.join(names)})"
        )
    if names == tuple(model.driven_coordinates):
        return trial.driven
    columns = [names.index(name) for name in model.driven_coordinates]
    return DrivenMotion(trial.driven.t, trial.driven.q[:, columns], trial.driven.qd[:, columns],
                        trial.driven.qdd[:, columns])
