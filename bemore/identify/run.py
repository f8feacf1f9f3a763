"""``identify``: fit the real-gymnast model to a prepared trial, then explain the fit.

global run (GWO by default, any algorithm of :mod:`bemore.optimize`) → optional least-squares
polish → Jacobian at the optimum → identifiability → fit metrics and simulated trajectories.

The polish starts from the ``polish_starts`` best DISTINCT points the global run evaluated
(:func:`bemore.optimize.polish.distinct_starts`) and keeps the lowest exact cost: on the bundled
sample the trunk parameters have two minima (0.434 and 0.449 mm), and a single polish from the
global best landed in the one its seed's pack happened to be in (docs/identify.md).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from bemore.errors import ConfigError
from bemore.identify.identifiability import BOUND_MARGIN, Identifiability, analyse
from bemore.identify.problem import IdentificationProblem
from bemore.identify.propagation import propagated_noise, responses
from bemore.identify.report import fit_metrics
from bemore.identify.verdict import FitVerdict, ForceFit, judge_fit, judge_force_fit
from bemore.optimize import make_algorithm, minimize
from bemore.optimize.driver import Callback
from bemore.optimize.polish import (
    LocalFit,
    distinct_starts,
    finite_difference_jacobian,
    polish_many,
)
from bemore.optimize.result import OptimisationResult
from bemore.trial.noise import NOISE_CEILING_M


@dataclass(frozen=True)
class RunSettings:
    """How to run the identification (defaults: the seed protocol, GWO 200 × 50)."""

    algorithm: str = "gwo"
    pack: int = 200
    iterations: int = 50
    seed: int = 0
    polish: bool = True
    workers: int = 0
    polish_iterations: int = 100
    polish_starts: int = 5  # distinct points of the global run polished (1 = its best only)
    # The polish's and the analysis's Jacobian: "exact" (sensitivities computed with the
    # simulation, bemore.model.sensitivity) or "finite-difference" (central, 2·d + 1 points).
    polish_jacobian: str = "exact"
    # With the problem's coarse_samples_per_step > 1: the polish converges on that coarser cost
    # first (less CPU per Jacobian), then on the exact cost from where it ended.
    polish_coarse_first: bool = True
    options: dict[str, Any] = field(default_factory=dict)


TIE_RELATIVE = 1e-9
"""Polish costs within this relative difference of the lowest are one minimum (earliest kept)."""


@dataclass
class PolishStart:
    """One polish start: where it came from, where it ended (costs m², exact after the polish)."""

    rank: int  # among the global run's evaluated points, by search cost (0 = best)
    search_cost_m2: float  # the start's cost as the search evaluated it
    # Σ r² (|W r|² with the chain-noise weighting) at the polish's best point (one integrator
    # step per sample)
    polished_cost_m2: float
    mean_distance_mm: float  # mean joint-centre distance at the polish's best point
    nfev: int
    elapsed_s: float
    status: int
    x: list[float]  # the polish's best point (normalised box)
    jacobians: int = 0  # Jacobians the polish took (each one call, counted in nfev too)
    won: bool = False
    # Of nfev and jacobians, those of the first stage on the coarse cost (one integrator step
    # per the problem's coarse_samples_per_step samples; 0 when the polish ran on the exact
    # cost alone).
    coarse_nfev: int = 0
    coarse_jacobians: int = 0
    # The rank of the start whose first-stage minimum this one reached: from there they were
    # one start (its exact stage, and its counts, are that start's). None: its own.
    same_minimum_as: int | None = None


class Fit(NamedTuple):
    """The fit once the global run and the polish have ended, before the analysis: what the
    plots draw (:func:`bemore.identify.outputs.write_plots`, which also takes an
    :class:`Outcome`). ``x`` normalised; ``simulated_points`` (F, n_points, 2) m, all named
    points."""

    x: np.ndarray
    simulated_points: np.ndarray
    global_result: OptimisationResult
    polish_result: OptimisationResult | None


@dataclass
class Outcome:
    """Everything an identification found (SI values, normalised x, results, metrics)."""

    values: np.ndarray
    x: np.ndarray
    global_result: OptimisationResult
    polish_result: OptimisationResult | None
    identifiability: Identifiability | None
    metrics: dict[str, Any]
    simulated_points: np.ndarray  # (F, n_points, 2) m, all named points
    elapsed_s: float
    analysis_evaluations: int = 0  # simulations of the final Jacobian (identifiability)
    initial_state: dict[str, Any] | None = None  # nuisance unknowns found (JSON-ready)
    polish_starts: list[PolishStart] = field(default_factory=list)  # every start, winner marked
    verdict: FitVerdict | None = None  # does the model follow the trial (None: interrupted)
    # With bar forces: the same analysis on the joint-centre rows of the same Jacobian alone
    # (what the markers determine without the forces); None without forces.
    identifiability_markers_only: Identifiability | None = None
    # With the chain-noise weighting (bemore.identify.chain_noise): its record; else None.
    chain_noise: dict[str, Any] | None = None
    # The inertial mode's result (bemore.identify.inertial_mode.InertialResult), None when off.
    inertial: Any = None
    analysis_interrupted: bool = False  # Ctrl-C during the analysis (the fit itself complete)
    # Ctrl-C while the chain-noise weighting's copies ran, before the polish's first start:
    # the result is the global run's best, unpolished.
    polish_interrupted: bool = False

    @property
    def made_identifiable_by_forces(self) -> list[str]:
        """Parameters the markers alone flag and the markers with the bar forces do not."""
        if self.identifiability is None or self.identifiability_markers_only is None:
            return []
        with_forces = set(self.identifiability.flagged)
        return [name for name in self.identifiability_markers_only.flagged
                if name not in with_forces]

    @property
    def interrupted(self) -> bool:
        """True when Ctrl-C stopped the global run, the polish or the analysis."""
        return (self.global_result.interrupted or self.analysis_interrupted
                or self.polish_interrupted or any(s.status == 1 for s in self.polish_starts))

    @property
    def evaluations(self) -> int:
        """Simulations run, global run and every polish start (including Jacobians) together."""
        return self.global_result.nfev + sum(start.nfev for start in self.polish_starts)


def worker_threads(workers: int) -> int:
    """The engine threads ``--workers`` asks for (0 = all local cores, at most
    ``os.cpu_count()``); ConfigError outside that range. Nothing is set here: :func:`identify`
    runs the engine on them and gives the caller's setting back."""
    import os

    available = os.cpu_count() or 1
    if workers < 0 or workers > available:
        raise ConfigError(f"--workers {workers}: allowed 0 (all cores) to {available}")
    return workers or available


