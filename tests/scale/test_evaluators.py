"""Evaluators: chunking, the in-process default, and a 2-worker Dask LocalCluster on loopback."""

from __future__ import annotations

import os

import numpy as np
import pytest

from bemore.errors import ConfigError, OptimisationError
from bemore.evaluate import EvaluatedProblem, InProcessEvaluator, chunk_slices, make_evaluator
from bemore.evaluate.cluster import DaskEvaluator
from bemore.identify.problem import IdentificationProblem
from bemore.identify.run import RunSettings, identify
from tests.scale.helpers import dying_copy, small_problem


@pytest.fixture(scope="module")
def problem():
    return small_problem()


def _rows(fn_shared, X):
    """Chunk function used below: each row's sum and its square, as a tuple."""
    return X.sum(axis=1) * fn_shared, (X**2).sum(axis=1)


def test_chunk_slices_cover_every_row_once_in_order() -> None:
    slices = chunk_slices(10, 4)
    assert [(s.start, s.stop) for s in slices] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert [(s.start, s.stop) for s in chunk_slices(3, 8)] == [(0, 1), (1, 2), (2, 3)]
    assert [(s.start, s.stop) for s in chunk_slices(5, 1)] == [(0, 5)]
    with pytest.raises(OptimisationError):
        chunk_slices(5, 0)


def test_in_process_evaluator_is_the_problem_itself(problem) -> None:
    X = np.random.default_rng(0).random((9, problem.dim))
    wrapped = EvaluatedProblem(problem, make_evaluator(None))
    assert np.array_equal(wrapped.evaluate(X), problem.evaluate(X))
    assert wrapped.space is problem.space and wrapped.penalty == problem.penalty
    assert InProcessEvaluator().describe()["kind"] == "in-process"


def test_unreachable_scheduler_is_one_config_error() -> None:
    with pytest.raises(ConfigError, match=r"--dask tcp://127.0.0.1:9: cannot connect"):
        DaskEvaluator(address="tcp://127.0.0.1:9", timeout_s=1.0)


def test_dask_map_rows_stacks_tuples_in_row_order(dask_client) -> None:
    evaluator = DaskEvaluator(client=dask_client, chunks_per_thread=3)
    X = np.arange(14.0).reshape(7, 2)
    first, second = evaluator.map_rows(_rows, X, shared=10.0)
    assert first.tolist() == [10.0, 50.0, 90.0, 130.0, 170.0, 210.0, 250.0]
    assert second.tolist() == [1.0, 13.0, 41.0, 85.0, 145.0, 221.0, 313.0]
    assert evaluator.tasks_submitted == 6  # 2 worker threads × 3 chunks
    evaluator.close()


def test_dask_identification_is_bitwise_the_in_process_one(problem, dask_client) -> None:
    settings = RunSettings(pack=12, iterations=4, seed=3, polish=True, polish_iterations=2)
    local = identify(EvaluatedProblem(problem, InProcessEvaluator()), settings)
    evaluator = DaskEvaluator(client=dask_client)
    remote = identify(EvaluatedProblem(problem, evaluator), settings)
    assert np.array_equal(remote.x, local.x)
    assert remote.global_result.fun == local.global_result.fun
    assert [r.best for r in remote.global_result.history] == [
        r.best for r in local.global_result.history
    ]
    assert [r.batch_mean for r in remote.global_result.history] == [
        r.batch_mean for r in local.global_result.history
    ]
    assert remote.polish_result.fun == local.polish_result.fun
    assert remote.global_result.nfev == local.global_result.nfev == 12 * 4 + 1
    # The problem went to the workers once for the whole run, not once per iteration.
    assert evaluator.scatters == 1
    assert evaluator.tasks_submitted >= 2 * 4
    evaluator.close()


def test_dask_two_stage_polish_is_bitwise_the_in_process_one(dask_client) -> None:
    """The polish's first stage (the search's cost, 2 samples per step) sends its residuals to
    the workers too: the same fit as in process, bit for bit."""
    base = small_problem(frames=301)  # 300 intervals: 2 samples per step
    problem = IdentificationProblem(base.model, base.space, base.motion, base.free_q0,
                                    base.free_qd0, base.measured, base.cost_points,
                                    samples_per_step=2)
    settings = RunSettings(pack=12, iterations=4, seed=3, polish=True, polish_iterations=4)
    local = identify(EvaluatedProblem(problem, InProcessEvaluator()), settings)
    evaluator = DaskEvaluator(client=dask_client)
    remote = identify(EvaluatedProblem(problem, evaluator), settings)
    assert all(start.coarse_nfev > 0 for start in local.polish_starts)
    assert np.array_equal(remote.x, local.x)
    assert remote.polish_result.fun == local.polish_result.fun
    assert ([start.coarse_nfev for start in remote.polish_starts]
            == [start.coarse_nfev for start in local.polish_starts])
    evaluator.close()


def test_worker_killed_mid_evaluation_does_not_lose_the_run(problem, dask_client, tmp_path):
    flag = tmp_path / "kill-one-worker"
    flag.write_text("armed")
    pids_before = set(dask_client.run(os.getpid).values())
    settings = RunSettings(pack=10, iterations=3, seed=11)
    local = identify(EvaluatedProblem(problem, InProcessEvaluator()), settings)
    evaluator = DaskEvaluator(client=dask_client)
    remote = identify(EvaluatedProblem(dying_copy(problem, flag), evaluator), settings)
    # A worker really died, inside a chunk, during the run ...
    assert not flag.exists() and (tmp_path / "kill-one-worker.claimed").exists()
    killed = int((tmp_path / "kill-one-worker.pid").read_text())
    assert killed in pids_before
    # ... and the run finished with exactly the in-process numbers.
    assert np.array_equal(remote.x, local.x)
    assert remote.global_result.fun == local.global_result.fun
    assert remote.global_result.nfev == local.global_result.nfev == 10 * 3 + 1
    dask_client.wait_for_workers(2, timeout=120)
    assert killed not in set(dask_client.run(os.getpid).values())
    evaluator.close()


def test_gesture_problem_on_dask_matches_in_process(dask_client) -> None:
    from bemore.evaluate import EvaluatedGestureProblem
    from bemore.settings import load_identification, load_synthesis
    from bemore.synthesis.athlete import default_parameters
    from bemore.synthesis.problem import GestureProblem
    from bemore.synthesis.synthesize import exemplary_matrix

    model, P, _ = exemplary_matrix(default_parameters(load_identification()))
    problem = GestureProblem(model, P, load_synthesis(), steps=120)
    designs = np.array([[2.9, 1.7, 2.7], [3.0, 1.8, 2.8], [2.5, 1.5, 2.6], [3.5, 2.0, 2.2]])
    f_local, c_local = problem.evaluate(designs)
    evaluator = DaskEvaluator(client=dask_client)
    remote = EvaluatedGestureProblem(problem, evaluator)
    before = problem.simulations
    f_remote, c_remote = remote.evaluate(designs)
    assert np.array_equal(f_remote, f_local) and np.array_equal(c_remote, c_local)
    assert np.all(f_local > 0) and c_local.shape == (4, 2)
    assert problem.simulations == before + 4  # counted here, not lost on the workers
    assert remote.names == problem.names
    evaluator.close()
