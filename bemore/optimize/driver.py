"""The one optimisation loop: ask → evaluate the whole population → tell, for any algorithm.

The driver, not the algorithm, keeps the best point ever evaluated and re-evaluates it at the end
before reporting it (a library's own bookkeeping is not trusted: pyswarms issue #505). A callback
sees every iteration and can stop the run; Ctrl-C between iterations ends the run cleanly with
the best result so far (status 1).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from bemore.errors import OptimisationError
from bemore.optimize.problem import Problem
from bemore.optimize.result import IterationRecord, OptimisationResult

ALGORITHMS = ("gwo", "pso", "de", "cmaes")


class Algorithm(Protocol):
    """What the driver needs from an algorithm: batches to evaluate and their costs back."""

    name: str

    @property
    def done(self) -> bool:
        """True when the algorithm has used its budget."""

    def ask(self) -> np.ndarray:
        """Points (N, d) to evaluate, inside the problem's box."""

    def tell(self, X: np.ndarray, F: np.ndarray) -> None:
        """Costs (N,) of the points returned by the last ``ask``."""

    def describe(self) -> dict[str, Any]:
        """Settings to record in the result."""


def make_algorithm(
    name: str,
    problem: Problem,
    pack: int,
    iterations: int,
    seed: int = 0,
    options: dict[str, Any] | None = None,
) -> Algorithm:
    """Build algorithm ``name`` (gwo, pso, de, cmaes) for ``problem``'s box.

    ``pack`` is the population size, ``iterations`` the number of population evaluations,
    ``options`` algorithm-specific settings (e.g. GWO variants ``{"demotion": True}``).
    """
    options = dict(options or {})
    if name not in ALGORITHMS:
        raise OptimisationError(f"unknown algorithm {name!r} (allowed: {', '.join(ALGORITHMS)})")
    if pack < 2:
        raise OptimisationError(f"pack = {pack}: a population needs at least 2 members")
    if iterations < 1:
        raise OptimisationError(f"iterations = {iterations}: must be at least 1")
    if name == "gwo":
        from bemore.optimize.gwo import GreyWolfOptimizer, GWOOptions

        try:
            gwo_options = GWOOptions(**options)
        except TypeError as error:
            raise OptimisationError(f"GWO options: {error}") from None
        return GreyWolfOptimizer(problem.lower, problem.upper, pack, iterations, seed, gwo_options)
    from bemore.optimize import adapters

    factory = {"pso": adapters.PyswarmsPSO, "de": adapters.PymooDE, "cmaes": adapters.PymooCMAES}
    return factory[name](problem.lower, problem.upper, pack, iterations, seed, **options)


Callback = Callable[[IterationRecord, np.ndarray], bool | None]


def minimize(
    problem: Problem,
    algorithm: Algorithm,
    callback: Callback | None = None,
    seed: int | None = None,
) -> OptimisationResult:
    """Run ``algorithm`` on ``problem`` until its budget is used, the callback says stop, or Ctrl-C.

    ``callback(record, best_x)`` is called after every iteration. The returned result holds the
    best point ever evaluated, its cost re-evaluated once (counted in ``nfev``), and the history.
    """
    start = time.perf_counter()
    best_x: np.ndarray | None = None
    best_f = np.inf
    history: list[IterationRecord] = []
    nfev, status = 0, 0
    try:
        while not algorithm.done:
            X = algorithm.ask()
            F = problem.evaluate(X)
            nfev += X.shape[0]
            algorithm.tell(X, F)
            batch_best = int(np.argmin(F))
            if F[batch_best] < best_f:
                best_f, best_x = float(F[batch_best]), X[batch_best].copy()
            record = IterationRecord(
                iteration=len(history) + 1,
                nfev=nfev,
                best=best_f,
                batch_best=float(F[batch_best]),
                batch_mean=float(np.mean(F)),
                elapsed_s=time.perf_counter() - start,
            )
            history.append(record)
            if callback is not None and callback(record, best_x):
                status = 2
                break
    except KeyboardInterrupt:
        status = 1
    if status == 0 and getattr(algorithm, "stopped_early", False):
        status = 5
    if best_x is None:
        raise OptimisationError("the run was stopped before any point was evaluated")
    # Trust only a cost recomputed at the reported point.
    fun = float(problem.evaluate(best_x[None, :])[0])
    nfev += 1
    return OptimisationResult(
        x=best_x,
        fun=fun,
        nfev=nfev,
        nit=len(history),
        status=status,
        algorithm=algorithm.name,
        seed=seed,
        elapsed_s=time.perf_counter() - start,
        history=history,
        options=algorithm.describe(),
    )
