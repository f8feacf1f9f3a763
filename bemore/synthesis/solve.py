"""Constrained optimisation of a batched problem: multi-start SLSQP and trust-constr.

The solver works on design variables normalised to [0, 1] (so one finite-difference step suits
seconds and radians alike). Objective, constraints and their forward finite-difference
Jacobians come from batched requests cached by the point, so that they share one simulation;
with ``eager`` a new point is evaluated together with its stencil (n + 1 points in one batch).
The starting points of a multi-start run advance in lockstep, each in its own thread, and their
requests are merged into one batch (:class:`_LockstepBatcher`), so the engine always sees a
whole pack at once.

Constraints are declared once, as ``lower ≤ value ≤ upper`` (:class:`BatchProblem`), and converted
to each library's sign convention in exactly one place: :func:`constraint_form` (also used by
the pymoo global search in :mod:`bemore.synthesis.pymoo_search`).
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from bemore.errors import OptimisationError

Convention = Literal["scipy", "pymoo"]


class BatchProblem(Protocol):
    """A design problem evaluated a whole batch at a time (physical units)."""

    names: tuple[str, ...]
    lower: np.ndarray  # (n,) bounds of the design variables
    upper: np.ndarray
    constraint_names: tuple[str, ...]  # (m,) every constraint is lower ≤ value ≤ upper
    constraint_lower: np.ndarray  # (m,), −inf when one-sided
    constraint_upper: np.ndarray  # (m,), +inf when one-sided

    def evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objective (B,) and constraint values (B, m) of the designs X (B, n)."""
        ...


def constraint_form(
    values: np.ndarray, lower: np.ndarray, upper: np.ndarray, convention: Convention
) -> np.ndarray:
    """Convert ``lower ≤ values ≤ upper`` (…, m) to a library's inequality convention.

    ``"scipy"``: SLSQP's ``ineq`` — feasible when every returned entry is ≥ 0.
    ``"pymoo"``: pymoo's ``G`` — feasible when every returned entry is ≤ 0.
    Each finite bound contributes one column (lower bounds first, then upper bounds); infinite
    bounds are dropped. The one place where sign conventions are converted.
    """
    has_lower = np.isfinite(lower)
    has_upper = np.isfinite(upper)
    at_least = values[..., has_lower] - lower[has_lower]  # ≥ 0 when the lower bound holds
    at_most = upper[has_upper] - values[..., has_upper]  # ≥ 0 when the upper bound holds
    margins = np.concatenate([at_least, at_most], axis=-1)
    if convention == "scipy":
        return margins
    if convention == "pymoo":
        return -margins
    raise OptimisationError(f"unknown constraint convention {convention!r}")


