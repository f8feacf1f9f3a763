"""SLSQP (Kraft 1988) exactly as ``scipy.optimize.minimize(method="SLSQP")`` runs it, without
importing ``scipy.optimize``.

Importing ``scipy.optimize`` costs 0.4–0.6 s of CPU on the 2-core Xeon (every solver, scipy.linalg,
scipy.special, numpy.f2py through scipy's array-API layer, docstrings parsed at import): a third
of a whole ``bemore synthesize``, whose only scipy solver is SLSQP. In scipy 1.17 SLSQP is one
compiled function of scipy's private extension ``scipy.optimize._slsqplib``, called in a loop by
``scipy.optimize._slsqp_py._minimize_slsqp`` (reverse communication: the function asks for the
objective and constraints, or for their gradients, at the point it holds). :func:`minimize_slsqp`
loads only that extension (≈ 2 ms) and runs the same loop with the same arrays, workspace sizes,
function-value caching and callbacks, so every iterate is the same to the last bit
(tests/optimize/test_slsqp.py compares them with scipy.optimize.minimize's).

The extension is private: its interface is checked for the scipy versions in
:data:`CHECKED_SCIPY`. With any other scipy (or when the extension cannot be loaded)
:func:`minimize_slsqp` calls ``scipy.optimize.minimize`` instead — the same result, with the
import's cost.

>>> import numpy as np
>>> result = minimize_slsqp(lambda x: float(x @ x), np.array([0.9, 0.8]), lambda x: 2.0 * x,
...                         np.zeros(2) - 1.0, np.ones(2),
...                         lambda x: np.array([x[0] + x[1] - 1.0]),
...                         lambda x: np.array([[1.0, 1.0]]), ftol=1e-10)
>>> np.round(result.x, 6).tolist(), result.success
([0.5, 0.5], True)
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

CHECKED_SCIPY = ((1, 17),)
"""scipy versions (major, minor) whose ``_slsqplib`` interface and ``_minimize_slsqp`` loop this
module reproduces (compared by tests/optimize/test_slsqp.py)."""

# scipy's exit modes (scipy/optimize/_slsqp_py.py), the result's message.
EXIT_MODES = {
    -1: "Gradient evaluation required (g & a)",
    0: "Optimization terminated successfully",
    1: "Function evaluation required (f & c)",
    2: "More equality constraints than independent variables",
    3: "More than 3*n iterations in LSQ subproblem",
    4: "Inequality constraints incompatible",
    5: "Singular matrix E in LSQ subproblem",
    6: "Singular matrix C in LSQ subproblem",
    7: "Rank-deficient equality constraint subproblem HFTI",
    8: "Positive directional derivative for linesearch",
    9: "Iteration limit reached",
}


class SlsqpResult(NamedTuple):
    """The end of one SLSQP run (the fields of scipy's OptimizeResult that bemore reads)."""

    x: np.ndarray  # the last point (n,)
    fun: float  # the objective there
    nit: int  # major iterations
    status: int  # exit mode (EXIT_MODES)
    message: str
    success: bool  # status 0


_kernel: Any = None  # the extension's slsqp function once loaded; False: not usable here
_loading = threading.Lock()  # the lockstep starts' threads may ask for it at once


def compiled_slsqp() -> Any:
    """scipy's compiled ``slsqp`` reverse-communication function, loaded alone from
    ``scipy/optimize/_slsqplib``; None when this scipy is not one of :data:`CHECKED_SCIPY` or
    the extension cannot be loaded (then :func:`minimize_slsqp` uses scipy.optimize)."""
    global _kernel
    with _loading:
        if _kernel is None:
            _kernel = _load_kernel() or False
    return _kernel or None


def _load_kernel() -> Any:
    import scipy  # the package alone (≈ 30 ms): its version, not its solvers

    try:
        version = tuple(int(part) for part in scipy.__version__.split(".")[:2])
    except ValueError:
        return None
    if version not in CHECKED_SCIPY:
        return None
    name = "scipy.optimize._slsqplib"
    if name in sys.modules:  # scipy.optimize already imported: its own copy
        return getattr(sys.modules[name], "slsqp", None)
    folder = os.path.join(os.path.dirname(scipy.__file__), "optimize")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_slsqplib" + suffix)
        if os.path.isfile(path):
            break
    else:
        return None
    try:
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (ImportError, OSError):
        return None
    return getattr(module, "slsqp", None)


def minimize_slsqp(
    fun: Callable[[np.ndarray], float],
    x0: np.ndarray,
    jac: Callable[[np.ndarray], np.ndarray],
    lower: np.ndarray,
    upper: np.ndarray,
    constraints: Callable[[np.ndarray], np.ndarray] | None = None,
    constraints_jac: Callable[[np.ndarray], np.ndarray] | None = None,
    ftol: float = 1e-6,
    maxiter: int = 100,
    callback: Callable[[np.ndarray], Any] | None = None,
) -> SlsqpResult:
    """Minimise ``fun`` from ``x0`` over the box ``lower ≤ x ≤ upper`` (lower < upper; float64 x0)
    subject to ``constraints(x) ≥ 0`` (m,), with the gradient ``jac(x)`` (n,) and the
    constraints' Jacobian ``constraints_jac(x)`` (m, n): what
    ``scipy.optimize.minimize(fun, x0, jac=jac, method="SLSQP", bounds=Bounds(lower, upper),
    constraints=[{"type": "ineq", "fun": constraints, "jac": constraints_jac}],
    options={"ftol": ftol, "maxiter": maxiter}, callback=callback)`` returns, point for point.
    ``callback(x)`` runs after every major iteration (StopIteration from it ends the run).
    Units are the caller's."""
    kernel = compiled_slsqp()
    if kernel is None or not np.all(np.asarray(lower) < np.asarray(upper)):
        return _scipy_slsqp(fun, x0, jac, lower, upper, constraints, constraints_jac, ftol,
                            maxiter, callback)
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    x = np.clip(np.array(np.atleast_1d(x0), dtype=float).reshape(-1), lower, upper)
    n = x.size
    m = 0 if constraints is None else np.atleast_1d(constraints(x)).size
    xl = np.where(np.isfinite(lower), lower, np.nan)  # the compiled code's "no bound"
    xu = np.where(np.isfinite(upper), upper, np.nan)
    scalar = _CachedObjective(fun, jac, x)
    fx, g = scalar.fun(x), scalar.grad(x)
    state = {
        "acc": ftol, "alpha": 0.0, "f0": 0.0, "gs": 0.0, "h1": 0.0, "h2": 0.0, "h3": 0.0,
        "h4": 0.0, "t": 0.0, "t0": 0.0, "tol": 10.0 * ftol, "exact": 0, "inconsistent": 0,
        "reset": 0, "iter": 0, "itermax": int(maxiter), "line": 0, "m": m, "meq": 0,
        "mode": 0, "n": n,
    }
    indices = np.zeros([max(m + 2 * n + 2, 1)], dtype=np.int32)
    # scipy's worst-case workspace without equality constraints (meq = 0).
    size = n * (n + 1) // 2 + 3 * m * n + 9 * m + 8 * n * n + 35 * n + 28
    if m == 0:
        size += 2 * n * (n + 1)
    buffer = np.zeros(max(size, 1), dtype=np.float64)
    multipliers = np.zeros([max(1, m + 2 * n + 2)], dtype=np.float64)
    normals = np.zeros([max(1, m), n], dtype=np.float64, order="F")
    values = np.zeros([max(1, m)], dtype=np.float64)
    if m:
        normals[:m, :] = np.atleast_2d(constraints_jac(x))
        values[:m] = np.atleast_1d(constraints(x)).ravel()
    previous = 0
    while True:
        kernel(state, fx, g, normals, values, x, multipliers, xl, xu, buffer, indices)
        if state["mode"] == 1:  # objective and constraints wanted at x
            fx = scalar.fun(x)
            if m:
                values[:m] = np.atleast_1d(constraints(x)).ravel()
        if state["mode"] == -1:  # their gradients wanted at x
            g = scalar.grad(x)
            if m:
                normals[:m, :] = np.atleast_2d(constraints_jac(x))
        if state["iter"] > previous and callback is not None:
            try:
                callback(np.copy(x))
            except StopIteration:
                break
        if abs(state["mode"]) != 1:
            break
        previous = state["iter"]
    mode = int(state["mode"])
    return SlsqpResult(x, fx, int(state["iter"]), mode, EXIT_MODES[mode], mode == 0)


class _CachedObjective:
    """The objective and its gradient at the last point asked, as scipy's ScalarFunction keeps
    them: evaluated once at x0, then again only when SLSQP asks at another point (each call gets
    a copy of the point)."""

    def __init__(self, fun: Callable[[np.ndarray], float],
                 jac: Callable[[np.ndarray], np.ndarray], x0: np.ndarray) -> None:
        self._fun, self._jac = fun, jac
        self.x = np.array(x0, dtype=float)
        self.f = self._value()
        self.g = np.atleast_1d(self._jac(np.copy(self.x)))
        self._f_current = self._g_current = True

    def _value(self) -> float:
        value = self._fun(np.copy(self.x))
        return value if np.isscalar(value) else np.asarray(value).item()

    def _move(self, x: np.ndarray) -> None:
        if not np.array_equal(x, self.x):
            self.x = np.array(np.atleast_1d(x), dtype=float)
            self._f_current = self._g_current = False

    def fun(self, x: np.ndarray) -> float:
        """The objective at x (evaluated unless x is the last point)."""
        self._move(x)
        if not self._f_current:
            self.f = self._value()
            self._f_current = True
        return self.f

    def grad(self, x: np.ndarray) -> np.ndarray:
        """The gradient at x (evaluated unless x is the last point)."""
        self._move(x)
        if not self._g_current:
            self.g = np.atleast_1d(self._jac(np.copy(self.x)))
            self._g_current = True
        return self.g


def _scipy_slsqp(fun: Callable[[np.ndarray], float], x0: np.ndarray,
                 jac: Callable[[np.ndarray], np.ndarray], lower: np.ndarray, upper: np.ndarray,
                 constraints: Callable[[np.ndarray], np.ndarray] | None,
                 constraints_jac: Callable[[np.ndarray], np.ndarray] | None, ftol: float,
                 maxiter: int, callback: Callable[[np.ndarray], Any] | None) -> SlsqpResult:
    """:func:`minimize_slsqp` through ``scipy.optimize.minimize``."""
    from scipy.optimize import Bounds, minimize

    result = minimize(
        fun, x0, jac=jac, method="SLSQP", bounds=Bounds(lower, upper),
        constraints=([] if constraints is None else
                     [{"type": "ineq", "fun": constraints, "jac": constraints_jac}]),
        options={"ftol": ftol, "maxiter": maxiter}, callback=callback,
    )
    return SlsqpResult(result.x, result.fun, int(result.nit), int(result.status),
                       str(result.message), bool(result.success))