def identify(
    problem: IdentificationProblem,
    settings: RunSettings,
    callback: Callback | None = None,
    on_phase: Any = None,
    on_fit: Callable[[Fit], None] | None = None,
) -> Outcome:
    """Run the identification on ``problem`` with ``settings``; see the module docstring.

    ``callback(record, best_x)`` follows the global run (return True to stop it);
    ``on_phase(name)`` is told when the polish and the analysis start; ``on_fit(fit)`` is
    given the :class:`Fit` as soon as it is known, before the analysis (``bemore identify``
    draws its plots meanwhile, :mod:`bemore.drawing`). The engine runs on
    ``settings.workers`` threads during the call; the caller's engine setting is unchanged after.
    """
    start = time.perf_counter()
    threads = worker_threads(settings.workers)
    if settings.polish:
        from bemore.optimize.lapack import flapack

        flapack()  # loads scipy's BLAS, so that the pin below covers it
    from threadpoolctl import threadpool_limits

    from bemore.model.simulate import engine_threads_set

    # The engine on ``settings.workers`` threads for this run only (the caller's setting is
    # given back). One BLAS thread: the engine's threads use the cores; BLAS threads on the
    # population's small matrix products only contend with them (measured: 4× slower
    # parameter → field products under load), and LAPACK's rounding then does not depend on
    # the machine.
    ahead = _build_ahead(problem, settings)
    try:
        with engine_threads_set(threads), threadpool_limits(limits=1, user_api="blas"):
            return _identify(problem, settings, callback, on_phase, on_fit, start)
    finally:
        if ahead is not None:
            # After a polish and an analysis, done: they loaded what it built. After an
            # interruption or an error, it finishes the build in progress (clang, stopped by
            # a terminal's Ctrl-C as well) and starts no other: no compiler left running, no
            # half-written file in the cache.
            ahead.stop.set()
            ahead.join()