def violation(values: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Largest constraint violation (…) in the constraints' own units; 0 when feasible."""
    margins = constraint_form(values, lower, upper, "scipy")
    return np.maximum(0.0, -margins).max(axis=-1, initial=0.0)


class _LockstepBatcher:
    """Merges the evaluation requests of several threads into one batched call.

    Each thread calls :meth:`request` with its points and blocks; when every active thread is
    waiting (or has finished), the last one to arrive evaluates the union and wakes the others.
    """

    def __init__(
        self, evaluate: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], active: int
    ):
        self._evaluate = evaluate
        self._active = active
        self._pending: dict[int, np.ndarray] = {}
        self._results: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._condition = threading.Condition()
        self._failure: BaseException | None = None
        self.batches = 0

    def request(self, ticket: int, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Evaluate ``points`` (k, n) with the others' requests; returns (f (k,), c (k, m))."""
        with self._condition:
            self._pending[ticket] = points
            self._flush_if_complete()
            while ticket not in self._results and self._failure is None:
                self._condition.wait()
            if self._failure is not None:
                raise self._failure
            return self._results.pop(ticket)

    def finished(self) -> None:
        """One thread is done: it no longer takes part in the batches."""
        with self._condition:
            self._active -= 1
            self._flush_if_complete()

    def _flush_if_complete(self) -> None:
        if not self._pending or len(self._pending) < self._active:
            return
        tickets = list(self._pending)
        sizes = [len(self._pending[ticket]) for ticket in tickets]
        try:
            f, c = self._evaluate(np.concatenate([self._pending[t] for t in tickets]))
        except BaseException as error:  # handed to every waiting thread, then re-raised
            self._failure = error
            self._condition.notify_all()
            return
        self.batches += 1
        offsets = np.cumsum([0, *sizes])
        for ticket, start, stop in zip(tickets, offsets[:-1], offsets[1:], strict=True):
            self._results[ticket] = (f[start:stop], c[start:stop])
        self._pending.clear()
        self._condition.notify_all()


class _StencilCache:
    """Objective, constraints and forward-difference Jacobians of one run, cached by point.

    Works in normalised variables u ∈ [0, 1]ⁿ; ``step`` is the finite-difference step in u.
    A stencil step that would leave the box is taken backwards instead. ``eager``: evaluate a
    new point together with its stencil (one batch of n + 1, best when the engine batches);
    otherwise the stencil waits until the Jacobian is asked for (fewer simulations when each
    one costs the same, since line-search trial points never need a gradient). ``budget``: the
    most batched requests this run may make; one more raises :class:`_OutOfBudgetError`.
    """

    def __init__(
        self,
        request: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
        to_physical: Callable[[np.ndarray], np.ndarray],
        step: float,
        eager: bool = True,
        budget: int | None = None,
    ):
        self._raw_request = request
        self._to_physical = to_physical
        self._step = step
        self._eager = eager
        self._budget = budget
        self._values: dict[bytes, tuple[float, np.ndarray]] = {}
        self._points: dict[bytes, np.ndarray] = {}
        self._gradients: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self.evaluations = 0
        self.requests = 0

    def _request(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._budget is not None and self.requests >= self._budget:
            raise _OutOfBudgetError
        self.requests += 1
        return self._raw_request(X)

    def best(self, lower: np.ndarray, upper: np.ndarray, tolerance: float) -> np.ndarray:
        """The best point visited (u): feasible within ``tolerance`` with the lowest objective,
        else the least violating."""
        keys = list(self._values)
        worst = np.array([violation(self._values[k][1], lower, upper) for k in keys])
        f = np.array([self._values[k][0] for k in keys])
        order = np.lexsort((f, np.where(worst <= tolerance, 0.0, worst)))
        return self._points[keys[order[0]]]

    def values(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        """(f, c (m,)) at u; when ``eager`` the stencil is evaluated in the same batch."""
        u = np.asarray(u, float)
        key = u.tobytes()
        if key not in self._values:
            if self._eager:
                self._stencil(u, key)
            else:
                f, c = self._request(self._to_physical(u[None, :]))
                self.evaluations += 1
                self._values[key] = (float(f[0]), c[0].copy())
                self._points[key] = u.copy()
        return self._values[key]

    def get(self, u: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """(f, c (m,), ∂f/∂u (n,), ∂c/∂u (m, n)) at u (forward differences)."""
        u = np.asarray(u, float)
        key = u.tobytes()
        if key not in self._gradients:
            self._stencil(u, key)
        return (*self._values[key], *self._gradients[key])

    def _stencil(self, u: np.ndarray, key: bytes) -> None:
        """Evaluate the perturbed points (and u itself if not known yet) in one batch."""
        n = u.size
        steps = np.where(u + self._step <= 1.0, self._step, -self._step)
        stencil = np.repeat(u[None, :], n + 1, axis=0)
        stencil[1:] += np.diag(steps)
        known = key in self._values
        f, c = self._request(self._to_physical(stencil[1:] if known else stencil))
        self.evaluations += len(f)
        if known:
            f0, c0 = self._values[key]
        else:
            f0, c0 = float(f[0]), c[0].copy()
            f, c = f[1:], c[1:]
            self._values[key] = (f0, c0)
            self._points[key] = u.copy()
        self._gradients[key] = ((f - f0) / steps, ((c - c0) / steps[:, None]).T)


class _OutOfBudgetError(Exception):
    """A run asked for more batched evaluations than its budget (caught in the run)."""


@dataclass
class RunRecord:
    """One local run (one starting point): where it started and ended (physical units)."""

    x0: list[float]
    x: list[float]
    objective: float
    violation: float
    iterations: int
    evaluations: int
    success: bool
    message: str
    constraints: list[float] = field(default_factory=list)  # values at x (their own units)


@dataclass
class SolveOutcome:
    """Best design found and how: a result object, never an exception for non-convergence."""

    x: np.ndarray
    objective: float
    constraints: np.ndarray
    violation: float
    feasible: bool
    iterations: int
    evaluations: int
    batches: int
    elapsed_s: float
    method: str
    message: str
    runs: list[RunRecord] = field(default_factory=list)


class Normaliser:
    """Maps normalised u ∈ [0, 1]ⁿ to physical x and back."""

    def __init__(self, lower: np.ndarray, upper: np.ndarray):
        self.lower = np.asarray(lower, float)
        self.span = np.asarray(upper, float) - self.lower

    def physical(self, u: np.ndarray) -> np.ndarray:
        return self.lower + np.asarray(u) * self.span

    def normalised(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x) - self.lower) / self.span


def starting_points(
    problem: BatchProblem,
    count: int,
    rng: np.random.Generator,
    linear: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """``count`` starting points (count, n), physical units: the box centre, then random draws.

    The centre is left out when it violates the linear constraints.

    ``linear(X) → (B,)`` ≥ 0 marks points satisfying the problem's linear constraints; draws that
    violate it are redrawn (up to a limit), so every start is linearly feasible.
    """
    normaliser = Normaliser(problem.lower, problem.upper)

    def admissible(u: np.ndarray) -> bool:
        return linear is None or bool(linear(normaliser.physical(u)[None])[0] >= 0.0)

    centre = np.full(problem.lower.size, 0.5)
    points = [centre] if admissible(centre) else []
    attempts = 0
    while len(points) < count:
        attempts += 1
        if attempts > 1000 * count:
            raise OptimisationError("no starting point satisfies the linear constraints")
        u = rng.uniform(0.0, 1.0, problem.lower.size)
        if admissible(u):
            points.append(u)
    return normaliser.physical(np.array(points[:count]))


def screened_starts(
    problem: BatchProblem,
    count: int,
    rng: np.random.Generator,
    linear: Callable[[np.ndarray], np.ndarray] | None = None,
    pool: int = 64,
    spacing: float = 0.15,
) -> tuple[np.ndarray, np.ndarray, int]:
    """``count`` starting points (count, n) picked from ``pool`` candidates evaluated as ONE batch.

    The candidates are :func:`starting_points` (box centre, then seeded draws that satisfy the
    linear constraints). They are ranked feasible first (by objective), then by violation; the
    starts are taken down that ranking, skipping any candidate closer than ``spacing`` (in
    normalised units, max-norm) to one already taken, so that the starts stay spread over the
    box. Returns (starts, their objective values (count,), number of candidates evaluated).
    """
    candidates = starting_points(problem, max(pool, count), rng, linear)
    f, c = problem.evaluate(candidates)
    worst = violation(c, problem.constraint_lower, problem.constraint_upper)
    order = np.lexsort((f, worst))
    normaliser = Normaliser(problem.lower, problem.upper)
    u = normaliser.normalised(candidates)
    chosen: list[int] = []
    for index in order:
        if all(np.abs(u[index] - u[j]).max() >= spacing for j in chosen):
            chosen.append(int(index))
        if len(chosen) == count:
            break
    for index in order:  # too few spread candidates: fill up with the next best
        if len(chosen) == count:
            break
        if int(index) not in chosen:
            chosen.append(int(index))
    return candidates[chosen], f[chosen], len(candidates)


class ShiftedProblem:
    """``inner`` with constant offsets added to its objective and constraint values.

    The defect correction of :func:`solve_corrected`: a cheap (coarse) problem shifted by what
    an accurate (fine) one differs from it at the current design.
    """

    def __init__(self, inner: BatchProblem, objective_offset: float, constraint_offset: np.ndarray):
        self.inner = inner
        self.objective_offset = float(objective_offset)
        self.constraint_offset = np.asarray(constraint_offset, float)
        for name in ("names", "lower", "upper", "constraint_names", "constraint_lower",
                     "constraint_upper"):
            setattr(self, name, getattr(inner, name))
        ones = np.ones(len(self.constraint_lower))
        self.constraint_scale = getattr(inner, "constraint_scale", ones)

    def evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The inner objective (B,) and constraints (B, m), shifted by the offsets."""
        f, c = self.inner.evaluate(X)
        return f + self.objective_offset, c + self.constraint_offset


def solve_corrected(
    coarse: BatchProblem,
    fine: BatchProblem,
    x0: np.ndarray,
    tolerance: float = 1e-8,
    defect_tolerance: np.ndarray | None = None,
    max_corrections: int = 4,
    feasibility_tolerance: float = 1e-6,
) -> tuple[SolveOutcome, int]:
    """Solve ``fine`` through ``coarse`` by defect correction, from x0 (n,).

    Each round evaluates the fine problem at the current design (one batch of one design),
    shifts the coarse problem by the difference (:class:`ShiftedProblem`) and re-solves it with
    SLSQP from there (cheap coarse batches). Stops when the coarse problem, shifted by the
    previous defect, predicts the fine constraint values within ``defect_tolerance`` (m,) (in
    the constraints' units; default 1e-3 of each constraint scale) at the new design, i.e. the
    defect no longer changes where it matters. The discretisation error varies slowly over the
    design space, so one or two rounds do. Returns the last SLSQP outcome, re-evaluated on the
    fine problem, and the number of fine evaluations.
    """
    clock = time.perf_counter()
    x = x_start = np.asarray(x0, float)
    scale = np.asarray(getattr(fine, "constraint_scale", np.ones(len(fine.constraint_lower))))
    limit = 1e-3 * scale if defect_tolerance is None else np.asarray(defect_tolerance, float)
    f_fine, c_fine = fine.evaluate(x[None])
    start_values = (f_fine, c_fine)
    f_coarse, c_coarse = coarse.evaluate(x[None])
    fine_evaluations = 1
    runs: list[RunRecord] = []
    outcome: SolveOutcome | None = None
    evaluations = iterations = batches = 0
    for _ in range(max_corrections):
        shift_f, shift_c = f_fine[0] - f_coarse[0], c_fine[0] - c_coarse[0]
        shifted = ShiftedProblem(coarse, shift_f, shift_c)
        outcome = solve_multistart(
            shifted,
            x[None],
            objective_scale=max(abs(float(f_fine[0])), 1e-12),
            tolerance=tolerance,
            feasibility_tolerance=feasibility_tolerance,
            reevaluate=False,
            restore=False,  # a warm start a defect away from feasibility: SLSQP copes
        )
        evaluations += outcome.evaluations
        iterations += outcome.iterations
        batches += outcome.batches
        runs += outcome.runs
        x = outcome.x
        f_fine, c_fine = fine.evaluate(x[None])
        fine_evaluations += 1
        predicted = outcome.constraints  # the shifted coarse values at x
        if np.all(np.abs(c_fine[0] - predicted) <= limit):
            break
        f_coarse, c_coarse = [outcome.objective - shift_f], [outcome.constraints - shift_c]
    assert outcome is not None  # max_corrections ≥ 1
    worst = float(violation(c_fine[0], fine.constraint_lower, fine.constraint_upper))
    start_worst = float(violation(start_values[1][0], fine.constraint_lower, fine.constraint_upper))
    fallback = worst > max(start_worst, feasibility_tolerance)
    if fallback:  # the corrections lost feasibility the start had on the fine problem: keep it
        x, (f_fine, c_fine), worst = x_start, start_values, start_worst
    ok = worst <= feasibility_tolerance
    result = SolveOutcome(
        x=x,
        objective=float(f_fine[0]),
        constraints=c_fine[0],
        violation=worst,
        feasible=ok,
        iterations=iterations,
        evaluations=evaluations + fine_evaluations,
        batches=batches + fine_evaluations,
        elapsed_s=time.perf_counter() - clock,
        method="slsqp (defect-corrected)",
        message=f"defect correction: {fine_evaluations} fine evaluation(s)"
        + ("; kept the start (the corrections lost feasibility)" if fallback else "")
        + ("" if ok else "; the fine problem is violated at the end"),
        runs=runs,
    )
    return result, fine_evaluations


def solve_multistart(
    problem: BatchProblem,
    starts: np.ndarray,
    method: Literal["slsqp", "trust-constr"] = "slsqp",
    objective_scale: float | None = None,
    fd_step: float = 1e-6,
    tolerance: float = 1e-8,
    max_iterations: int = 100,
    feasibility_tolerance: float = 1e-6,
    lockstep: bool = True,
    eager: bool = True,
    restore: bool = True,
    reevaluate: bool = True,
    budget: int | None = None,
) -> SolveOutcome:
    """Run a local method from every starting point (S, n) and return the best feasible end.

    ``objective_scale`` divides the objective so that SLSQP sees values near 1 (default: |f| at
    the first start). ``feasibility_tolerance`` is in the constraints' units. With ``lockstep``
    the runs advance in threads whose evaluations are merged into one batch per step; ``eager``
    evaluates each new point with its finite-difference stencil (see :class:`_StencilCache`).
    With ``restore``, a run whose start violates a constraint first minimises the sum of the
    squared (scaled) violations (phase 1); if that ends infeasible, the run stops there and its
    end is the "closest" design, otherwise the objective is minimised from that feasible point.
    ``reevaluate``: evaluate the returned design once more (see :func:`best_outcome`).
    ``budget``: the most batched evaluation requests of one run (each is one lockstep batch);
    a run that needs more stops there with the best point it visited, so that one straggler
    does not hold the whole pack (restoration stuck in a local minimum of the violation).
    """
    from scipy.optimize import Bounds

    clock = time.perf_counter()
    normaliser = Normaliser(problem.lower, problem.upper)
    lower_c, upper_c = problem.constraint_lower, problem.constraint_upper
    u_starts = np.clip(normaliser.normalised(np.atleast_2d(starts)), 0.0, 1.0)
    n_runs = len(u_starts)
    if objective_scale is None:
        f0, _ = problem.evaluate(normaliser.physical(u_starts[:1]))
        objective_scale = max(abs(float(f0[0])), 1e-12)
    batcher = _LockstepBatcher(problem.evaluate, n_runs if lockstep else 1)
    records: list[RunRecord | None] = [None] * n_runs
    # Constraints as the optimiser sees them: divided by the problem's scales (so that
    # degrees of rotation and seconds have comparable sizes).
    scale = np.asarray(getattr(problem, "constraint_scale", np.ones(len(lower_c))), float)
    low, up = lower_c / scale, upper_c / scale
    box = Bounds(np.zeros(problem.lower.size), np.ones(problem.lower.size))
    caches = [
        _StencilCache(
            lambda X, ticket=index: batcher.request(ticket, X),
            normaliser.physical,
            fd_step,
            eager,
            budget,
        )
        for index in range(n_runs)
    ]

    def run(index: int) -> None:
        cache = caches[index]
        iterations = [0]  # SLSQP / trust-constr iterations, restoration included

        def count(*_: Any) -> None:
            iterations[0] += 1

        def record(u: np.ndarray, success: bool, message: str) -> None:
            u = np.clip(u, 0.0, 1.0)
            f_end, c_end = cache.values(u)  # known: every point recorded has been visited
            records[index] = RunRecord(
                x0=normaliser.physical(u_starts[index]).tolist(),
                x=normaliser.physical(u).tolist(),
                objective=f_end,
                violation=float(violation(c_end, lower_c, upper_c)),
                iterations=iterations[0],
                evaluations=cache.evaluations,
                success=success,
                message=message,
                constraints=np.asarray(c_end).tolist(),
            )

        try:
            u0 = u_starts[index]
            if restore and violation(cache.values(u0)[1], lower_c, upper_c) > 0.0:
                u0 = _restore(cache, u0, box, scale, low, up, max_iterations, count)
                if violation(cache.values(u0)[1], lower_c, upper_c) > feasibility_tolerance:
                    record(u0, False, "no feasible point reached: least squared violation found")
                    return
            result = _local(method, cache, u0, box, scale, low, up, objective_scale, tolerance,
                            max_iterations, count)
            record(result.x, bool(result.success), str(result.message))
        except _OutOfBudgetError:
            record(
                cache.best(lower_c, upper_c, feasibility_tolerance),
                False,
                f"stopped after {budget} batched evaluations: best point visited kept",
            )
        finally:
            batcher.finished()

    with warnings.catch_warnings():
        # trust-constr's BFGS warns on the linear constraint rows (exact zero curvature).
        warnings.filterwarnings("ignore", message="delta_grad == 0.0")
        if lockstep and n_runs > 1:
            threads = [threading.Thread(target=run, args=(index,)) for index in range(n_runs)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        else:
            for index in range(n_runs):
                run(index)
    if any(record is None for record in records):
        raise OptimisationError(f"{method}: a local run stopped without a result")
    return best_outcome(
        problem,
        normaliser,
        [r for r in records if r is not None],
        method,
        feasibility_tolerance,
        batcher.batches,
        time.perf_counter() - clock,
        reevaluate,
    )


def _local(
    method: str,
    cache: _StencilCache,
    u0: np.ndarray,
    box: Any,
    scale: np.ndarray,
    low: np.ndarray,
    up: np.ndarray,
    objective_scale: float,
    tolerance: float,
    max_iterations: int,
    callback: Callable[..., None],
) -> Any:
    """One local run of SLSQP or trust-constr from u0 on the cached, scaled problem."""
    from scipy.optimize import BFGS, NonlinearConstraint, minimize

    def fun(u: np.ndarray) -> float:
        return cache.values(u)[0] / objective_scale

    def grad(u: np.ndarray) -> np.ndarray:
        return cache.get(u)[2] / objective_scale

    if method == "slsqp":
        return minimize(
            fun,
            u0,
            jac=grad,
            method="SLSQP",
            bounds=box,
            constraints=[
                {
                    "type": "ineq",
                    "fun": lambda u: constraint_form(cache.values(u)[1] / scale, low, up, "scipy"),
                    "jac": lambda u: _jacobian_form(cache.get(u)[3] / scale[:, None], low, up),
                }
            ],
            options={"ftol": tolerance, "maxiter": max_iterations},
            callback=callback,
        )
    nonlinear = NonlinearConstraint(
        lambda u: cache.values(u)[1] / scale,
        low,
        up,
        jac=lambda u: cache.get(u)[3] / scale[:, None],
        hess=BFGS(),
    )
    return minimize(
        fun,
        u0,
        jac=grad,
        hess=BFGS(),
        method="trust-constr",
        bounds=box,
        constraints=[nonlinear],
        options={"gtol": tolerance, "xtol": tolerance, "maxiter": 10 * max_iterations},
        callback=callback,
    )


def _restore(
    cache: _StencilCache,
    u0: np.ndarray,
    box: Any,
    scale: np.ndarray,
    low: np.ndarray,
    up: np.ndarray,
    max_iterations: int,
    callback: Callable[..., None],
) -> np.ndarray:
    """Phase 1: minimise Σ min(0, margin)² over the box from u0; returns its end."""
    from scipy.optimize import minimize

    def squared(u: np.ndarray) -> float:
        margins = constraint_form(cache.values(u)[1] / scale, low, up, "scipy")
        return float(np.sum(np.minimum(margins, 0.0) ** 2))

    def gradient(u: np.ndarray) -> np.ndarray:
        _, c, _, jac = cache.get(u)
        margins = constraint_form(c / scale, low, up, "scipy")
        return 2.0 * np.minimum(margins, 0.0) @ _jacobian_form(jac / scale[:, None], low, up)

    result = minimize(
        squared,
        u0,
        jac=gradient,
        method="SLSQP",
        bounds=box,
        options={"ftol": 1e-14, "maxiter": max_iterations},
        callback=callback,
    )
    return np.clip(result.x, 0.0, 1.0)


def _jacobian_form(jac: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Jacobian rows matching :func:`constraint_form` (``"scipy"``) for a (m, n) Jacobian."""
    return np.concatenate([jac[np.isfinite(lower)], -jac[np.isfinite(upper)]], axis=0)


def best_outcome(
    problem: BatchProblem,
    normaliser: Normaliser,
    records: list[RunRecord],
    method: str,
    feasibility_tolerance: float,
    batches: int,
    elapsed_s: float,
    reevaluate: bool = True,
) -> SolveOutcome:
    """Lowest objective among feasible ends, else the least-violating end.

    With ``reevaluate`` the chosen design is evaluated once more; without, its recorded values
    are used (they are evaluations at exactly that point, cached by the point).
    """
    feasible = [r for r in records if r.violation <= feasibility_tolerance]
    best = (
        min(feasible, key=lambda r: r.objective)
        if feasible
        else min(records, key=lambda r: r.violation)
    )
    x = np.array(best.x)
    if reevaluate:
        # Re-evaluate the reported best instead of trusting the bookkeeping (pyswarms #505).
        f, c = problem.evaluate(x[None])
        f0, c0 = float(f[0]), c[0]
    else:
        f0, c0 = best.objective, np.asarray(best.constraints, float)
    worst = float(violation(c0, problem.constraint_lower, problem.constraint_upper))
    ok = worst <= feasibility_tolerance
    message = (
        f"best of {len(records)} start(s); {len(feasible)} ended feasible"
        if ok
        else f"no feasible design found from {len(records)} start(s); closest shown"
    )
    return SolveOutcome(
        x=x,
        objective=f0,
        constraints=c0,
        violation=worst,
        feasible=ok,
        iterations=sum(r.iterations for r in records),
        evaluations=sum(r.evaluations for r in records) + int(reevaluate),
        batches=batches,
        elapsed_s=elapsed_s,
        method=method,
        message=message,
        runs=records,
    )
