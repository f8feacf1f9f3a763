"""scipy's trust-region reflective helpers as bemore carries them (bemore.optimize.trf_steps,
so that the polish does not import scipy.optimize): the same numbers as scipy's own functions,
bit for bit, and trf_bounds taking the same iterates with either set."""

from __future__ import annotations

import numpy as np
import pytest
import scipy
from scipy.optimize._lsq import common, trf

from bemore.optimize import trf as bemore_trf
from bemore.optimize import trf_steps
from tests.optimize.valley import rosenbrock_like, rosenbrock_like_jacobian

COMMON = ("intersect_trust_region", "solve_lsq_trust_region", "update_tr_radius",
          "build_quadratic_1d", "minimize_quadratic_1d", "evaluate_quadratic", "in_bounds",
          "step_size_to_bound", "find_active_constraints", "make_strictly_feasible",
          "CL_scaling_vector", "compute_grad", "check_termination")


def test_scipy_is_the_version_the_helpers_were_copied_from() -> None:
    # Another scipy may have changed its helpers: compare them again (this file) and update.
    assert tuple(int(part) for part in scipy.__version__.split(".")[:2]) == (1, 17)


def test_every_helper_trf_bounds_calls_is_scipys_function_of_that_name() -> None:
    for name in (*COMMON, "select_step"):
        assert callable(getattr(trf_steps, name))
        assert callable(getattr(common if name != "select_step" else trf, name))


def _same(ours, theirs) -> None:
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            _same(a, b)
        return
    assert np.array_equal(np.asarray(ours), np.asarray(theirs), equal_nan=True)


@pytest.mark.parametrize("seed", range(20))
def test_the_helpers_give_scipys_numbers_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = 5, 40
    J = rng.standard_normal((m, n)) * np.logspace(0, -4, n)
    f = rng.standard_normal(m)
    lb, ub = -rng.uniform(0.5, 2.0, n), rng.uniform(0.5, 2.0, n)
    x = rng.uniform(lb, ub)
    x[0] = lb[0]  # one unknown on its bound
    g = J.T @ f
    s_vec = rng.standard_normal(n)
    diag = rng.uniform(0.0, 1.0, n)
    U, s, Vt = np.linalg.svd(J, full_matrices=False)
    Delta = float(rng.uniform(0.01, 3.0))
    calls = {
        "intersect_trust_region": (0.1 * s_vec, s_vec, 1.0 + float(np.linalg.norm(s_vec))),
        "solve_lsq_trust_region": (n, m, U.T @ f, s, Vt.T, Delta),
        "update_tr_radius": (Delta, float(rng.standard_normal()), float(rng.uniform(0, 1)),
                             0.5 * Delta, bool(seed % 2)),
        "build_quadratic_1d": (J, g, s_vec),
        "minimize_quadratic_1d": (float(rng.uniform(0.1, 2)), float(rng.standard_normal()),
                                  -1.0, 1.0),
        "evaluate_quadratic": (J, g, s_vec),
        "in_bounds": (x, lb, ub),
        "step_size_to_bound": (x, s_vec, lb, ub),
        "find_active_constraints": (x, lb, ub),
        "make_strictly_feasible": (x, lb, ub),
        "CL_scaling_vector": (x, g, lb, ub),
        "compute_grad": (J, f),
        "check_termination": (float(rng.uniform(0, 1e-7)), 1.0, 1e-9, 1.0, 0.5, 1e-8, 1e-8),
    }
    keywords = {"build_quadratic_1d": {"diag": diag, "s0": 0.3 * s_vec},
                "evaluate_quadratic": {"diag": diag},
                "make_strictly_feasible": {"rstep": 0.0 if seed % 2 else 1e-10},
                "solve_lsq_trust_region": {"initial_alpha": None if seed % 3 else 0.5}}
    for name in COMMON:
        _same(getattr(trf_steps, name)(*calls[name], **keywords.get(name, {})),
              getattr(common, name)(*calls[name], **keywords.get(name, {})))
    # select_step from a Gauss–Newton step that leaves the box (reflection and gradient steps).
    d = rng.uniform(0.5, 1.5, n)
    p_h = -3.0 * np.linalg.lstsq(J * d, f, rcond=None)[0] - 2.0
    arguments = (x, J * d, diag, d * g, d * p_h, p_h, d, Delta, lb, ub, 0.995)
    ours = trf_steps.select_step(*(a.copy() if isinstance(a, np.ndarray) else a
                                   for a in arguments))
    theirs = trf.select_step(*(a.copy() if isinstance(a, np.ndarray) else a for a in arguments))
    _same(ours, theirs)


def test_trf_bounds_takes_the_same_iterates_with_scipys_helpers(monkeypatch) -> None:
    lower, upper = np.array([-2.0, -2.0, -1.0, -1.0]), np.array([0.8, 2.0, 1.0, 0.5])
    start = np.array([-1.2, 1.0, 0.0, 0.0])

    def run() -> list[np.ndarray]:
        points: list[np.ndarray] = []

        def fun(x: np.ndarray) -> np.ndarray:
            points.append(x.copy())
            return rosenbrock_like(x)

        bemore_trf.trf_bounds(fun, rosenbrock_like_jacobian, start, lower, upper, 200)
        return points

    ours = run()
    for name in ("CL_scaling_vector", "check_termination", "compute_grad",
                 "make_strictly_feasible", "solve_lsq_trust_region", "update_tr_radius"):
        monkeypatch.setattr(bemore_trf, name, getattr(common, name))
    monkeypatch.setattr(bemore_trf, "select_step", trf.select_step)
    theirs = run()
    assert len(ours) == len(theirs) > 5
    for a, b in zip(ours, theirs, strict=True):
        assert np.array_equal(a, b)