def _build_ahead(problem: IdentificationProblem, settings: RunSettings) -> Any:
    """A thread building the kernels the polish and the analysis will load (the exact
    Jacobian's tangent kernel, the analysis copies' per-member engine kernel) while this
    thread builds the search's and searches; None without a C compiler (numba's compilations
    do not run beside each other). On a machine whose kernel cache lacks them (a first
    command without ``make venv``'s warm-up), clang then compiles them beside the search, on
    another core when one is free; a later request of a kernel in the making waits for it
    (``bemore.model.native.cached``). With the cache full the thread only loads them, which
    this thread would do later. A failed build is left to the request that needs it, which
    builds it again and reports the error. The thread's ``stop`` event, once set, keeps it
    from starting another request."""
    import threading

    from bemore.identify.propagation import propagates
    from bemore.model import native

    if native.compiler() is None or not isinstance(problem, IdentificationProblem):
        return None
    model = problem.model
    stop = threading.Event()

    def build() -> None:
        from bemore.model.sensitivity import directions_kernel
        from bemore.model.simulate import engine_kernel

        try:
            if settings.polish and _exact_jacobian(problem, settings) and not stop.is_set():
                directions_kernel(model, problem.has_forces, problem._stored_points)
            if propagates(problem) and not stop.is_set():
                engine_kernel(model, per_member=True)  # the analysis copies' motions
        except Exception:  # the request that needs the kernel builds it again and reports it
            pass

    thread = threading.Thread(target=build, name="bemore-kernels-ahead")
    thread.stop = stop
    thread.start()
    return thread


def _identify(
    problem: IdentificationProblem,
    settings: RunSettings,
    callback: Callback | None,
    on_phase: Any,
    on_fit: Callable[[Fit], None] | None,
    start: float,
) -> Outcome:
    """:func:`identify` once the engine's threads and BLAS are set."""
    algorithm = make_algorithm(
        settings.algorithm,
        problem,
        settings.pack,
        settings.iterations,
        settings.seed,
        settings.options,
    )
    archive = _Archive(problem)
    result = minimize(archive, algorithm, callback=callback, seed=settings.seed)
    x, polished, jacobian, residuals, starts = result.x, None, None, None, []
    weighting, polish_interrupted = None, False
    if settings.polish and not result.interrupted:
        if on_phase:
            on_phase("polish")
        if getattr(problem, "chain_noise", False):
            # Errors in variables: the residuals' covariance with the chain's input noise,
            # linearised at the global best (bemore.identify.chain_noise).
            from bemore.identify.chain_noise import chain_noise_weighting

            try:
                weighting = chain_noise_weighting(problem, result.x)
            except KeyboardInterrupt:
                polish_interrupted = True  # nothing polished: the global best is written
        if not polish_interrupted:
            unweighted = _Unweighted() if weighting is not None else None
            try:
                fit, starts = _polish_from_distinct_starts(problem, archive, settings,
                                                           weighting, unweighted)
                # The polish's cost is exact; so must be the global best it is compared with.
                better = fit.result.fun <= _exact(problem, result, weighting)
            except KeyboardInterrupt:
                # Ctrl-C outside the starts' own threads (their set-up, between the stages,
                # the comparison), which stop at their best themselves: the global best is
                # written, unpolished, as when the chain-noise weighting is interrupted.
                polish_interrupted, starts = True, []
            else:
                polished = fit.result
                if better:
                    x = fit.result.x
                    # The analysis wants them unweighted (W r, W J are the polish's): the
                    # polish kept them (else the analysis computes them, one engine call).
                    jacobian, residuals = ((fit.jacobian, fit.residuals) if weighting is None
                                           else unweighted.at(x))
    points = problem.simulated_points(x[None, :])[0]
    if on_fit:
        on_fit(Fit(x, points, result, polished))
    cost_index = [problem.model.point_names.index(name) for name in problem.cost_points]
    metrics = fit_metrics(problem.measured, points[:, cost_index], list(problem.cost_points))
    identifiability, analysis_evaluations, verdict, markers_only = None, 0, None, None
    analysis_interrupted = False
    if not (result.interrupted or polish_interrupted
            or any(start.status == 1 for start in starts)):
        if on_phase:
            on_phase("analysis")
        try:
            identifiability, analysis_evaluations, verdict, markers_only = _analysis(
                problem, settings, x, points[:, cost_index], jacobian, residuals, metrics,
                weighting)
        except KeyboardInterrupt:
            # Ctrl-C during the analysis: the fit is complete and is written, marked
            # interrupted, without the analysis (standard errors, verdict).
            analysis_interrupted = True
    return Outcome(
        values=problem.space.to_physical(x[: problem.space.dim]),
        initial_state=problem.start_record(x),
        x=x,
        global_result=result,
        polish_result=polished,
        identifiability=identifiability,
        metrics=metrics,
        simulated_points=points,
        elapsed_s=time.perf_counter() - start,
        analysis_evaluations=analysis_evaluations,
        polish_starts=starts,
        verdict=verdict,
        identifiability_markers_only=markers_only,
        analysis_interrupted=analysis_interrupted,
        polish_interrupted=polish_interrupted,
        chain_noise=None if weighting is None else weighting.record(),
    )


