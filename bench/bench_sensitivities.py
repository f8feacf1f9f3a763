"""``bemore identify`` with the exact Jacobian (sensitivities computed with the simulation)
against the finite-difference Jacobian, in one run.

* whole processes: ``python -m bemore identify data/sample_trial.c3d`` (search, then the polish
  from 3 distinct starts, then the analysis), alternated between the default configuration
  (``polish_jacobian = "exact"``) and a copy of it with ``polish_jacobian =
  "finite-difference"``; medians of the polish phase (:mod:`bemore.phases`), of the whole
  process and of its CPU time, the load average before each run, and the simulations of the
  trial the polish made (athlete.json ``polish_starts[].nfev``: one per residual, 2·d + 1 per
  finite-difference Jacobian, one per exact Jacobian — that one simulation carries d tangent
  directions). Both must reach the same optimum (cost within 1e-9 relative, the polished
  point within 1e-4 of the box): a difference raises.
* in process: one Jacobian at each of 3 points of the sample (the lock step's request),
  exact against central differences, wall time, alternated; and the 3-start lock-step polish
  of a 200 × 50 search's distinct starts with each Jacobian, wall and CPU time, alternated
  (the same optimum asserted as above).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.bench_polish import identify_once, jacobian_config, load
from bench.common import Measurement, search_starts


def _outcome(folder: Path) -> dict:
    record = json.loads((folder / "athlete.json").read_text())
    starts = record["polish_starts"]
    best = next(start for start in starts if start["won"])
    return {"nfev": sum(start["nfev"] for start in starts), "cost": best["polished_cost_m2"],
            "x": np.array(best["x"]), "jacobian": record["polish_jacobian"]}


def whole_processes(pairs: int, options: list[str], accepted: tuple[int, ...] = (0,)
                    ) -> list[Measurement]:
    """Alternated identify runs, finite differences then exact (module docstring)."""
    samples: dict[str, list[dict]] = {"finite-difference": [], "exact": []}
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        for pair in range(pairs + 1):  # the first pair unmeasured (caches, page cache)
            for kind in samples:
                out = folder / kind
                sample = identify_once(None, out, [*options, "--identification-config",
                                                   str(jacobian_config(folder, kind))], accepted)
                sample.update(_outcome(out))
                if sample["jacobian"] != kind:
                    raise RuntimeError(f"identify ran with {sample['jacobian']}, not {kind}")
                if pair:
                    samples[kind].append(sample)
            a, b = (_outcome(folder / kind) for kind in samples)
            if not (abs(a["cost"] - b["cost"]) <= 1e-9 * a["cost"]
                    and np.max(np.abs(a["x"] - b["x"])) < 1e-4):
                raise RuntimeError(f"exact and finite-difference polishes differ: cost "
                                   f"{b['cost']!r} against {a['cost']!r}")
    loads = [sample["load"] for kind in samples for sample in samples[kind]]
    print(f"  whole processes: {pairs} alternated pairs, load {min(loads):.1f}–{max(loads):.1f};"
          " the same optimum (cost within 1e-9, point within 1e-4)")
    measurements = []
    for key, label, unit in (("polish", "identify polish phase", "s"),
                             ("total", "identify whole process", "s"),
                             ("cpu", "identify CPU time", "s"),
                             ("nfev", "polish simulations of the trial", "")):
        now = statistics.median(sample[key] for sample in samples["exact"])
        before = statistics.median(sample[key] for sample in samples["finite-difference"])
        measurements.append(Measurement(f"{label} (median of {pairs})", unit, now, before,
                                        "finite-difference Jacobian"))
    return measurements


def in_process(repeats: int, frames: int | None = None) -> list[Measurement]:
    """One Jacobian at each of 3 points: exact against central differences (docstring)."""
    from threadpoolctl import threadpool_limits

    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.space import ParameterSpace
    from bemore.optimize.polish import finite_difference_jacobian
    from bemore.paths import data_dir
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial

    trial = prepare_trial(data_dir() / "sample_trial.c3d")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem.from_trial(trial, space)
    X = np.random.default_rng(0).uniform(0.2, 0.8, (3, problem.dim))

    def differences():
        return [finite_difference_jacobian(problem.residuals, x, problem.lower, problem.upper)
                for x in X]

    samples: dict[str, list[float]] = {"exact": [], "differences": []}
    loads = []
    with threadpool_limits(limits=1, user_api="blas"):
        problem.jacobian(X)  # the tangent kernel loaded (built once per machine)
        for _ in range(repeats):
            for name, function in (("differences", differences),
                                   ("exact", lambda: problem.jacobian(X))):
                loads.append(load())
                wall = time.perf_counter()
                function()
                samples[name].append(time.perf_counter() - wall)
    print(f"  in process: {repeats} alternated repeats, load {min(loads):.1f}–{max(loads):.1f};"
          f" d = {problem.dim}")
    return [Measurement(f"Jacobian at 3 points of the sample (median of {repeats})", "s",
                        statistics.median(samples["exact"]),
                        statistics.median(samples["differences"]),
                        f"central differences ({2 * problem.dim + 1} simulations each)")]


def in_process_polish(repeats: int, pack: int, iterations: int, polish_iterations: int = 100
                      ) -> list[Measurement]:
    """The 3-start lock-step polish, exact against finite-difference Jacobians (docstring)."""
    from threadpoolctl import threadpool_limits

    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.space import ParameterSpace
    from bemore.optimize.polish import polish_many
    from bemore.paths import data_dir
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial

    trial = prepare_trial(data_dir() / "sample_trial.c3d")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem.from_trial(trial, space, samples_per_step=2)
    samples: dict[str, list[tuple[float, float, float]]] = {"differences": [], "exact": []}
    loads = []
    with threadpool_limits(limits=1, user_api="blas"):
        starts = search_starts(problem, pack, iterations, 3)
        problem.jacobian(starts[:1])  # the tangent kernel loaded
        for _ in range(repeats):
            fits = {}
            for name, jacobian in (("differences", None), ("exact", problem.jacobian)):
                loads.append(load())
                wall, cpu = time.perf_counter(), time.process_time()
                fits[name] = polish_many(problem.residuals, starts, problem.lower,
                                         problem.upper, max_iterations=polish_iterations,
                                         jacobian=jacobian)
                samples[name].append((time.perf_counter() - wall, time.process_time() - cpu,
                                      sum(fit.result.nfev for fit in fits[name])))
            for a, b in zip(fits["differences"], fits["exact"], strict=True):
                if 4 in (a.result.status, b.result.status):
                    continue  # stopped by the iteration limit (smoke): not an optimum
                if not (abs(a.result.fun - b.result.fun) <= 1e-9 * a.result.fun
                        and np.max(np.abs(a.result.x - b.result.x)) < 1e-4):
                    raise RuntimeError("exact and finite-difference polishes differ")
    print(f"  in-process polish: {repeats} alternated repeats, load "
          f"{min(loads):.1f}–{max(loads):.1f}; the same optima (starts that converged)")
    return [
        Measurement(f"3-start polish {kind} (median of {repeats})", unit,
                    statistics.median(s[index] for s in samples["exact"]),
                    statistics.median(s[index] for s in samples["differences"]),
                    "finite-difference Jacobian")
        for index, kind, unit in ((0, "wall time", "s"), (1, "CPU time", "s"),
                                  (2, "simulations of the trial", ""))
    ]


def run(smoke: bool) -> list[Measurement]:
    """The figures of the module docstring (smoke: one pair of a 5 × 2 search on the first
    0.5 s, one in-process repeat)."""
    if smoke:
        from bench.bench_identify import trimmed_trial_config

        with tempfile.TemporaryDirectory() as scratch:
            config = trimmed_trial_config(Path(scratch), 0.5)
            options = ["--trial-config", str(config), "--pack", "5", "--iterations", "2"]
            measured = whole_processes(1, options, (0, 1))
        return measured + in_process(1) + in_process_polish(1, 10, 2, polish_iterations=5)
    return whole_processes(5, []) + in_process(5) + in_process_polish(3, 200, 50)
