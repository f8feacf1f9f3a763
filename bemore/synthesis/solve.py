"""Constrained optimisation of a batched problem: multi-start SLSQP and trust-constr.

The solver works on design variables normalised to [0, 1] (so one finite-difference step suits
seconds and radians alike). Objective, constraints and their forward finite-difference
Jacobians come from batched requests cached by the point, so that they share one simulation;
with ``eager`` a new point is evaluated together with its stencil (n + 1 points in one batch).
The starting points of a multi-start run advance in lockstep, each in its own thread, and their
requests are merged into one batch (:class:`_LockstepBatcher`), so the engine always sees a
whole pack at once.

The problems are :class:`bemore.optimize.ConstrainedProblem` (constraints declared once, as
``lower ≤ value ≤ upper``, converted to each library's sign convention in exactly one place:
:func:`bemore.optimize.constrained.constraint_form`); every solver returns a
:class:`bemore.optimize.OptimisationResult` with the constraint values and violation at ``x``,
the local runs and the history of batched requests.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from bemore.errors import OptimisationError
from bemore.optimize.constrained import ConstrainedProblem, constraint_form, violation
from bemore.optimize.result import (
    FEASIBLE,
    INFEASIBLE,
    IterationRecord,
    LocalRun,
    OptimisationResult,
)
from bemore.optimize.slsqp import minimize_slsqp


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

    def request(self, ticket: int, points: np.ndarray) -> tuple[np.ndarray, ...]:
        """Evaluate ``points`` (k, n) with the others' requests; returns (f (k,), c (k, m)) and,
        with an evaluation that gives Jacobians, (∂f (k, n), ∂c (k, m, n))."""
        with self._condition:
            if self._failure is not None:
                raise self._failure
            self._pending[ticket] = points
            self._flush_if_complete()
            while ticket not in self._results and self._failure is None:
                self._condition.wait()
            if self._failure is not None:
                raise self._failure
            return self._results.pop(ticket)

    def stop(self) -> None:
        """Ctrl-C in the thread waiting for the runs: every request from now on (and every one
        waiting) raises _StoppedError, which ends its run quietly."""
        with self._condition:
            self._failure = _StoppedError()
            self._condition.notify_all()

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
            found = self._evaluate(np.concatenate([self._pending[t] for t in tickets]))
        except BaseException as error:  # handed to every waiting thread, then re-raised
            self._failure = error
            self._condition.notify_all()
            return
        self.batches += 1
        offsets = np.cumsum([0, *sizes])
        for ticket, start, stop in zip(tickets, offsets[:-1], offsets[1:], strict=True):
            self._results[ticket] = tuple(a[start:stop] for a in found)
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
        span: np.ndarray | None = None,
    ):
        self._raw_request = request
        # Exact Jacobians: every request returns (f, c, ∂f/∂x, ∂c/∂x); dx/du = span.
        self._span = span
        self._to_physical = to_physical
        self._step = step
        self._eager = eager
        self._budget = budget
        self._values: dict[bytes, tuple[float, np.ndarray]] = {}
        self._points: dict[bytes, np.ndarray] = {}
        self._gradients: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self.evaluations = 0
        self.requests = 0

    def _request(self, X: np.ndarray) -> tuple[np.ndarray, ...]:
        if self._budget is not None and self.requests >= self._budget:
            raise _OutOfBudgetError
        self.requests += 1
        return self._raw_request(X)

    @property
    def jacobians(self) -> int:
        """Number of points whose Jacobians were computed (one stencil, or one simulation
        carrying the design's directions, each)."""
        return len(self._gradients)

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
            if self._span is not None:
                self._exact(u, key)
            elif self._eager:
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
            if self._span is not None:
                self._exact(u, key)
            else:
                self._stencil(u, key)
        return (*self._values[key], *self._gradients[key])

    def _exact(self, u: np.ndarray, key: bytes) -> None:
        """Evaluate u with its exact Jacobian (one point, one simulation)."""
        f, c, df, dc = self._request(self._to_physical(u[None, :]))
        self.evaluations += 1
        self._values[key] = (float(f[0]), c[0].copy())
        self._points[key] = u.copy()
        self._gradients[key] = (df[0] * self._span, dc[0] * self._span)

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


class _StoppedError(Exception):
    """The runs were stopped by a Ctrl-C in the thread waiting for them (caught in the run)."""


class _History:
    """``evaluate`` recording one :class:`IterationRecord` per batched request: the lowest
    objective among the points so far within ``tolerance`` of feasibility (NaN before the first),
    the batch's lowest and mean objective."""

    def __init__(self, evaluate: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                 lower: np.ndarray, upper: np.ndarray, tolerance: float) -> None:
        self._evaluate = evaluate
        self._lower, self._upper, self._tolerance = lower, upper, tolerance
        self._clock = time.perf_counter()
        self._best = np.inf
        self.records: list[IterationRecord] = []

    def __call__(self, X: np.ndarray) -> tuple[np.ndarray, ...]:
        found = self._evaluate(X)
        f, c = found[0], found[1]
        ok = violation(c, self._lower, self._upper) <= self._tolerance
        if ok.any():
            self._best = min(self._best, float(f[ok].min()))
        nfev = (self.records[-1].nfev if self.records else 0) + len(f)
        self.records.append(IterationRecord(
            iteration=len(self.records) + 1, nfev=nfev,
            best=self._best if np.isfinite(self._best) else float("nan"),
            batch_best=float(f.min()), batch_mean=float(f.mean()),
            elapsed_s=time.perf_counter() - self._clock,
        ))
        return found


class Normaliser:
    """Maps normalised u ∈ [0, 1]ⁿ to physical x and back."""

    def __init__(self, lower: np.ndarray, upper: np.ndarray):
        self.lower = np.asarray(lower, float)
        self.span = np.asarray(upper, float) - self.lower

    def physical(self, u: np.ndarray) -> np.ndarray:
        """Physical x (…, n) of normalised u (…, n)."""
        return self.lower + np.asarray(u) * self.span

    def normalised(self, x: np.ndarray) -> np.ndarray:
        """Normalised u (…, n) of physical x (…, n)."""
        return (np.asarray(x) - self.lower) / self.span


def starting_points(
    problem: ConstrainedProblem,
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
    problem: ConstrainedProblem,
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


class ShiftedProblem(ConstrainedProblem):
    """``inner`` with constant offsets added to its objective and constraint values.

    The defect correction of :func:`solve_corrected`: a cheap (coarse) problem shifted by what
    an accurate (fine) one differs from it at the current design.
    """

    def __init__(self, inner: ConstrainedProblem, objective_offset: float,
                 constraint_offset: np.ndarray):
        super().__init__(
            inner.lower, inner.upper, inner.names,
            constraint_lower=inner.constraint_lower, constraint_upper=inner.constraint_upper,
            constraint_names=inner.constraint_names, constraint_units=inner.constraint_units,
            constraint_scale=inner.constraint_scale,
        )
        self.inner = inner
        self.objective_offset = float(objective_offset)
        self.constraint_offset = np.asarray(constraint_offset, float)

    def _evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The inner objective (B,) and constraints (B, m), shifted by the offsets."""
        f, c = self.inner.evaluate(X)
        return f + self.objective_offset, c + self.constraint_offset

    @property
    def has_jacobian(self) -> bool:
        """Exact derivatives when the inner problem has them (the offsets are constant)."""
        return self.inner.has_jacobian

    def _evaluate_jacobian(
        self, X: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The inner values shifted by the offsets, and the inner derivatives."""
        f, c, df, dc = self.inner.evaluate_jacobian(X)
        return f + self.objective_offset, c + self.constraint_offset, df, dc


def solve_corrected(
    coarse: ConstrainedProblem,
    fine: ConstrainedProblem,
    x0: np.ndarray,
    tolerance: float = 1e-8,
    defect_tolerance: np.ndarray | None = None,
    max_corrections: int = 4,
    feasibility_tolerance: float = 1e-6,
    gradients: Literal["auto", "exact", "finite-difference"] = "finite-difference",
) -> tuple[OptimisationResult, int]:
    """Solve ``fine`` through ``coarse`` by defect correction, from x0 (n,).

    Each round evaluates the fine problem at the current design (one batch of one design),
    shifts the coarse problem by the difference (:class:`ShiftedProblem`) and re-solves it with
    SLSQP from there (cheap coarse batches). Stops when the coarse problem, shifted by the
    previous defect, predicts the fine constraint values within ``defect_tolerance`` (m,) (in
    the constraints' units; default 1e-3 of each constraint scale) at the new design, i.e. the
    defect no longer changes where it matters. The discretisation error varies slowly over the
    design space, so one or two rounds do. Returns the last SLSQP outcome, re-evaluated on the
    fine problem, and the number of fine evaluations. ``gradients``: as in
    :func:`solve_multistart`.
    """
    clock = time.perf_counter()
    x = x_start = np.asarray(x0, float)
    scale = fine.constraint_scale
    limit = 1e-3 * scale if defect_tolerance is None else np.asarray(defect_tolerance, float)
    f_fine, c_fine = fine.evaluate(x[None])
    start_values = (f_fine, c_fine)
    f_coarse, c_coarse = coarse.evaluate(x[None])
    fine_evaluations = 1
    runs: list[LocalRun] = []
    history: list[IterationRecord] = []
    outcome: OptimisationResult | None = None
    evaluations = iterations = batches = jacobians = 0
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
            gradients=gradients,
        )
        evaluations += outcome.nfev
        iterations += outcome.nit
        batches += outcome.nbatch
        jacobians += outcome.njev
        runs += outcome.runs
        history += continued(history, outcome.history)
        x = outcome.x
        f_fine, c_fine = fine.evaluate(x[None])
        fine_evaluations += 1
        predicted = outcome.constraints  # the shifted coarse values at x
        if np.all(np.abs(c_fine[0] - predicted) <= limit):
            break
        f_coarse, c_coarse = [outcome.fun - shift_f], [outcome.constraints - shift_c]
    assert outcome is not None  # max_corrections ≥ 1
    worst = float(violation(c_fine[0], fine.constraint_lower, fine.constraint_upper))
    start_worst = float(violation(start_values[1][0], fine.constraint_lower, fine.constraint_upper))
    fallback = worst > max(start_worst, feasibility_tolerance)
    if fallback:  # the corrections lost feasibility the start had on the fine problem: keep it
        x, (f_fine, c_fine), worst = x_start, start_values, start_worst
    ok = worst <= feasibility_tolerance
    result = OptimisationResult(
        x=x,
        fun=float(f_fine[0]),
        nfev=evaluations + fine_evaluations,
        nit=iterations,
        status=FEASIBLE if ok else INFEASIBLE,
        algorithm="slsqp (defect-corrected)",
        elapsed_s=time.perf_counter() - clock,
        history=history,
        njev=jacobians,
        nbatch=batches + fine_evaluations,
        constraints=c_fine[0],
        constraint_names=tuple(fine.constraint_names),
        maxcv=worst,
        runs=runs,
        detail=f"defect correction: {fine_evaluations} fine evaluation(s)"
        + ("; kept the start (the corrections lost feasibility)" if fallback else ""),
    )
    return result, fine_evaluations


def continued(
    history: list[IterationRecord], more: list[IterationRecord]
) -> list[IterationRecord]:
    """The records ``more`` of a later stage, renumbered to follow ``history`` (iterations and
    evaluation counts; the best so far carried over)."""
    if not history:
        return list(more)
    last = history[-1]
    return [
        IterationRecord(
            iteration=last.iteration + r.iteration, nfev=last.nfev + r.nfev,
            best=float(np.fmin(last.best, r.best)), batch_best=r.batch_best,
            batch_mean=r.batch_mean, elapsed_s=last.elapsed_s + r.elapsed_s,
        )
        for r in more
    ]


def solve_multistart(
    problem: ConstrainedProblem,
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
    gradients: Literal["auto", "exact", "finite-difference"] = "finite-difference",
) -> OptimisationResult:
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
    ``gradients``: "exact" takes objective, constraints and their Jacobians from the problem's
    :meth:`~bemore.optimize.ConstrainedProblem.evaluate_jacobian` (one evaluation per point,
    no stencil; ``fd_step`` and ``eager`` unused); "finite-difference" uses the forward
    stencils (default: faster in wall time today, docs/synthesis.md "Gradients"); "auto" is
    "exact" when the problem has exact derivatives, else "finite-difference".
    """
    if gradients not in ("auto", "exact", "finite-difference"):
        raise OptimisationError(
            f"gradients {gradients!r} (allowed: auto, exact, finite-difference)")
    exact = gradients == "exact" or (gradients == "auto" and problem.has_jacobian)
    if exact and not problem.has_jacobian:
        raise OptimisationError(
            f"exact gradients are not available for this problem ({type(problem).__name__}: "
            "free midpoints or a remote evaluator); use gradients = \"finite-difference\"")

    clock = time.perf_counter()
    normaliser = Normaliser(problem.lower, problem.upper)
    lower_c, upper_c = problem.constraint_lower, problem.constraint_upper
    u_starts = np.clip(normaliser.normalised(np.atleast_2d(starts)), 0.0, 1.0)
    n_runs = len(u_starts)
    scaling = 0  # evaluations spent on the objective's scale
    if objective_scale is None:
        f0, _ = problem.evaluate(normaliser.physical(u_starts[:1]))
        objective_scale = max(abs(float(f0[0])), 1e-12)
        scaling = 1
    history = _History(problem.evaluate_jacobian if exact else problem.evaluate, lower_c,
                       upper_c, feasibility_tolerance)
    batcher = _LockstepBatcher(history, n_runs if lockstep else 1)
    records: list[LocalRun | None] = [None] * n_runs
    # Constraints as the optimiser sees them: divided by the problem's scales (so that
    # degrees of rotation and seconds have comparable sizes).
    scale = problem.constraint_scale
    low, up = lower_c / scale, upper_c / scale
    box = (np.zeros(problem.lower.size), np.ones(problem.lower.size))  # u's bounds
    caches = [
        _StencilCache(
            lambda X, ticket=index: batcher.request(ticket, X),
            normaliser.physical,
            fd_step,
            eager,
            budget,
            normaliser.span if exact else None,
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
            records[index] = LocalRun(
                x0=normaliser.physical(u_starts[index]).tolist(),
                x=normaliser.physical(u).tolist(),
                fun=f_end,
                maxcv=float(violation(c_end, lower_c, upper_c)),
                nit=iterations[0],
                nfev=cache.evaluations,
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
        except _StoppedError:
            pass  # Ctrl-C: the waiting thread raises it once every run has ended
        finally:
            batcher.finished()

    with warnings.catch_warnings():
        # trust-constr's BFGS warns on the linear constraint rows (exact zero curvature).
        warnings.filterwarnings("ignore", message="delta_grad == 0.0")
        if lockstep and n_runs > 1:
            threads = [threading.Thread(target=run, args=(index,)) for index in range(n_runs)]
            try:
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            except KeyboardInterrupt:
                # The runs end at their next request (the engine's batch under way finishes):
                # none is left running, to fail on the engine's pool as the process exits.
                batcher.stop()
                for thread in threads:
                    if thread.ident is not None:  # started
                        thread.join()
                raise
        else:
            for index in range(n_runs):
                run(index)
    if any(record is None for record in records):
        raise OptimisationError(f"{method}: a local run stopped without a result")
    result = best_outcome(
        problem,
        [r for r in records if r is not None],
        method,
        feasibility_tolerance,
        batcher.batches,
        time.perf_counter() - clock,
        reevaluate,
        history=history.records,
        njev=sum(cache.jacobians for cache in caches),
    )
    result.nfev += scaling
    result.nbatch += scaling
    return result


def _local(
    method: str,
    cache: _StencilCache,
    u0: np.ndarray,
    box: tuple[np.ndarray, np.ndarray],
    scale: np.ndarray,
    low: np.ndarray,
    up: np.ndarray,
    objective_scale: float,
    tolerance: float,
    max_iterations: int,
    callback: Callable[..., None],
) -> Any:
    """One local run of SLSQP or trust-constr from u0 on the cached, scaled problem, in the
    box ``box`` = (lower, upper) of u."""

    def fun(u: np.ndarray) -> float:
        return cache.values(u)[0] / objective_scale

    def grad(u: np.ndarray) -> np.ndarray:
        return cache.get(u)[2] / objective_scale

    if method == "slsqp":
        return minimize_slsqp(
            fun,
            u0,
            grad,
            *box,
            lambda u: constraint_form(cache.values(u)[1] / scale, low, up, "scipy"),
            lambda u: _jacobian_form(cache.get(u)[3] / scale[:, None], low, up),
            ftol=tolerance,
            maxiter=max_iterations,
            callback=callback,
        )
    from scipy.optimize import BFGS, Bounds, NonlinearConstraint, minimize

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
        bounds=Bounds(*box),
        constraints=[nonlinear],
        options={"gtol": tolerance, "xtol": tolerance, "maxiter": 10 * max_iterations},
        callback=callback,
    )


def _restore(
    cache: _StencilCache,
    u0: np.ndarray,
    box: tuple[np.ndarray, np.ndarray],
    scale: np.ndarray,
    low: np.ndarray,
    up: np.ndarray,
    max_iterations: int,
    callback: Callable[..., None],
) -> np.ndarray:
    """Phase 1: minimise Σ min(0, margin)² over the box = (lower, upper) from u0; returns its
    end."""

    def squared(u: np.ndarray) -> float:
        margins = constraint_form(cache.values(u)[1] / scale, low, up, "scipy")
        return float(np.sum(np.minimum(margins, 0.0) ** 2))

    def gradient(u: np.ndarray) -> np.ndarray:
        _, c, _, jac = cache.get(u)
        margins = constraint_form(c / scale, low, up, "scipy")
        return 2.0 * np.minimum(margins, 0.0) @ _jacobian_form(jac / scale[:, None], low, up)

    result = minimize_slsqp(squared, u0, gradient, *box, ftol=1e-14, maxiter=max_iterations,
                            callback=callback)
    return np.clip(result.x, 0.0, 1.0)


def _jacobian_form(jac: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Jacobian rows matching :func:`constraint_form` (``"scipy"``) for a (m, n) Jacobian."""
    return np.concatenate([jac[np.isfinite(lower)], -jac[np.isfinite(upper)]], axis=0)


def best_outcome(
    problem: ConstrainedProblem,
    records: list[LocalRun],
    method: str,
    feasibility_tolerance: float,
    batches: int,
    elapsed_s: float,
    reevaluate: bool = True,
    history: list[IterationRecord] | None = None,
    njev: int = 0,
) -> OptimisationResult:
    """Lowest objective among feasible ends, else the least-violating end.

    With ``reevaluate`` the chosen design is evaluated once more; without, its recorded values
    are used (they are evaluations at exactly that point, cached by the point).
    """
    feasible = [r for r in records if r.maxcv <= feasibility_tolerance]
    best = (
        min(feasible, key=lambda r: r.fun)
        if feasible
        else min(records, key=lambda r: r.maxcv)
    )
    x = np.array(best.x)
    if reevaluate:
        # Re-evaluate the reported best instead of trusting the bookkeeping (pyswarms #505).
        f, c = problem.evaluate(x[None])
        f0, c0 = float(f[0]), c[0]
    else:
        f0, c0 = best.fun, np.asarray(best.constraints, float)
    worst = float(violation(c0, problem.constraint_lower, problem.constraint_upper))
    ok = worst <= feasibility_tolerance
    return OptimisationResult(
        x=x,
        fun=f0,
        nfev=sum(r.nfev for r in records) + int(reevaluate),
        nit=sum(r.nit for r in records),
        status=FEASIBLE if ok else INFEASIBLE,
        algorithm=method,
        elapsed_s=elapsed_s,
        history=list(history or []),
        njev=njev,
        nbatch=batches + int(reevaluate),
        constraints=c0,
        constraint_names=tuple(problem.constraint_names),
        maxcv=worst,
        runs=records,
        detail=f"best of {len(records)} start(s), {len(feasible)} ended feasible",
    )
