"""Identification on a Dask cluster vs in-process, and the per-iteration overhead of the cluster.

Same problem, same seed, same run in both: the bundled sample trial (1.6 s, 1600 frames at
1 kHz) identified with GWO. bemore's figure is the run on a 2-worker ``LocalCluster`` (2 worker
processes, 1 thread each, loopback); the baseline is the in-process evaluator (numba on all
local cores). On one 2-core machine the cluster cannot win: it shows what the cluster costs, so
that a lab can judge when more machines pay back. The overhead per iteration is measured
directly: a population round trip (chunk, submit, gather) whose chunk function does no work.

Smoke mode: a short trial, a small pack, and a cluster of threads in this process (no worker
start-up), so it runs in seconds.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from bench.common import Measurement


def _problem(frames: int | None):
    """The identification problem of the bundled sample trial (first ``frames`` frames)."""
    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.space import ParameterSpace
    from bemore.model import DrivenMotion, load_model
    from bemore.paths import data_dir
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial

    trial = prepare_trial(data_dir() / "sample_trial.c3d")
    motion, measured = trial.driven, trial.joint_centres
    if frames is not None:
        motion = DrivenMotion(motion.t[:frames], motion.q[:frames], motion.qd[:frames],
                              motion.qdd[:frames])
        measured = measured[:frames]
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    return IdentificationProblem(load_model("real_gymnast"), space, motion, trial.free_q0,
                                 trial.free_qd0, measured, tuple(trial.joint_centre_names))


def _no_work(shared, X: np.ndarray) -> np.ndarray:
    """A chunk function that only returns zeros: what remains is the cluster's own cost."""
    return np.zeros(X.shape[0])


def _timed_run(problem, evaluator, settings) -> tuple[float, list[float], float]:
    """Whole identification time (s), its per-iteration times (s) and the best cost (m²)."""
    from bemore.evaluate import EvaluatedProblem
    from bemore.optimize import make_algorithm, minimize

    wrapped = EvaluatedProblem(problem, evaluator)
    wrapped.evaluate(np.full((2, problem.dim), 0.5))  # warm-up: scatter, worker start, kernels
    marks = [time.perf_counter()]

    def callback(record, best_x) -> bool:
        marks.append(time.perf_counter())
        return False

    algorithm = make_algorithm("gwo", wrapped, settings["pack"], settings["iterations"], seed=0)
    result = minimize(wrapped, algorithm, callback=callback, seed=0)
    total = time.perf_counter() - marks[0]
    return total, list(np.diff(marks)), result.fun


def run(smoke: bool) -> list[Measurement]:
    """In-process vs 2-worker LocalCluster identification; cluster overhead per iteration."""
    from distributed import Client, LocalCluster

    from bemore.evaluate import InProcessEvaluator
    from bemore.evaluate.cluster import DaskEvaluator

    settings = {"pack": 16, "iterations": 3} if smoke else {"pack": 200, "iterations": 10}
    problem = _problem(200 if smoke else None)
    local_s, local_steps, local_fun = _timed_run(problem, InProcessEvaluator(), settings)
    cluster_options = (
        {"processes": False, "n_workers": 2, "threads_per_worker": 1,
         "scheduler_kwargs": {"http_prefix": None, "dashboard_address": "127.0.0.1:0"}}
        if smoke
        else {"processes": True, "n_workers": 2, "threads_per_worker": 1, "host": "127.0.0.1"}
    )
    with LocalCluster(dashboard_address=None, **cluster_options) as cluster, \
            Client(cluster, set_as_default=False) as client:
        evaluator = DaskEvaluator(client=client)
        dask_s, dask_steps, dask_fun = _timed_run(problem, evaluator, settings)
        # Two workers on two cores: one engine thread per chunk avoids oversubscription.
        capped = DaskEvaluator(client=client, engine_threads=1)
        capped_s, capped_steps, capped_fun = _timed_run(problem, capped, settings)
        capped.close()
        population = np.full((settings["pack"], problem.dim), 0.5)
        evaluator.map_rows(_no_work, population, shared=problem)
        round_trips = []
        for _ in range(5 if smoke else 20):
            start = time.perf_counter()
            evaluator.map_rows(_no_work, population, shared=problem)
            round_trips.append(time.perf_counter() - start)
        evaluator.close()
    if not dask_fun == capped_fun == local_fun:
        raise RuntimeError(
            f"cluster runs found {dask_fun!r} and {capped_fun!r} m², in-process {local_fun!r} m²"
        )
    label = f"GWO {settings['pack']}×{settings['iterations']}, {problem.motion.t.size} frames"
    kind = "2 threads (smoke)" if smoke else "2 worker processes"
    return [
        Measurement(f"identification ({label}), Dask {kind}", "s", dask_s, local_s,
                    "in-process"),
        Measurement(f"identification ({label}), Dask {kind}, 1 engine thread per chunk", "s",
                    capped_s, local_s, "in-process"),
        Measurement("median iteration, Dask vs in-process", "ms",
                    statistics.median(dask_steps) * 1e3, statistics.median(local_steps) * 1e3,
                    "in-process"),
        Measurement("median iteration, Dask 1 engine thread per chunk vs in-process", "ms",
                    statistics.median(capped_steps) * 1e3, statistics.median(local_steps) * 1e3,
                    "in-process"),
        Measurement(f"cluster overhead per iteration (empty round trip, {settings['pack']} "
                    "points)", "ms", statistics.median(round_trips) * 1e3,
                    statistics.median(local_steps) * 1e3, "in-process iteration"),
    ]


if __name__ == "__main__":
    import sys

    for measurement in run(smoke="--smoke" in sys.argv):
        print(measurement.line())
