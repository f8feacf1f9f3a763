"""bemore's SLSQP loop against scipy.optimize.minimize(method="SLSQP"): the same calls at the same
points, bit for bit, and the same end."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import Bounds, minimize

from bemore.optimize import slsqp


class Recorder:
    """A constrained test problem that records every point each function is called at."""

    def __init__(self, constrained: bool = True, incompatible: bool = False) -> None:
        self.calls: list[tuple[str, bytes]] = []
        self.constrained = constrained
        self.incompatible = incompatible

    def _log(self, name: str, x: np.ndarray) -> np.ndarray:
        self.calls.append((name, np.asarray(x, float).tobytes()))
        return np.asarray(x, float)

    def fun(self, x: np.ndarray) -> float:
        x = self._log("f", x)
        return float(100.0 * (x[1] - x[0] ** 2) ** 2 + (1.0 - x[0]) ** 2 + 0.5 * x[2] ** 2)

    def grad(self, x: np.ndarray) -> np.ndarray:
        x = self._log("g", x)
        return np.array([-400.0 * x[0] * (x[1] - x[0] ** 2) - 2.0 * (1.0 - x[0]),
                         200.0 * (x[1] - x[0] ** 2), x[2]])

    def con(self, x: np.ndarray) -> np.ndarray:
        x = self._log("c", x)
        values = [1.5 - x[0] ** 2 - x[1] ** 2, x[0] + x[2] - 0.2]
        if self.incompatible:
            values += [x[0] - 3.0, -x[0] - 3.0]  # x0 ≥ 3 and x0 ≤ -3
        return np.array(values)

    def con_jac(self, x: np.ndarray) -> np.ndarray:
        x = self._log("a", x)
        rows = [[-2.0 * x[0], -2.0 * x[1], 0.0], [1.0, 0.0, 1.0]]
        if self.incompatible:
            rows += [[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]]
        return np.array(rows)


def _both(x0, lower, upper, constrained=True, incompatible=False, ftol=1e-9, maxiter=100):
    """(bemore's result, its calls, its iterations seen by the callback) and scipy's."""
    runs = []
    for which in ("bemore", "scipy"):
        problem = Recorder(constrained, incompatible)
        seen: list[bytes] = []
        callback = lambda x, seen=seen: seen.append(np.asarray(x).tobytes())  # noqa: E731
        if which == "bemore":
            result = slsqp.minimize_slsqp(
                problem.fun, np.array(x0, float), problem.grad, np.array(lower, float),
                np.array(upper, float), problem.con if constrained else None,
                problem.con_jac if constrained else None, ftol=ftol, maxiter=maxiter,
                callback=callback)
        else:
            result = minimize(
                problem.fun, np.array(x0, float), jac=problem.grad, method="SLSQP",
                bounds=Bounds(np.array(lower, float), np.array(upper, float)),
                constraints=([{"type": "ineq", "fun": problem.con, "jac": problem.con_jac}]
                             if constrained else []),
                options={"ftol": ftol, "maxiter": maxiter}, callback=callback)
        runs.append((result, problem.calls, seen))
    return runs


def _assert_same(runs) -> None:
    (ours, our_calls, our_seen), (theirs, their_calls, their_seen) = runs
    assert our_calls == their_calls  # same functions, same order, same points to the bit
    assert our_seen == their_seen
    assert ours.x.tobytes() == np.asarray(theirs.x, float).tobytes()
    assert ours.fun == theirs.fun
    assert (ours.nit, ours.status, ours.message, ours.success) == (
        theirs.nit, theirs.status, theirs.message, theirs.success)


def test_the_compiled_loop_is_used_with_this_scipy():
    assert slsqp.compiled_slsqp() is not None, (
        "the installed scipy is not one the compiled SLSQP loop was checked against "
        f"({slsqp.CHECKED_SCIPY}): check this file's comparisons with it, then add it")


@pytest.mark.parametrize("x0", [[-1.2, 1.0, 0.7], [0.1, 0.1, 0.1], [0.9, -0.4, -1.0],
                                [3.0, 3.0, 3.0]])  # the last outside the box: clipped
def test_constrained_runs_match_scipy_point_for_point(x0):
    runs = _both(x0, [-2.0, -2.0, -2.0], [2.0, 2.0, 2.0])
    _assert_same(runs)
    assert runs[0][0].success and len(runs[0][1]) > 20  # a real run, many calls


def test_unconstrained_run_matches_scipy():  # the restoration phase's form (no constraints)
    runs = _both([-1.2, 1.0, 0.7], [-2.0, -2.0, -2.0], [2.0, 2.0, 2.0], constrained=False,
                 ftol=1e-14)
    _assert_same(runs)
    assert np.allclose(runs[0][0].x, [1.0, 1.0, 0.0], atol=1e-5)


def test_iteration_limit_and_incompatible_constraints_match_scipy():
    limited = _both([-1.2, 1.0, 0.7], [-2.0] * 3, [2.0] * 3, maxiter=3)
    _assert_same(limited)
    assert limited[0][0].status == 9 and limited[0][0].nit == 3
    incompatible = _both([0.5, 0.5, 0.5], [-5.0] * 3, [5.0] * 3, incompatible=True)
    _assert_same(incompatible)
    assert not incompatible[0][0].success


def test_without_the_compiled_loop_scipy_runs_it(monkeypatch):
    direct = _both([-1.2, 1.0, 0.7], [-2.0] * 3, [2.0] * 3)[0]
    monkeypatch.setattr(slsqp, "compiled_slsqp", lambda: None)
    fallback = _both([-1.2, 1.0, 0.7], [-2.0] * 3, [2.0] * 3)[0]
    assert direct[1] == fallback[1]
    assert direct[0].x.tobytes() == fallback[0].x.tobytes()


def test_scipy_optimize_is_not_imported_and_still_works_after():
    code = (
        "import sys, numpy as np\n"
        "from bemore.optimize.slsqp import minimize_slsqp\n"
        "r = minimize_slsqp(lambda x: float(x @ x), np.array([0.9, 0.8]), lambda x: 2 * x,\n"
        "                   -np.ones(2), np.ones(2), lambda x: np.array([x[0] + x[1] - 1.0]),\n"
        "                   lambda x: np.array([[1.0, 1.0]]), ftol=1e-12)\n"
        "print('scipy.optimize' in sys.modules)\n"
        "from scipy.optimize import minimize\n"
        "s = minimize(lambda x: float(x @ x), np.array([0.9, 0.8]), jac=lambda x: 2 * x,\n"
        "             method='SLSQP', bounds=[(-1, 1), (-1, 1)], options={'ftol': 1e-12},\n"
        "             constraints=[{'type': 'ineq',\n"
        "                           'fun': lambda x: np.array([x[0] + x[1] - 1])}])\n"
        "print(r.x.tobytes() == s.x.tobytes(), r.nit == s.nit)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "True", "True"]