def _analysis(problem: IdentificationProblem, settings: RunSettings, x: np.ndarray,
              simulated: np.ndarray, jacobian: np.ndarray | None,
              residuals: np.ndarray | None, metrics: dict[str, Any], weighting: Any = None
              ) -> tuple[Identifiability, int, FitVerdict, Identifiability | None]:
    """The fit's verdict and its identifiability at ``x`` (the Jacobian and residuals there
    when the polish gave them, else computed: one engine call, counted in the second value);
    with bar forces also the markers-only identifiability, and the force RMS in ``metrics``.
    ``simulated``: the cost points (F, 7, 2) m at x. ``jacobian`` and ``residuals`` are the
    unweighted ones; with the chain-noise ``weighting`` the identifiability is that of the
    weighted estimator the polish ran (its Jacobian, the noise copies' changes and the
    quadratic check through the same W); the markers-only one stays unweighted."""
    analysis_evaluations, markers_only = 0, None
    position = x[: problem.space.dim]
    at_bounds = [name for name, value in zip(problem.space.names, position, strict=True)
                 if not BOUND_MARGIN < value < 1.0 - BOUND_MARGIN]
    conventions = getattr(problem, "conventions", None) or {}
    trial = getattr(problem, "trial", None)
    lower_bound = bool(trial is not None and trial.marker_noise.lower_bound)
    verdict = judge_fit(problem.measured, simulated, problem.cost_points,
                        problem.marker_noise_m, at_bounds, conventions.get("acromion_check"),
                        lower_bound)
    if jacobian is None and _exact_jacobian(problem, settings):
        residuals, jacobian = (a[0] for a in problem.jacobian(x[None, :]))
        analysis_evaluations = 1
    elif jacobian is None:
        jacobian, residuals, analysis_evaluations = finite_difference_jacobian(
            problem.residuals, x, problem.lower, problem.upper
        )
    noise = propagated_noise(problem, x, jacobian)
    force_fit = _force_fit(problem, residuals, jacobian, noise,
                           ceiling_scale(problem.marker_noise_m) if lower_bound else 1.0)
    if force_fit is not None:
        verdict = verdict.with_force(force_fit)
    untrusted = ("fit poor: the model does not follow the trial, so the standard errors "
                 "do not bound its error" if verdict.poor else None)
    fitted_jacobian, fitted_residuals, fitted_noise = jacobian, residuals, noise
    residuals_at = problem.residuals
    if weighting is not None:
        fitted_jacobian = weighting.apply_jacobian(jacobian)
        fitted_residuals = weighting.apply(residuals)
        fitted_noise = noise and noise.for_rows(weighting.apply, fitted_jacobian)
        residuals_at = _weighted(problem, weighting)[0]
    identifiability = analyse(
        fitted_jacobian, fitted_residuals, problem.names, *_values_and_widths(problem, x),
        nuisance=problem.dim - problem.space.dim, frames=problem.measured.shape[0],
        positions=x, lowers=_lowers(problem), untrusted=untrusted, noise=fitted_noise,
        residuals_at=residuals_at, bounds=(problem.lower, problem.upper),
    )
    if getattr(problem, "has_forces", False):
        markers_jacobian = problem.joint_centre_part(jacobian.T).T
        markers_only = analyse(
            markers_jacobian, problem.joint_centre_part(residuals),
            problem.names, *_values_and_widths(problem, x),
            nuisance=problem.dim - problem.space.dim, frames=problem.measured.shape[0],
            positions=x, lowers=_lowers(problem), untrusted=untrusted,
            noise=noise and noise.for_rows(problem.joint_centre_part, markers_jacobian),
            residuals_at=lambda X: problem.joint_centre_part(problem.residuals(X)),
            bounds=(problem.lower, problem.upper),
        )
        metrics["bar_force_rms_n"] = _force_rms(problem, residuals)
        fitted_channels = problem.fitted_channel_errors(
            x, uncertainty=(fitted_noise, fitted_jacobian,
                            identifiability.unpropagated_covariance))
        if fitted_channels is not None:
            metrics["force_channel_errors"] = fitted_channels
            analysis_evaluations += 1
    return identifiability, analysis_evaluations, verdict, markers_only


