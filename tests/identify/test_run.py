"""identify(): global run, polish, identifiability and the written files (short runs)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from bemore.errors import ConfigError
from bemore.identify.outputs import FILES, write_outputs
from bemore.identify.run import RunSettings, identify, worker_threads
from bemore.settings import load_identification
from tests.identify.synthetic import synthetic_case

FRAMES = 300


@pytest.fixture(scope="module")
def case():
    truth = {item.name: item.seed_value for item in load_identification().parameters}
    return synthetic_case(truth, noise_m=0.001, seed=2, frames=FRAMES)


def test_short_run_with_polish_writes_every_file(case, tmp_path) -> None:
    settings = RunSettings(pack=8, iterations=3, seed=5, polish=True, polish_iterations=3)
    outcome = identify(case.problem, settings)
    assert outcome.global_result.nit == 3 and outcome.global_result.nfev == 25
    assert outcome.polish_result is not None
    assert outcome.polish_result.fun <= outcome.global_result.fun
    assert np.all((outcome.x >= 0) & (outcome.x <= 1))
    # Every start's simulations are counted; the kept one is the start of lowest exact cost.
    starts = outcome.polish_starts
    assert 1 <= len(starts) <= settings.polish_starts == 5
    assert outcome.evaluations == 25 + sum(start.nfev for start in starts)
    assert [start.won for start in starts].count(True) == 1
    kept = next(start for start in starts if start.won)
    lowest = min(start.polished_cost_m2 for start in starts)
    assert kept.polished_cost_m2 <= lowest * (1 + 1e-9)
    # The earliest start within that tie is kept (starts reaching one minimum differ by rounding).
    earlier = starts[: starts.index(kept)]
    assert all(start.polished_cost_m2 > lowest * (1 + 1e-9) for start in earlier)
    assert kept.polished_cost_m2 == outcome.polish_result.fun
    assert starts[0].rank == 0 and starts[0].search_cost_m2 == pytest.approx(
        outcome.global_result.fun, rel=1e-12
    )
    assert len(outcome.identifiability.parameters) == 13
    record = write_outputs(tmp_path, outcome, case.problem, settings, {"source": "synthetic"}, {})
    for name in FILES:
        assert (tmp_path / name).stat().st_size > 0, name
    athlete = json.loads((tmp_path / "athlete.json").read_text())
    assert athlete == json.loads(json.dumps(record))
    trunk = athlete["parameters"]["trunk.mass"]
    assert set(trunk) >= {"value", "unit", "lower", "upper"}
    assert trunk["unit"] == "kg" and trunk["upper"] == pytest.approx(25.433)
    assert trunk["lower"] <= trunk["value"] <= trunk["upper"]
    assert athlete["cost_m2"] == pytest.approx(outcome.polish_result.fun, rel=1e-9)
    assert set(athlete["rms_mm"]) == {"bar", "wrist", "elbow", "neck", "hip", "knee", "ankle"}
    assert athlete["algorithm"] == "gwo" and athlete["pack"] == 8 and athlete["seed"] == 5
    assert athlete["interrupted"] is False
    assert [item["rank"] for item in athlete["polish_starts"]] == [item.rank for item in starts]
    assert "distinct start(s)" in (tmp_path / "summary.txt").read_text()
    assert "numpy" in athlete["versions"]
    rows = list(csv.DictReader((tmp_path / "convergence.csv").open()))
    assert [row["phase"] for row in rows[:3]] == ["global"] * 3
    assert rows[3]["phase"] == "polish"
    assert int(rows[2]["evaluations"]) == 24
    bests = [float(row["best_cost_m2"]) for row in rows]
    assert bests == sorted(bests, reverse=True)


def test_mean_distance_is_consistent_with_the_cost(case) -> None:
    outcome = identify(case.problem, RunSettings(pack=4, iterations=2))
    metrics = outcome.metrics
    rms_all = np.sqrt(np.mean(np.array(list(metrics["rms_mm"].values())) ** 2))
    assert rms_all == pytest.approx(np.sqrt(metrics["cost_m2"] / (FRAMES * 7)) * 1e3)
    assert metrics["mean_distance_mm"] <= rms_all


def test_interrupted_run_keeps_the_best_so_far_and_skips_polish_and_analysis(case) -> None:
    def stop(record, best_x):
        if record.iteration == 2:
            raise KeyboardInterrupt

    outcome = identify(case.problem, RunSettings(pack=4, iterations=10, polish=True), callback=stop)
    assert outcome.interrupted and outcome.global_result.nit == 2
    assert outcome.polish_result is None and outcome.identifiability is None
    assert outcome.metrics["cost_m2"] == pytest.approx(outcome.global_result.fun, rel=1e-9)


def test_unknown_algorithm_and_bad_workers_are_clear_errors(case) -> None:
    from bemore.errors import OptimisationError

    with pytest.raises(OptimisationError, match="unknown algorithm 'nelder'"):
        identify(case.problem, RunSettings(algorithm="nelder", pack=4, iterations=1))
    with pytest.raises(ConfigError, match="--workers 999"):
        worker_threads(999)
    with pytest.raises(ConfigError, match="--workers 999"):
        identify(case.problem, RunSettings(pack=4, iterations=1, workers=999))


def test_workers_set_the_engine_threads_for_the_run_only(case) -> None:
    """``--workers N``: the engine's batches run on N threads during the run (what the run
    records too), the caller's engine setting is the same after, and the result does not
    depend on N."""
    import os

    from bemore.evaluate import InProcessEvaluator, make_evaluator
    from bemore.model.simulate import engine_threads, set_engine_threads

    most = min(2, os.cpu_count())  # --workers cannot exceed the cores
    settings = {workers: RunSettings(pack=6, iterations=2, seed=3, workers=workers)
                for workers in (1, most)}
    assert worker_threads(1) == 1 and worker_threads(0) == os.cpu_count()
    assert make_evaluator(None, worker_threads(1)).describe()["workers"] == 1
    seen = {}

    def watch(workers):
        def callback(record, best_x):
            seen[workers] = engine_threads()
            return False
        return callback

    try:
        caller = set_engine_threads(3)  # the caller's own setting, unlike either run's
        assert InProcessEvaluator().describe()["workers"] == 3
        one = identify(case.problem, settings[1], callback=watch(1))
        assert engine_threads() == 3
        two = identify(case.problem, settings[most], callback=watch(most))
        assert engine_threads() == 3 == caller
    finally:
        set_engine_threads(None)
    assert seen == {1: 1, most: most}
    assert one.global_result.fun == two.global_result.fun
    assert np.array_equal(one.x, two.x)


def test_the_kernels_built_ahead_are_those_the_polish_and_the_analysis_load(
        tmp_path, monkeypatch) -> None:
    """While the search runs, a thread of its own asks for the exact Jacobian's tangent kernel
    and the analysis copies' per-member engine kernel (built there on a first run, compiled by
    clang on the other core): each is a kernel the polish or the analysis then asks for with
    the same arguments, so nothing is built for nothing; a run without the polish asks for no
    tangent kernel ahead, and without a C compiler nothing is built ahead."""
    import importlib
    import inspect
    import threading

    from bemore.identify.pipeline import Overrides, run_identification
    from bemore.identify.run import _build_ahead
    from bemore.model import generated, native, sensitivity
    from bemore.paths import data_dir

    monkeypatch.delenv("BEMORE_CC", raising=False)  # clang, the default backend
    simulate_module = importlib.import_module("bemore.model.simulate")
    asked: list[tuple[str, str, tuple]] = []

    def recording(kind, real):
        signature = inspect.signature(real)

        def record(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = tuple((name, value) for name, value in bound.arguments.items()
                              if name not in ("model", "tree"))
            asked.append((kind, threading.current_thread().name, arguments))
            return real(*args, **kwargs)

        return record

    monkeypatch.setattr(sensitivity, "tangent_kernel",
                        recording("tangent", sensitivity.tangent_kernel))
    engine = recording("engine", generated.kernel_for)
    monkeypatch.setattr(generated, "kernel_for", engine)
    monkeypatch.setattr(simulate_module, "kernel_for", engine)
    run_identification(data_dir() / "sample_trial.c3d", tmp_path / "out",
                       overrides=Overrides(pack=5, iterations=1, seed=1))
    ahead = [(kind, arguments) for kind, thread, arguments in asked
             if thread == "bemore-kernels-ahead"]
    later = {(kind, arguments) for kind, thread, arguments in asked
             if thread != "bemore-kernels-ahead"}
    assert [kind for kind, _ in ahead] == ["tangent", "engine"]
    assert all(request in later for request in ahead), (ahead, later)
    assert dict(ahead[1][1])["per_member"] is True

    asked.clear()
    problem_settings = []

    def capture(problem, settings):
        problem_settings.append((problem, settings))
        return None

    monkeypatch.setattr("bemore.identify.run._build_ahead", capture)
    run_identification(data_dir() / "sample_trial.c3d", tmp_path / "again",
                       overrides=Overrides(pack=5, iterations=1, seed=1, polish=False))
    problem, settings = problem_settings[0]
    asked.clear()
    _build_ahead(problem, settings).join()
    assert [kind for kind, _, _ in asked] == ["engine"]  # no polish: no tangent kernel
    monkeypatch.setattr(native, "compiler", lambda: None)
    assert _build_ahead(problem, settings) is None


def test_a_stopped_build_ahead_starts_no_other_request_and_identify_always_stops_it(
        monkeypatch) -> None:
    """The build-ahead thread's ``stop``: set while a build is in progress, the thread ends
    after it without asking for the next kernel. ``identify`` sets it and joins the thread on
    every way out, an error included: no thread left building after the command."""
    import importlib
    import threading

    from bemore.errors import ModelError
    from bemore.identify import run
    from bemore.identify.pipeline import build_problem
    from bemore.identify.space import ParameterSpace
    from bemore.model import generated, sensitivity
    from bemore.paths import data_dir
    from bemore.settings import load_gymnast

    monkeypatch.delenv("BEMORE_CC", raising=False)
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem, _ = build_problem(data_dir() / "sample_trial.c3d", space)
    started, release = threading.Event(), threading.Event()

    def blocking_tangent(*args, **kwargs):
        started.set()
        assert release.wait(60)

    engine_requests = []
    monkeypatch.setattr(sensitivity, "tangent_kernel", blocking_tangent)
    record_engine = lambda *a, **k: engine_requests.append(a)  # noqa: E731
    monkeypatch.setattr(generated, "kernel_for", record_engine)
    monkeypatch.setattr(importlib.import_module("bemore.model.simulate"), "kernel_for",
                        record_engine)
    thread = run._build_ahead(problem, RunSettings())
    assert started.wait(60)
    thread.stop.set()
    release.set()
    thread.join()
    assert engine_requests == []  # the analysis' kernel was not asked for after the stop

    threads = []
    real_build_ahead = run._build_ahead

    def recorded(*args):
        threads.append(real_build_ahead(*args))
        return threads[-1]

    def failing(*args, **kwargs):
        raise ModelError("the search failed")

    monkeypatch.setattr(run, "_build_ahead", recorded)
    monkeypatch.setattr(run, "minimize", failing)
    started.clear()
    release.set()
    with pytest.raises(ModelError, match="the search failed"):
        run.identify(problem, RunSettings(pack=5, iterations=1))
    assert len(threads) == 1 and threads[0].stop.is_set() and not threads[0].is_alive()
