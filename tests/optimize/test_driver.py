"""Every algorithm behind the one ask/tell interface, driven by the same loop."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bemore.errors import OptimisationError
from bemore.optimize import FunctionProblem, make_algorithm, minimize

TARGET = np.array([0.3, 0.7, 0.5, 0.1])


def shifted_sphere(X: np.ndarray) -> np.ndarray:
    return np.sum((X - TARGET) ** 2, axis=1)


def problem() -> FunctionProblem:
    return FunctionProblem(shifted_sphere, np.zeros(4), np.ones(4))


@pytest.mark.parametrize("name", ["gwo", "pso", "de", "cmaes"])
def test_each_algorithm_finds_the_minimum_of_a_shifted_sphere(name: str) -> None:
    result = minimize(problem(), make_algorithm(name, problem(), 20, 80, seed=1), seed=1)
    assert result.fun < 1e-4
    assert np.allclose(result.x, TARGET, atol=0.01)
    assert result.success and not result.interrupted
    # The reported cost is recomputed at the reported point.
    assert result.fun == shifted_sphere(result.x[None, :])[0]
    # Budget: at most 80 batches of 20 plus the re-evaluation (CMA-ES may stop earlier).
    assert result.nit <= 80 and result.nfev <= 80 * 20 + 1
    assert len(result.history) == result.nit
    bests = [record.best for record in result.history]
    assert bests == sorted(bests, reverse=True)


@pytest.mark.parametrize("name", ["gwo", "pso", "de", "cmaes"])
def test_runs_are_reproducible_from_the_seed(name: str) -> None:
    first = minimize(problem(), make_algorithm(name, problem(), 10, 10, seed=7))
    second = minimize(problem(), make_algorithm(name, problem(), 10, 10, seed=7))
    other = minimize(problem(), make_algorithm(name, problem(), 10, 10, seed=8))
    assert np.array_equal(first.x, second.x)
    assert not np.array_equal(first.x, other.x)


def test_pyswarms_adapter_leaves_the_global_numpy_generator_alone() -> None:
    np.random.seed(123)
    expected = np.random.random()
    np.random.seed(123)
    minimize(problem(), make_algorithm("pso", problem(), 10, 5, seed=0))
    assert np.random.random() == expected


def test_unknown_algorithm_and_small_pack_are_clear_errors() -> None:
    with pytest.raises(
        OptimisationError, match=r"unknown algorithm 'sa' \(allowed: gwo, pso, de, cmaes\)"
    ):
        make_algorithm("sa", problem(), 20, 10)
    for name in ("gwo", "pso", "de", "cmaes"):
        with pytest.raises(OptimisationError, match="pack = 1"):
            make_algorithm(name, problem(), 1, 10)


def test_unknown_gwo_option_is_a_clear_error() -> None:
    with pytest.raises(OptimisationError, match="GWO options"):
        make_algorithm("gwo", problem(), 10, 10, options={"demote": True})


def test_callback_can_stop_the_run_and_the_best_so_far_is_returned() -> None:
    seen = []

    def stop_at_three(record, best_x) -> bool:
        seen.append(record.best)
        return record.iteration == 3

    result = minimize(problem(), make_algorithm("gwo", problem(), 10, 50), callback=stop_at_three)
    assert result.status == 2 and not result.success
    assert result.nit == 3 and result.nfev == 31
    assert result.fun == seen[-1]


def test_ctrl_c_between_iterations_returns_the_best_so_far_marked_interrupted() -> None:
    calls = {"n": 0}

    def interrupted_on_fifth_batch(X: np.ndarray) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return shifted_sphere(X)

    broken = FunctionProblem(interrupted_on_fifth_batch, np.zeros(4), np.ones(4))
    result = minimize(broken, make_algorithm("gwo", broken, 10, 50))
    assert result.interrupted and result.status == 1
    assert result.nit == 4
    assert result.fun == pytest.approx(shifted_sphere(result.x[None, :])[0])
    data = json.loads(result.to_json())
    assert data["interrupted"] is True
    assert data["message"].startswith("interrupted")


def test_non_finite_costs_become_the_finite_penalty() -> None:
    def sometimes_nan(X: np.ndarray) -> np.ndarray:
        costs = shifted_sphere(X)
        costs[X[:, 0] > 0.8] = np.nan
        costs[X[:, 1] > 0.9] = np.inf
        return costs

    nan_problem = FunctionProblem(sometimes_nan, np.zeros(4), np.ones(4), penalty=1e3)
    costs = nan_problem.evaluate(np.array([[0.9, 0.5, 0.5, 0.5], [0.5, 0.95, 0.5, 0.5]]))
    assert costs.tolist() == [1e3, 1e3]
    result = minimize(nan_problem, make_algorithm("gwo", nan_problem, 20, 40, seed=0))
    assert result.fun < 1e-3


def test_bounds_with_lower_not_below_upper_name_the_parameter() -> None:
    with pytest.raises(OptimisationError, match=r"bounds of bar\.mass: lower \(2\) .* upper \(1\)"):
        FunctionProblem(shifted_sphere, [0.0, 2.0], [1.0, 1.0], names=["trunk.mass", "bar.mass"])


def test_result_serialises_to_json_and_csv() -> None:
    result = minimize(problem(), make_algorithm("de", problem(), 10, 3, seed=2), seed=2)
    data = json.loads(result.to_json())
    assert data["algorithm"] == "de" and data["seed"] == 2 and data["nit"] == 3
    assert len(data["x"]) == 4 and data["success"] is True
    lines = result.history_csv().splitlines()
    assert lines[0].startswith("iteration,nfev,best")
    assert len(lines) == 4 and lines[1].startswith("1,10,")


def test_pso_leaves_no_report_log_and_keeps_the_logging_setup(tmp_path) -> None:
    # pyswarms' Reporter (made at import and per optimiser) would write report.log in the current
    # folder and replace the root logger's handlers; the adapter must prevent both. A fresh
    # process, so that pyswarms is imported here for the first time.
    import subprocess
    import sys

    code = (
        "import logging, numpy as np\n"
        "logging.getLogger().addHandler(logging.NullHandler())\n"
        "handlers = list(logging.getLogger().handlers)\n"
        "from bemore.optimize.adapters import PyswarmsPSO\n"
        "PyswarmsPSO(np.zeros(3), np.ones(3), pack=5, iterations=2, seed=1)\n"
        "assert logging.getLogger().handlers == handlers, logging.getLogger().handlers\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (tmp_path / "report.log").exists()