def _force_fit(problem: IdentificationProblem, residuals: np.ndarray, jacobian: np.ndarray,
               noise: Any, chain_scale: float = 1.0) -> ForceFit | None:
    """The bar force's verdict (:func:`~bemore.identify.verdict.judge_force_fit`) at the fit:
    its residual (N) against the channels' noise per prepared sample and the trial chain's
    noise the fit cannot absorb — the propagated copies' force changes ``noise``
    (``PropagatedNoise``, None: not counted) left after the least-squares response through
    ``jacobian`` (m, dim), RMS per axis, times ``chain_scale`` (the copies carry the trial's
    marker noise; when that is only a lower bound, :func:`ceiling_scale`: the chain's noise is
    linear in the markers'). None without forces or their noise."""
    sample_noise = getattr(problem, "force_sample_noise_n", None)
    if not getattr(problem, "has_forces", False) or sample_noise is None:
        return None
    chain = np.zeros(2)
    if noise is not None:
        changes = noise.residual_changes
        left = changes + responses(changes, jacobian) @ jacobian.T  # the fit's response's rest
        chain = chain_scale * np.sqrt(np.mean(problem.force_part(left) ** 2, axis=(0, 1)))
    return judge_force_fit(problem.force_part(residuals[None, :])[0], sample_noise, chain)


def ceiling_scale(marker_noise_m: float) -> float:
    """The stated noise ceiling (:data:`bemore.trial.noise.NOISE_CEILING_M`) over a marker
    noise ``marker_noise_m`` (m) that is only a lower bound, at least 1 (1 for an unknown one).

    >>> ceiling_scale(0.5e-3), ceiling_scale(3e-3), ceiling_scale(float("nan"))
    (4.0, 1.0, 1.0)
    """
    if not np.isfinite(marker_noise_m) or marker_noise_m <= 0.0:
        return 1.0
    return max(NOISE_CEILING_M / marker_noise_m, 1.0)


class _Archive:
    """The problem as the global run sees it, keeping every point evaluated and its cost (the
    polish starts are chosen among them; 10 000 points × 15 coordinates: 1.2 MB)."""

    def __init__(self, problem: IdentificationProblem) -> None:
        self.problem, self.lower, self.upper = problem, problem.lower, problem.upper
        self.points: list[np.ndarray] = []
        self.costs: list[np.ndarray] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.problem, name)

    def evaluate(self, X: np.ndarray) -> np.ndarray:
        """Costs (N,) m² of X (N, dim), as the problem gives them; both are kept."""
        F = self.problem.evaluate(X)
        self.points.append(np.array(X, dtype=float))
        self.costs.append(np.array(F, dtype=float))
        return F


