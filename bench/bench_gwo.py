"""Optimiser overhead per iteration: bemore's GWO vs mealpy's GWO vs pyswarms' PSO.

All three drive the same cheap vectorised cost (a 12-dimensional shifted sphere, the size of the
identification problem) with the seed protocol's population (200) so that the time measured is
the optimiser's own work per iteration, not the cost's. bemore and pyswarms evaluate the whole
population in one call; mealpy calls the cost once per agent (its design), with a batch of one.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from bench.common import Measurement, median_time

DIM = 12
TARGET = np.linspace(0.2, 0.8, DIM)


def cost(X: np.ndarray) -> np.ndarray:
    """Shifted sphere on [0, 1]^12, vectorised: (N, 12) → (N,)."""
    return np.sum((X - TARGET) ** 2, axis=1)


def run_bemore(pack: int, iterations: int) -> None:
    """bemore's GWO through its ask/tell driver (as ``bemore identify`` runs it)."""
    from bemore.optimize import FunctionProblem, make_algorithm, minimize

    problem = FunctionProblem(cost, np.zeros(DIM), np.ones(DIM))
    minimize(problem, make_algorithm("gwo", problem, pack, iterations, seed=0))


def run_mealpy(pack: int, iterations: int) -> None:
    """mealpy's OriginalGWO, one cost call per agent."""
    from mealpy import GWO, FloatVar

    problem = {
        "obj_func": lambda x: float(cost(x[None, :])[0]),
        "bounds": FloatVar(lb=[0.0] * DIM, ub=[1.0] * DIM),
        "minmax": "min",
        "log_to": None,
    }
    GWO.OriginalGWO(epoch=iterations, pop_size=pack).solve(problem, seed=0)


def run_pyswarms(pack: int, iterations: int) -> None:
    """pyswarms' GlobalBestPSO, whole swarm per cost call."""
    from bemore.optimize.adapters import quiet_pyswarms_reporter

    with quiet_pyswarms_reporter():
        from pyswarms.single.global_best import GlobalBestPSO

    logging.getLogger("pyswarms").setLevel(logging.ERROR)
    with quiet_pyswarms_reporter():
        optimizer = GlobalBestPSO(
            n_particles=pack,
            dimensions=DIM,
            options={"w": 0.7298, "c1": 1.49618, "c2": 1.49618},
            bounds=(np.zeros(DIM), np.ones(DIM)),
        )
    optimizer.optimize(cost, iters=iterations, verbose=False)


def cost_time_per_iteration(pack: int, repeats: int = 200) -> float:
    """Time of one batched cost call on ``pack`` points (s), to subtract from the totals."""
    X = np.random.default_rng(0).random((pack, DIM))
    start = time.perf_counter()
    for _ in range(repeats):
        cost(X)
    return (time.perf_counter() - start) / repeats


def run(smoke: bool) -> list[Measurement]:
    """Per-iteration optimiser overhead (µs) of bemore's GWO and of both baselines."""
    pack, iterations, repeats = (20, 5, 1) if smoke else (200, 50, 5)
    batch_cost = cost_time_per_iteration(pack)
    per_iteration = {}
    for name, runner in (
        ("bemore", run_bemore),
        ("mealpy", run_mealpy),
        ("pyswarms", run_pyswarms),
    ):
        runner(pack, 2)  # warm-up: imports and first-call costs are not overhead per iteration
        total = median_time(lambda runner=runner: runner(pack, iterations), repeats)
        calls = pack if name == "mealpy" else 1
        per_iteration[name] = max(total / iterations - batch_cost * calls / pack, 1e-9) * 1e6
    figure = f"pack {pack}, dim {DIM}, {iterations} iterations, median of {repeats}"
    return [
        Measurement(
            f"GWO overhead per iteration ({figure})",
            "µs",
            per_iteration["bemore"],
            per_iteration["mealpy"],
            "mealpy OriginalGWO",
        ),
        Measurement(
            f"overhead per iteration vs PSO ({figure})",
            "µs",
            per_iteration["bemore"],
            per_iteration["pyswarms"],
            "pyswarms GlobalBestPSO",
        ),
    ]
