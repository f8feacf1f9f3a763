"""Synthesis speed: bemore's batched finite-difference SLSQP vs SLSQP on a plain solve_ivp model.

Target (issue 6): the whole synthesis (multi-start SLSQP) in ≤ 0.5 s; the seed took 23.82 s
(0.067 s per evaluation). Measured here, in the same run and from the same starting point:

* time per evaluation (one gesture simulated, objective and constraints): bemore's engine on
  the coarse search grid vs ``scipy.integrate.solve_ivp`` (LSODA, rtol 1e-6) driving the
  engine's hybrid dynamics ``model.hybrid`` as a plain right-hand side;
* a single-start SLSQP limited to a few iterations: bemore (batched finite-difference stencils,
  cached by point) vs ``scipy.optimize.minimize(method="SLSQP")`` with its own 2-point finite
  differences on the solve_ivp simulation (the baseline a newcomer would write);
* the whole synthesis of ``bemore synthesize`` (default config: 8 starts, coarse search, fine
  polish, verification) — no baseline in the same run (it would take hours), the seed's 23.82 s
  is quoted in the target column.
"""

from __future__ import annotations

import time

import numpy as np

from bench.common import Measurement, median_time

SEED_ELAPSED_S = 23.82


def _setup(steps: int):
    from bemore.model import exemplary_parameters, load_model
    from bemore.settings import load_synthesis
    from bemore.synthesis.problem import GestureProblem

    model = load_model("exemplary_gymnast")
    P = model.parameter_matrix([exemplary_parameters()])
    return GestureProblem(model, P, load_synthesis(), steps=steps)


def _ivp_evaluate(problem, x: np.ndarray, t_end: float | None = None) -> tuple[float, float]:
    """Baseline evaluation: solve_ivp on the hybrid dynamics; (objective N·m·s, rotation deg)."""
    from scipy.integrate import solve_ivp

    from bemore.synthesis.gesture import gesture_kinematics
    from bemore.synthesis.problem import objective_value

    model, P = problem.model, problem.P
    t_f = float(x[0])
    t_m = min(float(x[1]), t_f - 0.05)

    def driven(t: np.ndarray) -> np.ndarray:
        return gesture_kinematics(np.atleast_1d(t), t_f, t_m, float(x[2]))[:, 0]

    def rhs(t: float, y: np.ndarray) -> np.ndarray:
        k = driven(np.array([t]))
        acc, _ = model.hybrid(
            P, y[None, :5], y[None, 5:], k[0][:, None], k[1][:, None], k[2][:, None]
        )
        return np.concatenate([y[5:], acc[0]])

    end = t_f if t_end is None else t_end
    grid = np.linspace(0.0, end, problem.steps + 1)
    y0 = np.concatenate([problem.start.free_q0, problem.start.free_qd0])
    solution = solve_ivp(rhs, (0.0, end), y0, method="LSODA", t_eval=grid, rtol=1e-6, atol=1e-9)
    k = driven(grid)
    _, effort = model.hybrid(
        P, solution.y[:5].T, solution.y[5:].T, k[0][:, None], k[1][:, None], k[2][:, None]
    )
    value = float(objective_value("abs_torque_integral", effort[:, 0], grid))
    return value, float(np.rad2deg(solution.y[2, -1] - y0[2]))


def _baseline_slsqp(problem, x0: np.ndarray, iterations: int) -> float:
    """Seconds for scipy SLSQP (2-point finite differences) on the solve_ivp evaluation."""
    from scipy.optimize import minimize

    lower, upper = problem.lower, problem.upper
    span = upper - lower
    cache: dict[bytes, tuple[float, float]] = {}

    def evaluate(u: np.ndarray) -> tuple[float, float]:
        key = u.tobytes()
        if key not in cache:
            cache[key] = _ivp_evaluate(problem, lower + u * span)
        return cache[key]

    band_low, band_high = problem.rotation_band_deg
    constraints = [
        {"type": "ineq", "fun": lambda u: (evaluate(u)[1] - band_low) / 10.0},
        {"type": "ineq", "fun": lambda u: (band_high - evaluate(u)[1]) / 10.0},
        {
            "type": "ineq",
            "fun": lambda u: (lower[0] + u[0] * span[0]) - (lower[1] + u[1] * span[1]) - 0.5,
        },
    ]
    f0 = evaluate((x0 - lower) / span)[0]
    start = time.perf_counter()
    minimize(
        lambda u: evaluate(u)[0] / f0,
        (x0 - lower) / span,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * 3,
        constraints=constraints,
        options={"maxiter": iterations, "eps": 1e-6},
    )
    return time.perf_counter() - start


def run(smoke: bool) -> list[Measurement]:
    """Per-evaluation and per-solve figures of bemore next to the solve_ivp baseline."""
    from bemore.synthesis.solve import solve_multistart

    problem = _setup(steps=60 if smoke else 300)
    x = np.array([3.0, 2.0, np.deg2rad(140.0)])  # the box centre, the first start
    problem.evaluate(x[None])  # compile / warm the engine
    repeats = 3 if smoke else 7
    bemore_eval = median_time(lambda: problem.evaluate(x[None]), repeats)
    t_end = 0.02 if smoke else None  # smoke: only the first 0.02 s of the gesture
    baseline_eval = median_time(lambda: _ivp_evaluate(problem, x, t_end), 1 if smoke else 3)
    measurements = [
        Measurement(
            "time per evaluation" + (" (smoke: baseline over 0.02 s only)" if smoke else ""),
            "s",
            bemore_eval,
            baseline_eval,
            "solve_ivp LSODA + model.hybrid",
            "seed 0.067 s",
        )
    ]
    if smoke:
        return measurements
    iterations = 5
    start = time.perf_counter()
    solve_multistart(problem, x[None], eager=False, max_iterations=iterations, tolerance=1e-6)
    bemore_solve = time.perf_counter() - start
    baseline_solve = _baseline_slsqp(problem, x, iterations)
    measurements.append(
        Measurement(
            f"single-start SLSQP, {iterations} iterations",
            "s",
            bemore_solve,
            baseline_solve,
            "scipy SLSQP on solve_ivp",
        )
    )
    whole = median_time(_whole_synthesis, 1)
    measurements.append(
        Measurement(
            "whole synthesis (8 starts, polish, verification)",
            "s",
            whole,
            None,
            "",
            f"≤ 0.5 s (seed {SEED_ELAPSED_S} s)",
        )
    )
    return measurements


def _whole_synthesis() -> None:
    from bemore.settings import load_identification, load_synthesis
    from bemore.synthesis.athlete import default_parameters
    from bemore.synthesis.synthesize import SynthesisOptions, synthesize

    identification = load_identification()
    synthesize(default_parameters(identification), load_synthesis(), SynthesisOptions())


if __name__ == "__main__":
    import sys

    from bench.common import machine

    print(f"machine: {machine()}")
    for measurement in run(smoke="--smoke" in sys.argv):
        print("  " + measurement.line())
