"""The whole synthesis: athlete → exemplary model → optimal gesture → verified result.

1. The exemplary gymnast's parameters come from an ``athlete.json`` (identified values) or the
   seed's identified values, through :func:`bemore.model.exemplary_parameters`.
2. A *coarse* search (samples every ``coarse_step_s``, one integration step each) runs the chosen
   method: multi-start SLSQP (default), multi-start trust-constr, or pymoo's constrained global
   search. Every batch of designs (the starts' points and finite-difference stencils, merged)
   is ONE engine call (:meth:`GestureProblem.evaluate_batch`).
3. A *fine* SLSQP polish from the best coarse design re-solves the problem with samples every
   ``fine_step_s`` (1 ms, the bench's setpoint rate), 2 integration steps per sample.
4. The returned gesture is re-simulated with steps four times finer still and every constraint
   is checked there against the configured band (without the optimiser's margin).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bemore.errors import OptimisationError
from bemore.model import exemplary_parameters, load_model
from bemore.optimize.result import OptimisationResult
from bemore.settings import Synthesis, load_gymnast
from bemore.synthesis.athlete import AthleteParameters
from bemore.synthesis.problem import HAND_ROTATION, GestureProblem, StartState, objective_value
from bemore.synthesis.pymoo_search import solve_pymoo
from bemore.synthesis.results import OBJECTIVES, ConstraintStatus, SynthesisResult
from bemore.synthesis.solve import (
    continued,
    screened_starts,
    solve_corrected,
    solve_multistart,
    violation,
)

# Where the lumped arms and body take the trunk mass and the trunk/thigh CoMs from.
SEGMENT_SOURCES = ("identified", "table")
# Rotation band narrowed by this much for the optimiser (deg): with 0.5 ms steps (1 ms samples,
# 2 substeps) the final rotation is within ≈ 0.003° of its converged value (3rd-order method:
# 0.022° at 1 ms, 0.003° at 0.5 ms, 0.0004° at 0.25 ms), so the verified gesture stays inside.
ROTATION_MARGIN_DEG = 0.02
FINE_SUBSTEPS = 2
COARSE_MAX_ITERATIONS = 40
# Batched requests one coarse run may make (about what a start near the optimum needs): a run
# stuck restoring feasibility, or in long line searches, stops with its best point instead of
# holding the whole lockstep pack.
COARSE_BUDGET = 24
# Largest constraint violation (s, deg, N·m) of a coarse end still polished: SLSQP stops a few
# 1e-6 outside a constraint; the polish and the verification decide feasibility.
COARSE_FEASIBILITY = 1e-4
# SLSQP's ftol in the defect-corrected polish (objective divided by its value at the start).
POLISH_TOLERANCE = 1e-7
VERIFY_SUBSTEPS = 4
# The torque limit given to the optimiser is narrowed by this fraction: the fine stage samples the
# torque every 1 ms (2 steps each), the verification with 4 steps per sample, and a peak between
# samples is a hair higher (≈ 1e-5 relative); the verified gesture then holds the limit exactly.
TORQUE_MARGIN = 1e-3


@dataclass(frozen=True)
class SynthesisOptions:
    """How to run the synthesis (defaults: the seed protocol with bemore's discretisation)."""

    method: str = "slsqp"
    objective: str = "abs_torque_integral"
    starts: int = 4
    seed: int = 0
    free_midpoints: bool = False
    coarse_step_s: float = 0.01
    fine_step_s: float = 1e-3
    polish: bool = True
    fine_polish: bool = False
    screen_pool: int = 64
    coarse_tolerance: float = 1e-6
    pymoo_population: int = 24
    pymoo_generations: int = 15
    start_rate_deg_s: float = 0.0
    torque_limit_nm: float | None = None
    segments: str = "identified"
    # SLSQP's derivatives: "exact" (forward-mode tangents; "auto": where the problem has them)
    # needs 158 evaluations instead of 434 but takes ≈ 1.5× the wall time today, so the
    # default stays "finite-difference" (docs/synthesis.md, "Gradients").
    gradients: str = "finite-difference"


def exemplary_matrix(
    athlete: AthleteParameters, segments: str = "identified"
) -> tuple[object, np.ndarray, dict[str, float]]:
    """The exemplary model, its parameter matrix (1, n) and the parameters by name (SI).

    ``segments="identified"`` lumps the arms and body with the athlete's identified trunk mass
    and trunk/thigh CoMs (bemore.model.exemplary_parameters as it is); ``"table"`` keeps only
    the identified bar and shoulder springs (docs/model.md §1) and lumps the segment table's trunk
    and thighs (configs/gymnast.toml). See docs/synthesis.md, physics check.
    """
    if segments not in SEGMENT_SOURCES:
        raise OptimisationError(
            f"unknown segments {segments!r} (allowed: {', '.join(SEGMENT_SOURCES)})"
        )
    real = dict(athlete.values)
    if segments == "table":
        table = load_gymnast().segments
        real.update({
            "trunk.mass": table["trunk"].total_mass_kg,
            "trunk.com": table["trunk"].com_from_proximal_m,
            "thigh.com": table["thigh"].com_from_proximal_m,
        })
    model = load_model("exemplary_gymnast")
    values = exemplary_parameters(real, athlete.model)
    return model, model.parameter_matrix([values]), values


def _search(problem: GestureProblem, options: SynthesisOptions) -> OptimisationResult:
    """The coarse search with the chosen method."""
    if options.method == "pymoo":
        return solve_pymoo(
            problem,
            rng_seed=options.seed,
            population=options.pymoo_population,
            generations=options.pymoo_generations,
            polish=True,
        )
    if options.method not in ("slsqp", "trust-constr"):
        raise OptimisationError(
            f"unknown method {options.method!r} (allowed: slsqp, trust-constr, pymoo)"
        )
    rng = np.random.default_rng(options.seed)
    starts, f_starts, screened = screened_starts(
        problem, options.starts, rng, problem.linear_margin, pool=options.screen_pool
    )
    # The coarse stage only has to land near the optimum (the polish finishes the job), so a
    # slow start is cut at 40 iterations rather than 100. The starts' values are known from the
    # screening batch, and the verification re-simulates the result: no extra evaluations.
    outcome = solve_multistart(
        problem,
        starts,
        method=options.method,
        tolerance=options.coarse_tolerance,
        max_iterations=COARSE_MAX_ITERATIONS,
        reevaluate=False,
        objective_scale=max(abs(float(f_starts[0])), 1e-12),
        feasibility_tolerance=COARSE_FEASIBILITY,
        budget=COARSE_BUDGET,
        gradients=options.gradients,
    )
    outcome.nfev += screened
    outcome.nbatch += 1
    outcome.detail += f"; screened from {screened} candidates in one batch"
    return outcome


def constraint_statuses(
    problem: GestureProblem,
    x: np.ndarray,
    rotation_deg: float,
    peak_per_shoulder_nm: float,
    tolerance: float = 1e-9,
) -> list[ConstraintStatus]:
    """Every constraint at design x, with the configured (un-narrowed) limits."""
    synthesis = problem.synthesis
    statuses = []
    for name, value, lower, upper in zip(
        problem.names, x, problem.lower, problem.upper, strict=True
    ):
        unit = "rad" if name.endswith("_rad") else ("s" if name.endswith("_s") else "")
        ok = lower - tolerance <= value <= upper + tolerance
        statuses.append(
            ConstraintStatus(
                f"bound {name}", float(value), float(lower), float(upper), unit, bool(ok)
            )
        )
    extension = float(x[0] - x[1])
    minimum = synthesis.constraints.min_extension_duration_s
    statuses.append(
        ConstraintStatus(
            "t_f - t_flexmax", extension, minimum, None, "s", extension >= minimum - tolerance
        )
    )
    low, high = problem.rotation_band_deg
    statuses.append(
        ConstraintStatus(
            "rotation about the bar at t_f",
            rotation_deg,
            low,
            high,
            "deg",
            bool(low <= rotation_deg <= high),
        )
    )
    if problem.torque_limit_nm is not None:
        limit = float(problem.torque_limit_nm)
        statuses.append(
            ConstraintStatus(
                "peak torque per shoulder",
                peak_per_shoulder_nm,
                None,
                limit,
                "N·m",
                bool(peak_per_shoulder_nm <= limit),
            )
        )
    return statuses


def verify(
    problem: GestureProblem, x: np.ndarray
) -> tuple[float, float, float, list[ConstraintStatus]]:
    """Re-simulate design x on its own grid (t_f the last sample, about ``problem.step_s``
    apart) with ``VERIFY_SUBSTEPS`` steps per sample (4× finer than the fine stage); returns
    (objective, rotation deg, peak torque per shoulder N·m, constraint statuses against the
    configured limits)."""
    steps = max(round(float(x[0]) / problem.step_s), 1)
    t = np.linspace(0.0, x[0], steps + 1)
    torque, q, _, _, ok = problem.simulate_design(x, t, substeps=VERIFY_SUBSTEPS)
    if not ok:
        raise OptimisationError("the engine could not re-simulate the returned gesture")
    rotation = float(np.rad2deg(q[-1, HAND_ROTATION] - problem.start.free_q0[HAND_ROTATION]))
    value = float(objective_value(problem.objective, torque, t))
    peak = 0.5 * float(np.abs(torque).max())
    return value, rotation, peak, constraint_statuses(problem, x, rotation, peak)


def _problem(
    model: Any,
    P: np.ndarray,
    synthesis: Synthesis,
    options: SynthesisOptions,
    step_s: float,
    substeps: int,
    start: StartState | None = None,
) -> GestureProblem:
    """The gesture problem of this run on a grid of ``step_s`` with ``substeps`` per sample."""
    return GestureProblem(
        model,
        P,
        synthesis,
        options.objective,
        options.free_midpoints,
        rotation_margin_deg=ROTATION_MARGIN_DEG,
        substeps=substeps,
        step_s=step_s,
        start_rate_rad_s=float(np.deg2rad(options.start_rate_deg_s)),
        torque_limit_nm=options.torque_limit_nm,
        start=start,
        torque_margin=TORQUE_MARGIN,
    )


def synthesize(
    athlete: AthleteParameters,
    synthesis: Synthesis,
    options: SynthesisOptions,
    config_path: str | Path | None = None,
    evaluator: Any = None,
) -> tuple[SynthesisResult, GestureProblem]:
    """Run the whole synthesis; returns the verified result and the fine problem (for outputs).

    ``evaluator`` (:mod:`bemore.evaluate`, e.g. on a Dask cluster) evaluates the batches of
    designs; None evaluates them here.

    Never raises because no feasible gesture exists: ``result.feasible`` is then False and the
    failing constraints are marked in ``result.constraints`` (closest design found).
    """
    clock = time.perf_counter()
    model, P, values = exemplary_matrix(athlete, options.segments)
    coarse_problem = _problem(model, P, synthesis, options, options.coarse_step_s, 1)
    fine_problem = _problem(
        model, P, synthesis, options, options.fine_step_s, FINE_SUBSTEPS, coarse_problem.start
    )
    _warm_up(coarse_problem)
    coarse = _evaluated(coarse_problem, evaluator)
    fine = _evaluated(fine_problem, evaluator)
    timings = {"startup": time.perf_counter() - clock}
    outcome = _search(coarse, options)
    timings["coarse"] = time.perf_counter() - clock - sum(timings.values())
    optimisation = outcome
    if options.polish and outcome.success:
        if options.fine_polish:
            polished = solve_multistart(fine, outcome.x[None], method="slsqp", tolerance=1e-8,
                                        gradients=options.gradients)
            # Keep the polish unless it lost feasibility the coarse design had on the fine grid.
            _, c_start = fine.evaluate(outcome.x[None])
            start_violation = float(
                violation(c_start[0], fine.constraint_lower, fine.constraint_upper)
            )
            keep = polished.success or polished.maxcv <= start_violation
        else:
            polished, _ = solve_corrected(coarse, fine, outcome.x, tolerance=POLISH_TOLERANCE,
                                          gradients=options.gradients)
            keep = True  # solve_corrected already falls back to x when it would lose feasibility
        optimisation = _with_polish(outcome, polished, keep)
    x = optimisation.x
    timings["polish"] = time.perf_counter() - clock - sum(timings.values())
    value, rotation, peak, statuses = verify(fine_problem, x)
    timings["verify"] = time.perf_counter() - clock - sum(timings.values())
    feasible = all(status.satisfied for status in statuses)
    failing = [status.name for status in statuses if not status.satisfied]
    message = (
        f"{optimisation.message}; re-simulated with {VERIFY_SUBSTEPS} steps per sample: every "
        "constraint holds"
        if feasible
        else f"no feasible gesture found within the bounds: {', '.join(failing)} "
        f"failed at the closest design"
    )
    elapsed = time.perf_counter() - clock
    position = {
        name: float((v - lo) / (hi - lo))
        for name, v, lo, hi in zip(fine.names, x, fine.lower, fine.upper, strict=True)
    }
    result = SynthesisResult(
        design=fine.design(x),
        objective=options.objective,
        objective_value=value,
        objective_unit=OBJECTIVES[options.objective],
        final_rotation_deg=rotation,
        constraints=statuses,
        feasible=feasible,
        method=options.method,
        starts=options.starts if options.method != "pymoo" else 1,
        elapsed_s=elapsed,
        message=message,
        inputs={
            "athlete": athlete.source,
            "athlete_parameters": athlete.values,
            "athlete_fit": athlete.fit,
            "athlete_model": athlete.model,
            "exemplary_parameters": values,
            "synthesis_config": str(config_path) if config_path else "default",
            "seed": options.seed,
            "coarse_step_s": options.coarse_step_s,
            "fine_step_s": options.fine_step_s,
            "fine_substeps": FINE_SUBSTEPS,
            "verify_substeps": VERIFY_SUBSTEPS,
            "rotation_margin_deg": ROTATION_MARGIN_DEG,
            "free_midpoints": options.free_midpoints,
            "gradients": options.gradients,
            "start_rate_deg_s": options.start_rate_deg_s,
            "torque_limit_per_shoulder_nm": options.torque_limit_nm,
            "segments": options.segments,
            "start_state": {
                "free_q0": fine.start.free_q0.tolist(),
                "free_qd0": fine.start.free_qd0.tolist(),
            },
        },
        design_position=position,
        optimisation=optimisation,
        peak_torque_per_shoulder_nm=peak,
        engine_calls=coarse_problem.engine_calls + fine_problem.engine_calls,
        timings_s=timings,
    )
    return result, fine


def _with_polish(
    search: OptimisationResult, polish: OptimisationResult, keep: bool
) -> OptimisationResult:
    """The search and its polish as one result: the polish's point when ``keep`` (else the
    search's), the costs, runs and history of both (the polish's runs marked ``"polish"``)."""
    final = polish if keep else search
    return replace(
        final,
        nfev=search.nfev + polish.nfev,
        nit=search.nit + polish.nit,
        njev=search.njev + polish.njev,
        nbatch=search.nbatch + polish.nbatch,
        algorithm=f"{search.algorithm}, then {polish.algorithm}",
        elapsed_s=search.elapsed_s + polish.elapsed_s,
        history=[*search.history, *continued(search.history, polish.history)],
        runs=[*search.runs, *(replace(run, stage="polish") for run in polish.runs)],
        detail=f"{search.detail}; polish: {polish.detail}"
        + ("" if keep else " (not kept: it lost feasibility the search's point had)"),
    )


def _warm_up(problem: GestureProblem) -> None:
    """Load what the first batch would otherwise load inside the search (the compiled kernels
    for one and for several members, scipy's compiled SLSQP), so that the stage timings
    separate the start-up from the search. Not counted as evaluations."""
    from bemore.optimize.slsqp import compiled_slsqp

    compiled_slsqp()

    design = np.array([problem.upper])
    t = np.arange(3) * problem.step_s
    for X in (design, np.repeat(design, 2, axis=0)):
        problem.simulate_batch(X, t, problem.substeps)
    problem.simulations = problem.engine_calls = 0


def _evaluated(problem: GestureProblem, evaluator: Any) -> GestureProblem:
    """``problem`` with its batch evaluation handed to ``evaluator`` (None: unchanged)."""
    if evaluator is None:
        return problem
    from bemore.evaluate import EvaluatedGestureProblem

    return EvaluatedGestureProblem(problem, evaluator)
