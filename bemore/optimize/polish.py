"""Local least-squares polish on stacked residuals: trust-region reflective (scipy's algorithm,
:mod:`bemore.optimize.trf`) for its first steps, then a bounded Levenberg–Marquardt
(:mod:`bemore.optimize.lm`).

Follows any global run. The cost is ``Σ r²`` (the same f1 as the global run: for the
identification, r stacks the simulated − measured joint-centre coordinates, so Σ r² is the sum of
squared distances). The Jacobian is either given (``jacobian``: e.g. the identification's exact
sensitivities, computed with the simulation) or a finite difference whose 2·d (central) or
d + 1 (forward) points are evaluated as ONE batch call of the residual function, like a
population.

:func:`polish_many` runs several starts in lock step: each start's iterations run in a
thread of their own, and the residual requests of all the starts still running are merged into
one batch call (:class:`LockStep`). When the residual of a point does not depend on the batch it
is in (the engine's members are simulated independently), every start takes exactly the steps
it takes alone, and reaches the same point bit for bit, in fewer, larger calls. A round in which
some starts try a step (residuals) while others accepted one (a Jacobian) is answered by one
call of ``both`` when given (the identification's shares its spring equilibria).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bemore.errors import OptimisationError
from bemore.optimize.result import IterationRecord, OptimisationResult

BatchResiduals = Callable[[np.ndarray], np.ndarray]
"""``residuals(X (N, d)) -> (N, m)``: residual vectors of N points in one call."""
BatchJacobian = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``jacobian(X (N, d)) -> (residuals (N, m), Jacobians (N, m, d))`` of N points in one call
(e.g. exact sensitivities computed with the simulation)."""
BatchBoth = Callable[[np.ndarray, np.ndarray],
                     tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]]
"""``both(X (N, d), Y (K, d)) -> (residuals (N, m), (residuals (K, m), Jacobians (K, m, d)))``:
what ``residuals(X)`` and ``jacobian(Y)`` give, in one call (e.g. the work the two share, such
as the identification's spring equilibria, done once for both)."""


@dataclass
class LocalFit:
    """Outcome of the polish: the result, and the residuals and Jacobian at its best point."""

    result: OptimisationResult
    residuals: np.ndarray
    jacobian: np.ndarray


def finite_difference_jacobian(
    residuals: BatchResiduals,
    x: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    step: float = 1e-4,
    scheme: str = "central",
) -> tuple[np.ndarray, np.ndarray, int]:
    """Jacobian (m, d) of ``residuals`` at ``x`` from one batch call; also r(x) and the points used.

    Central: x and ``x ± step·e_k`` (2·d + 1 points; the step is shortened at a bound); forward:
    ``x + step·e_k`` (flipped to ``−step`` at the upper bound) and x (d + 1 points). ``step`` is in
    the units of x (here the normalised [0, 1] box).
    """
    if scheme not in ("central", "forward"):
        raise OptimisationError(
            f"finite differences: scheme {scheme!r} (allowed: central, forward)"
        )
    x = np.asarray(x, dtype=float)
    d = x.size
    eye = np.eye(d)
    if scheme == "central":
        high = np.minimum(x + step, upper)
        low = np.maximum(x - step, lower)
        points = np.vstack([x[None, :], x + eye * (high - x), x - eye * (x - low)])
        values = residuals(points)
        J = (values[1 : d + 1] - values[d + 1 :]).T / (high - low)
    else:
        signed = np.where(x + step <= upper, step, -step)
        points = np.vstack([x[None, :], x + eye * signed])
        values = residuals(points)
        J = (values[1:] - values[0]).T / signed
    return J, values[0], points.shape[0]


