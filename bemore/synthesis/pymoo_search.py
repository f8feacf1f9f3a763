"""Constrained global search of a batched problem with pymoo (differential evolution).

The whole population is evaluated in one batched call per generation. Constraints reach pymoo
through :func:`bemore.optimize.constrained.constraint_form` (``G ≤ 0``), the one adapter of sign
conventions; the best individual is then polished by SLSQP.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bemore.optimize.constrained import ConstrainedProblem, constraint_form
from bemore.optimize.result import LocalRun, OptimisationResult
from bemore.synthesis.solve import Normaliser, best_outcome, solve_multistart


def solve_pymoo(
    problem: ConstrainedProblem,
    rng_seed: int,
    population: int = 40,
    generations: int = 40,
    polish: bool = True,
    feasibility_tolerance: float = 1e-6,
) -> OptimisationResult:
    """Constrained global search (pymoo differential evolution), whole population per batch.

    Constraints reach pymoo through :func:`constraint_form` (``G ≤ 0``). With ``polish`` the best
    individual is refined by SLSQP. ``rng_seed`` makes the run reproducible.
    """
    from pymoo.algorithms.soo.nonconvex.de import DE
    from pymoo.core.problem import Problem
    from pymoo.optimize import minimize as pymoo_minimize

    clock = time.perf_counter()
    normaliser = Normaliser(problem.lower, problem.upper)
    counter = {"evaluations": 0, "batches": 0}
    lower_c, upper_c = problem.constraint_lower, problem.constraint_upper
    n_g = constraint_form(np.zeros(len(lower_c)), lower_c, upper_c, "pymoo").size

    class _Adapter(Problem):
        def __init__(self) -> None:
            super().__init__(n_var=problem.lower.size, n_obj=1, n_ieq_constr=n_g, xl=0.0, xu=1.0)

        def _evaluate(self, U: np.ndarray, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            f, c = problem.evaluate(normaliser.physical(U))
            counter["evaluations"] += len(U)
            counter["batches"] += 1
            out["F"] = f[:, None]
            out["G"] = constraint_form(c, lower_c, upper_c, "pymoo")

    algorithm = DE(pop_size=population)
    result = pymoo_minimize(
        _Adapter(), algorithm, ("n_gen", generations), seed=rng_seed, verbose=False
    )
    population_u = result.pop.get("X")
    population_g = result.pop.get("G")
    population_f = result.pop.get("F")[:, 0]
    worst = np.maximum(0.0, population_g).max(axis=1, initial=0.0)
    pick = (
        np.argmin(np.where(worst <= feasibility_tolerance, population_f, np.inf))
        if (worst <= feasibility_tolerance).any()
        else np.argmin(worst)
    )
    x_best = normaliser.physical(population_u[pick])
    record = LocalRun(
        x0=[],
        x=x_best.tolist(),
        fun=float(population_f[pick]),
        maxcv=float(worst[pick]),
        nit=generations,
        nfev=counter["evaluations"],
        success=True,
        message=f"pymoo DE, {population} individuals × {generations} generations",
        stage="global",
    )
    if polish:
        polished = solve_multistart(
            problem, x_best[None], feasibility_tolerance=feasibility_tolerance
        )
        polished.runs.insert(0, record)
        polished.nfev += counter["evaluations"]
        polished.nbatch += counter["batches"]
        polished.nit += generations
        polished.algorithm = "pymoo"
        polished.elapsed_s = time.perf_counter() - clock
        polished.detail = "pymoo DE then SLSQP polish: " + polished.detail
        return polished
    return best_outcome(
        problem,
        [record],
        "pymoo",
        feasibility_tolerance,
        counter["batches"],
        time.perf_counter() - clock,
    )