class _Unweighted:
    """The unweighted residuals (m,) and Jacobians (m, dim) of the polish's last exact
    Jacobians (one integrator step per sample), by point: the analysis wants them at the kept
    point, where the polish (weighted) took its last Jacobian (:class:`LocalFit`). The latest
    :data:`KEPT` points are held (each ≈ 5 MB on a trial with bar forces): a start's last
    Jacobian is at most a few lock-step rounds of the others old."""

    KEPT = 12

    def __init__(self) -> None:
        self.kept: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def keep(self, Y: np.ndarray, r: np.ndarray, J: np.ndarray, options: dict[str, Any]
             ) -> None:
        """Hold the residuals r (N, m) and Jacobians J (N, m, dim) of the points Y (N, dim)
        when they are exact (``options``' ``samples_per_step`` 1 or absent)."""
        if options.get("samples_per_step", 1) != 1:
            return
        for point, residuals, jacobian in zip(np.atleast_2d(Y), r, J, strict=True):
            self.kept.pop(point.tobytes(), None)
            self.kept[point.tobytes()] = (residuals, jacobian)
        while len(self.kept) > self.KEPT:
            self.kept.pop(next(iter(self.kept)))

    def at(self, x: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(Jacobian, residuals) unweighted at ``x`` (dim,), or (None, None) when not held."""
        held = self.kept.get(np.asarray(x, dtype=float).tobytes())
        return (None, None) if held is None else (held[1], held[0])


def _weighted(problem: IdentificationProblem, weighting: Any,
              unweighted: _Unweighted | None = None) -> tuple[Any, Any]:
    """The problem's residuals and exact Jacobian functions of normalised points (N, dim)
    (keyword ``samples_per_step`` passed on), through the chain-noise weighting W (None: as
    they are); ``unweighted`` keeps the exact Jacobians before W (:class:`_Unweighted`)."""
    if weighting is None:
        return problem.residuals, problem.jacobian

    def residuals(X: np.ndarray, **options: Any) -> np.ndarray:
        return weighting.apply(problem.residuals(X, **options))

    def jacobian(X: np.ndarray, **options: Any) -> tuple[np.ndarray, np.ndarray]:
        r, J = problem.jacobian(X, **options)
        if unweighted is not None:
            unweighted.keep(X, r, J, options)
        return weighting.apply(r), weighting.apply_jacobian(J)

    return residuals, jacobian


def _weighted_both(problem: IdentificationProblem, weighting: Any,
                   unweighted: _Unweighted | None = None) -> Any:
    """The problem's residuals of some points and exact Jacobian of others in one call
    (``IdentificationProblem.residuals_and_jacobian``: the lock step's rounds that ask for
    both), through the chain-noise weighting W as :func:`_weighted` (None: as they are).
    None for a problem whose residuals another evaluator computes (a Dask cluster's
    ``EvaluatedProblem``): its residuals stay there, one call per kind."""
    if not isinstance(problem, IdentificationProblem):
        return None
    if weighting is None:
        return problem.residuals_and_jacobian

    def both(X: np.ndarray, Y: np.ndarray, **options: Any
             ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        residuals, (r, J) = problem.residuals_and_jacobian(X, Y, **options)
        if unweighted is not None:
            unweighted.keep(Y, r, J, options)
        return weighting.apply(residuals), (weighting.apply(r), weighting.apply_jacobian(J))

    return both


def _polish_from_distinct_starts(
    problem: IdentificationProblem, archive: _Archive, settings: RunSettings,
    weighting: Any = None, unweighted: _Unweighted | None = None,
) -> tuple[LocalFit, list[PolishStart]]:
    """Polish from the ``settings.polish_starts`` best distinct evaluated points; return the fit
    of lowest exact cost and every start's record (Ctrl-C stops every start at its best).
    ``weighting``: the chain-noise weighting the polish minimises |W r|² with (None: |r|²);
    ``unweighted`` keeps the exact stage's Jacobians before W (:class:`_Unweighted`).

    With a coarse first stage (:func:`_coarse_stage`), starts whose first stage ended in the same
    minimum (:func:`same_minima`) share one exact stage: from there they are one start."""
    X, F = np.vstack(archive.points), np.concatenate(archive.costs)
    ranks = np.argsort(np.argsort(F, kind="stable"), kind="stable")
    seen = np.all(np.isfinite(problem.measured), axis=-1).reshape(-1)  # (F·7,) joint centres
    picks = distinct_starts(X, F, settings.polish_starts, problem.lower, problem.upper)
    coarse = _coarse_stage(problem, settings, X[picks], weighting)
    leader = list(range(len(picks)))  # the start whose exact stage each start's is
    # In lock step: each Jacobian or residual request of the starts is one engine call.
    residuals, jacobian = _weighted(problem, weighting, unweighted)
    jacobian = jacobian if _exact_jacobian(problem, settings) else None
    both = _weighted_both(problem, weighting, unweighted)
    if coarse is None:
        fits = polish_many(residuals, X[picks], problem.lower, problem.upper,
                           max_iterations=settings.polish_iterations, jacobian=jacobian,
                           both=both)
    elif any(fit.result.status == 1 for fit in coarse):
        # Ctrl-C in the first stage: each start ends there, its cost made exact.
        fits = [_exactly(residuals, fit) for fit in coarse]
    else:
        leader = same_minima([fit.result.fun for fit in coarse],
                             np.array([fit.result.x for fit in coarse]))
        leaders = sorted(set(leader))
        exact = polish_many(residuals, np.array([coarse[k].result.x for k in leaders]),
                            problem.lower, problem.upper,
                            max_iterations=settings.polish_iterations, jacobian=jacobian,
                            both=both)
        fits = [exact[leaders.index(k)] for k in leader]
    distances: dict[int, float] = {}  # mm, once per distinct fit (joined starts share one)

    def _unweighted_residuals(x: np.ndarray) -> np.ndarray:
        held = unweighted.at(x)[1] if unweighted is not None else None
        return held if held is not None else problem.residuals(x[None])[0]

    def mean_distance_mm(fit: LocalFit) -> float:
        if id(fit) not in distances:
            raw = fit.residuals if weighting is None else _unweighted_residuals(fit.result.x)
            squared = np.sum(_joint_centre_part(problem, raw).reshape(-1, 2) ** 2, axis=1)
            distances[id(fit)] = float(np.mean(np.sqrt(squared[seen]))) * 1e3
        return distances[id(fit)]

    starts: list[PolishStart] = []
    for k, (index, fit) in enumerate(zip(picks, fits, strict=True)):
        first = coarse[k].result if coarse is not None else None
        # The exact stage's work is its leader's (an interrupted first stage had none).
        own = first is None or (leader[k] == k and fit is not coarse[k])
        nfev, jacobians, elapsed = ((fit.result.nfev, int(fit.result.options["jacobians"]),
                                     fit.result.elapsed_s) if own else (0, 0, 0.0))
        if first is not None:
            nfev += first.nfev
            jacobians += int(first.options["jacobians"])
            elapsed += first.elapsed_s
        starts.append(PolishStart(
            rank=int(ranks[index]), search_cost_m2=float(F[index]),
            polished_cost_m2=fit.result.fun,
            mean_distance_mm=mean_distance_mm(fit),
            nfev=nfev, elapsed_s=elapsed, status=fit.result.status,
            x=[float(value) for value in fit.result.x], jacobians=jacobians,
            coarse_nfev=first.nfev if first is not None else 0,
            coarse_jacobians=int(first.options["jacobians"]) if first is not None else 0,
            same_minimum_as=None if leader[k] == k else int(ranks[picks[leader[k]]]),
        ))
    costs = np.array([fit.result.fun for fit in fits])
    # Starts that reach the same minimum differ by rounding (1e-13 relative measured): the
    # earliest of them is kept, so the kept start does not flip on noise.
    best = int(np.flatnonzero(costs <= costs.min() * (1.0 + TIE_RELATIVE))[0])
    starts[best].won = True
    return fits[best], starts


SAME_POINT = 1e-4
"""Two polish ends within this of each other in every coordinate of the normalised box (and
of equal cost, :data:`TIE_RELATIVE`) are one minimum (:func:`same_minima`)."""


def same_minima(costs: list[float], x: np.ndarray) -> list[int]:
    """For each polish end (costs (k,) m², points x (k, dim) in the normalised box), the index
    of the first end that is the same minimum: equal cost within :data:`TIE_RELATIVE` and the
    same point within :data:`SAME_POINT` in every coordinate (itself when none before is).

    >>> same_minima([1.0, 1.0 + 1e-12, 1.07], np.array([[0.2, 0.5], [0.2, 0.5], [0.3, 0.5]]))
    [0, 0, 2]
    >>> same_minima([1.0, 1.0], np.array([[0.2, 0.5], [0.2, 0.6]]))
    [0, 1]
    """
    leader: list[int] = []
    for k, cost in enumerate(costs):
        leader.append(next((j for j in range(k) if leader[j] == j
                            and abs(cost - costs[j]) <= TIE_RELATIVE * min(cost, costs[j])
                            and np.max(np.abs(x[k] - x[j])) <= SAME_POINT), k))
    return leader


def _coarse_stage(problem: IdentificationProblem, settings: RunSettings, starts: np.ndarray,
                  weighting: Any = None) -> list[LocalFit] | None:
    """The polish's first stage: from each start, the minimum of the coarse cost (one
    integrator step per ``problem.coarse_samples_per_step`` samples; at 2 its Jacobian costs
    half the exact one's), in lock step; None when that is 1 or ``settings.polish_coarse_first``
    is off. At 2 the two costs differ by the integrator's error (≈ 0.05 mm of the joint
    centres), so their minima lie close and the exact stage from here takes few Jacobians.
    ``weighting``: the chain-noise weighting (None: none), as for the exact stage."""
    coarse = getattr(problem, "coarse_samples_per_step", 1)
    if coarse == 1 or not settings.polish_coarse_first:
        return None
    exact = _exact_jacobian(problem, settings)
    residuals, jacobian = _weighted(problem, weighting)
    # The Jacobian's directions left over after whole vectors of the tangent kernel may be
    # one-sided differences here (IdentificationProblem.jacobian's ``differences``): the exact
    # stage that follows takes every column from the tangents.
    options = {"samples_per_step": coarse, "differences": True}
    return polish_many(functools.partial(residuals, samples_per_step=coarse), starts,
                       problem.lower, problem.upper, max_iterations=settings.polish_iterations,
                       jacobian=functools.partial(jacobian, **options) if exact else None,
                       both=_with_options(_weighted_both(problem, weighting), **options))


def _with_options(function: Any, **options: Any) -> Any:
    """``function`` with keyword ``options`` bound (None stays None)."""
    return None if function is None else functools.partial(function, **options)


def _exactly(residuals_of: Any, fit: LocalFit) -> LocalFit:
    """``fit`` (of the coarse cost) with the exact residuals (``residuals_of``, the polish's
    function of normalised points) and cost at its point: what an interrupted first stage hands
    on (no analysis follows an interruption: the Jacobian is the first stage's)."""
    import dataclasses

    residuals = residuals_of(fit.result.x[None, :])[0]
    result = dataclasses.replace(fit.result, fun=float(residuals @ residuals))
    return LocalFit(result=result, residuals=residuals, jacobian=fit.jacobian)


def _exact_jacobian(problem: IdentificationProblem, settings: RunSettings) -> bool:
    """Whether the problem's exact Jacobian (sensitivities of the joint centres and of the bar
    forces) is used: when asked for."""
    return settings.polish_jacobian == "exact"


def _joint_centre_part(problem: IdentificationProblem, residuals: np.ndarray) -> np.ndarray:
    """The joint-centre coordinates (m) of a residual vector (the forces left out)."""
    if getattr(problem, "has_forces", False):
        return problem.joint_centre_part(residuals)
    return residuals


def _force_rms(problem: IdentificationProblem, residuals: np.ndarray) -> dict[str, float]:
    """RMS (simulated − measured) bar force per model axis (N), and the channels' noise."""
    force = problem.force_part(residuals)
    rms = np.sqrt(np.mean(force**2, axis=0))
    return {"x": float(rms[0]), "y": float(rms[1])}


def _exact(problem: IdentificationProblem, result: OptimisationResult,
           weighting: Any = None) -> float:
    """The global best's cost (m²) with one integrator step per sample (the search may have
    taken one per several samples); with the chain-noise ``weighting``, |W r|² (the polish's)."""
    if weighting is not None:
        cost = float(np.sum(weighting.apply(problem.residuals(result.x[None, :])) ** 2))
        return cost if np.isfinite(cost) else problem.penalty
    if getattr(problem, "samples_per_step", 1) == 1:
        return result.fun
    cost = float(problem.exact_cost(result.x[None, :])[0])
    return cost if np.isfinite(cost) else problem.penalty


def _lowers(problem: IdentificationProblem) -> np.ndarray:
    """Lower bounds (dim,) SI of the parameters then the nuisance unknowns (the latter are
    reported relative to their range anyway: their lower bound is given as 0)."""
    return np.r_[problem.space.lower, np.zeros(problem.dim - problem.space.dim)]


def _values_and_widths(problem: IdentificationProblem, x: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """SI values and search widths (dim,) of the parameters then the nuisance unknowns."""
    parameters, nuisance = problem.split(x)
    values, widths = problem.space.to_physical(parameters[0]), problem.space.width
    if problem.start is not None:
        values = np.r_[values, problem.start.to_physical(nuisance[0])]
        widths = np.r_[widths, problem.start.width]
    return values, widths