def polish(
    residuals: BatchResiduals,
    x0: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    max_iterations: int = 30,
    step: float = 1e-4,
    scheme: str = "central",
    jacobian: BatchJacobian | None = None,
    method: str = "trf-lm",
) -> LocalFit:
    """Minimise ``Σ r(x)²`` from ``x0`` within [lower, upper]: ``method`` "trf-lm" (default,
    :func:`bemore.optimize.lm.trf_then_lm_bounds`: trust-region reflective for its first 8
    residual evaluations, then Levenberg–Marquardt), "lm" (:func:`bemore.optimize.lm.lm_bounds`
    alone: Levenberg–Marquardt with projected steps) or "trf"
    (:func:`bemore.optimize.trf.trf_bounds`: scipy's trust-region reflective, its step from a QR).

    ``max_iterations`` bounds the solver's residual evaluations (each Jacobian is one more batch
    of 2·d or d + 1 points, or one call of ``jacobian`` when given: counted as one point in
    ``nfev``, and in ``options["jacobians"]``). Ctrl-C stops cleanly with the best point
    evaluated so far (status 1).
    """
    # Imported here: the solvers load scipy's LAPACK (bemore.optimize.lapack), start-up that a
    # run without --polish skips.
    if method == "trf-lm":
        from bemore.optimize.lm import trf_then_lm_bounds as solver
    elif method == "lm":
        from bemore.optimize.lm import lm_bounds as solver
    elif method == "trf":
        from bemore.optimize.trf import trf_bounds as solver
    else:
        raise OptimisationError(f"polish: method {method!r} (allowed: trf-lm, lm, trf)")

    start = time.perf_counter()
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    x0 = np.clip(np.asarray(x0, dtype=float), lower, upper)
    counts = {"points": 0, "jacobians": 0}
    best = {"x": x0.copy(), "cost": np.inf}
    history: list[IterationRecord] = []
    last: dict = {"x": None, "J": None, "r": None}  # the latest Jacobian, its point and r

    def remember(x: np.ndarray, r: np.ndarray) -> None:
        cost = float(r @ r)
        if cost < best["cost"]:
            best.update(x=x.copy(), cost=cost)

    def fun(x: np.ndarray) -> np.ndarray:
        r = residuals(x[None, :])[0]
        counts["points"] += 1
        remember(x, r)
        history.append(
            IterationRecord(
                iteration=len(history) + 1,
                nfev=counts["points"],
                best=best["cost"],
                batch_best=float(r @ r),
                batch_mean=float(r @ r),
                elapsed_s=time.perf_counter() - start,
            )
        )
        return r

    def jacobian_at(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        counts["jacobians"] += 1
        if jacobian is None:
            return finite_difference_jacobian(residuals, x, lower, upper, step, scheme)
        r, J = jacobian(x[None, :])
        return J[0], r[0], 1

    def jac(x: np.ndarray) -> np.ndarray:
        J, r, n_points = jacobian_at(x)
        counts["points"] += n_points
        remember(x, r)
        last.update(x=np.array(x, dtype=float), J=J, r=r)
        return J

    status = 3
    try:
        fit = solver(fun, jac, x0, lower, upper, max_nfev=max_iterations)
        if fit.status == 0:
            status = 4
    except KeyboardInterrupt:
        status = 1
    if last["x"] is not None and np.array_equal(last["x"], best["x"]):
        # The solver's last Jacobian is at its final point, usually the best one: the same batch.
        J, r = last["J"], last["r"]
    else:
        J, r, n_points = jacobian_at(best["x"])
        counts["points"] += n_points
    result = OptimisationResult(
        x=best["x"],
        fun=float(r @ r),
        nfev=counts["points"],
        njev=counts["jacobians"],
        nit=len(history),
        status=status,
        algorithm="least_squares",
        elapsed_s=time.perf_counter() - start,
        history=history,
        options={"method": method, "max_iterations": max_iterations, "step": step,
                 "scheme": scheme if jacobian is None else "given",
                 "jacobians": counts["jacobians"]},
    )
    return LocalFit(result=result, residuals=r, jacobian=J)


class LockStep:
    """Merges the residual requests of ``count`` polishes, each in its own thread, into one
    batch call of ``residuals``: a request waits until every polish still running has made one,
    then all are answered from one call. A polish that ends says so with :meth:`finish`.

    :meth:`interrupt` (Ctrl-C in the main thread) makes every polish's next request raise
    KeyboardInterrupt once, so each stops at its best point as it would alone; later requests
    (the final Jacobian) are then answered one by one.

    ``both``: when a round has both residual and Jacobian requests, one call of it answers them
    all (:data:`BatchBoth`; it must give what the two functions give), instead of one call of
    each.
    """

    def __init__(self, residuals: BatchResiduals, count: int,
                 jacobian: BatchJacobian | None = None, both: BatchBoth | None = None) -> None:
        self._residuals = residuals
        self._jacobian = jacobian
        self._both = both
        self._active = count
        self._pending: list[dict] = []
        self._condition = threading.Condition()
        self._interrupted = False
        self._told: set[int] = set()
        self.calls = 0  # batch calls made

    def __call__(self, X: np.ndarray) -> np.ndarray:
        """Residuals (N, m) of X (N, d), computed within the next merged batch call."""
        return self._request("residuals", X)

    def jacobian(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Residuals (N, m) and Jacobians (N, m, d) of X (N, d) from the ``jacobian`` function,
        computed within the next merged call of it."""
        return self._request("jacobian", X)

    def _request(self, kind: str, X: np.ndarray):
        function = self._residuals if kind == "residuals" else self._jacobian
        with self._condition:
            if self._interrupted:
                thread = threading.get_ident()
                if thread not in self._told:
                    self._told.add(thread)
                    raise KeyboardInterrupt
                self.calls += 1
                return function(X)
            request = {"X": np.atleast_2d(X), "value": None, "error": None, "done": False,
                       "thread": threading.get_ident(), "kind": kind}
            self._pending.append(request)
            self._run_if_complete()
            while not request["done"]:
                self._condition.wait()
            if request["error"] is not None:
                raise request["error"]
            return request["value"]

    def finish(self) -> None:
        """One polish has ended: the others no longer wait for its requests."""
        with self._condition:
            self._active -= 1
            self._run_if_complete()

    @property
    def interrupted(self) -> bool:
        """True once :meth:`interrupt` was called."""
        return self._interrupted

    def interrupt(self) -> None:
        """Ctrl-C: answer the waiting requests with KeyboardInterrupt (see the class)."""
        with self._condition:
            self._interrupted = True
            for request in self._pending:
                request.update(error=KeyboardInterrupt(), done=True)
                self._told.add(request["thread"])
            self._pending = []
            self._condition.notify_all()

    def _run_if_complete(self) -> None:
        """With the lock held: make the merged call once every running polish has asked."""
        if not self._pending or len(self._pending) < self._active:
            return
        pending, self._pending = self._pending, []
        # The call runs without the lock (every running polish is waiting for it), so that
        # Ctrl-C's :meth:`interrupt` is not held up by it. One call per kind of request, or
        # one call of ``both`` for a round with both kinds.
        self._condition.release()
        try:
            groups = {kind: [request for request in pending if request["kind"] == kind]
                      for kind in ("residuals", "jacobian")}
            if self._both is not None and all(groups.values()):
                self._answer_both(groups["residuals"], groups["jacobian"])
            else:
                for kind, group in groups.items():
                    if group:
                        self._answer(kind, group)
        finally:
            self._condition.acquire()
        self._condition.notify_all()

    def _answer(self, kind: str, group: list[dict]) -> None:
        """Make one call of ``kind`` for the requests ``group`` (without the lock) and hand
        each its part (or the call's error)."""
        function = self._residuals if kind == "residuals" else self._jacobian
        try:
            values = function(_stacked(group))
        except BaseException as error:  # handed to every waiting polish
            values = error
        with self._condition:
            self.calls += 1
            _hand(kind, group, values)

    def _answer_both(self, residual_group: list[dict], jacobian_group: list[dict]) -> None:
        """One call of ``both`` for a round's residual and Jacobian requests (without the
        lock); each request gets its part (or the call's error)."""
        try:
            residuals, jacobians = self._both(_stacked(residual_group),
                                              _stacked(jacobian_group))
        except BaseException as error:  # handed to every waiting polish
            residuals = jacobians = error
        with self._condition:
            self.calls += 1
            _hand("residuals", residual_group, residuals)
            _hand("jacobian", jacobian_group, jacobians)


def _stacked(group: list[dict]) -> np.ndarray:
    """The points (N, d) of the requests ``group``, in order."""
    return np.vstack([request["X"] for request in group])


def _hand(kind: str, group: list[dict], values: Any) -> None:
    """Give each request of ``group`` its rows of ``values`` (residuals (N, m), or residuals and
    Jacobians for ``kind`` "jacobian"), or the call's error; with the lock step's lock held."""
    if isinstance(values, BaseException):
        for request in group:
            request.update(error=values, done=True)
        return
    cuts = np.cumsum([request["X"].shape[0] for request in group])[:-1]
    parts = (np.split(values, cuts) if kind == "residuals" else
             list(zip(np.split(values[0], cuts), np.split(values[1], cuts), strict=True)))
    for request, part in zip(group, parts, strict=True):
        request.update(value=part, done=True)


def polish_many(
    residuals: BatchResiduals,
    starts: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    max_iterations: int = 30,
    step: float = 1e-4,
    scheme: str = "central",
    jacobian: BatchJacobian | None = None,
    method: str = "trf-lm",
    both: BatchBoth | None = None,
) -> list[LocalFit]:
    """:func:`polish` (with ``method``) from each row of ``starts`` (k, d), in lock step (module
    docstring). ``both``: residuals and Jacobians of one round in one call (:class:`LockStep`;
    with ``jacobian`` only).

    Returns the k fits in the order of ``starts``; each is the fit :func:`polish` gives from
    that start alone when a point's residuals do not depend on its batch. Ctrl-C stops every
    start at its best point (status 1). An error of ``residuals`` is raised here.
    """
    starts = np.atleast_2d(np.asarray(starts, dtype=float))
    lock_step = LockStep(residuals, starts.shape[0], jacobian,
                         both if jacobian is not None else None)
    fits: list[LocalFit | None] = [None] * starts.shape[0]
    errors: list[BaseException] = []

    began = [threading.Event() for _ in range(starts.shape[0])]
    ended = [threading.Event() for _ in range(starts.shape[0])]

    def run(index: int) -> None:
        began[index].set()
        try:
            fits[index] = polish(lock_step, starts[index], lower, upper, max_iterations,
                                 step, scheme, lock_step.jacobian if jacobian else None,
                                 method)
        except BaseException as error:  # re-raised in the calling thread
            errors.append(error)
        finally:
            lock_step.finish()
            ended[index].set()

    # Ctrl-C reaches this (the main) thread wherever it waits: each wait below catches it and
    # interrupts the lock step. The waits are on events of our own: a Thread.join interrupted
    # by KeyboardInterrupt can report a running thread as ended.
    for index in range(starts.shape[0]):
        thread = threading.Thread(target=run, args=(index,), name=f"polish-{index}", daemon=True)
        try:
            thread.start()
        except KeyboardInterrupt:
            lock_step.interrupt()
            if not _wait(began[index], 1.0, lock_step):
                # Interrupted before the thread existed: it makes no requests.
                lock_step.finish()
                ended[index].set()
    for event in ended:
        while not _wait(event, 0.1, lock_step):
            pass
    if errors:
        raise errors[0]
    done = [fit for fit in fits if fit is not None]
    if lock_step.interrupted:
        # A Ctrl-C after a start's last request finds nothing left to stop in it: it ended at
        # its own end point, and is reported stopped (status 1) so the Ctrl-C is not lost.
        for fit in done:
            fit.result.status = 1
    return done


def _wait(event: threading.Event, timeout_s: float, lock_step: LockStep) -> bool:
    """``event.wait(timeout_s)``; a Ctrl-C meanwhile interrupts ``lock_step`` (returns False)."""
    try:
        return event.wait(timeout_s)
    except KeyboardInterrupt:
        lock_step.interrupt()
        return False


DISTINCT_RADIUS = 0.35
"""Default :func:`distinct_starts` radius: RMS over the coordinates of the difference, in box
widths. On the bundled sample the run's best points within 0.05–0.15 all polish into the basin
of its α; 0.2 reaches the other basin's points; on trunk-side trials whose whole pack ended in
the trunk parameters' other basin, the 4th and 5th points at 0.35 reach the lower one
(docs/identify.md, "Several polish starts")."""


def distinct_starts(
    X: np.ndarray,
    F: np.ndarray,
    count: int,
    lower: np.ndarray,
    upper: np.ndarray,
    radius: float = DISTINCT_RADIUS,
) -> np.ndarray:
    """Indices of up to ``count`` evaluated points to polish from, best cost first.

    ``X`` (N, d) are points a global run evaluated and ``F`` (N,) their costs. The best point is
    always first; each next one is the best point whose distance to every point already taken
    exceeds ``radius``, the distance being the RMS over coordinates of the difference in box
    widths (0 … 1). Fewer than ``count`` come back when the run saw no more distinct points.
    """
    if count < 1:
        raise OptimisationError(f"polish starts = {count}: must be at least 1")
    X = np.atleast_2d(np.asarray(X, dtype=float))
    F = np.asarray(F, dtype=float).reshape(-1)
    if X.shape[0] != F.size or X.shape[0] == 0:
        raise OptimisationError(
            f"polish starts: {X.shape[0]} points and {F.size} costs (need the same, ≥ 1)"
        )
    scaled = (X - lower) / (np.asarray(upper, dtype=float) - lower)
    # Stable sort: among equal costs the earliest evaluated point wins (reproducible picks).
    order = np.argsort(F, kind="stable")
    taken = [int(order[0])]
    nearest = np.sqrt(np.mean((scaled - scaled[order[0]]) ** 2, axis=1))
    for index in order[1:]:
        if len(taken) == count:
            break
        if nearest[index] > radius:
            taken.append(int(index))
            distance = np.sqrt(np.mean((scaled - scaled[index]) ** 2, axis=1))
            nearest = np.minimum(nearest, distance)
    return np.array(taken, dtype=int)
