"""The polish's method: trust-region reflective then Levenberg–Marquardt (this checkout's
default) against trust-region reflective alone (main before it), on the sample.

* whole processes: ``bemore identify data/sample_trial.c3d`` (search, the 3-start polish, the
  analysis, athlete.json, plots), alternated between the tree of :data:`MAIN_COMMIT`
  (``git archive``, same interpreter and compiled kernels, this checkout's ``bemore/phases.py``
  so that both carry CPU marks) and this checkout, one unmeasured pair then ``PAIRS`` measured
  ones; medians of the wall and CPU time of the whole process and of the polish phase, with the
  1-minute load average before each run. Both must find the same minimum
  (:func:`same_minimum`): a difference raises.
* in process, the same 3 starts of the seed protocol's search: :func:`polish_many` with each
  method (trf, trf-lm, lm), alternated; wall and CPU time, Jacobians per start, end costs.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import Measurement, commit_tree, search_starts, time_bemore

REPOSITORY = Path(__file__).resolve().parent.parent
SAMPLE = REPOSITORY / "data" / "sample_trial.c3d"
MAIN_COMMIT = "c196c46"
"""main before the polish's Levenberg–Marquardt (trust-region reflective alone)."""
PAIRS = 5
SAME_STANDARD_ERRORS = 0.05
"""How far (in the baseline's standard errors) a parameter may move for the same minimum."""
SAME_DISTANCE_RELATIVE = 1e-6
"""The mean joint-centre distance's relative difference allowed for the same minimum."""


def same_minimum(baseline: Path, now: Path) -> float:
    """Raise unless the two athlete.json hold the same minimum: the mean distance to
    :data:`SAME_DISTANCE_RELATIVE`, every parameter within :data:`SAME_STANDARD_ERRORS` of the
    baseline's standard error. Returns the largest difference in standard errors."""
    a, b = (json.loads((folder / "athlete.json").read_text()) for folder in (baseline, now))
    if abs(a["mean_distance_mm"] - b["mean_distance_mm"]) > (
            SAME_DISTANCE_RELATIVE * a["mean_distance_mm"]):
        raise RuntimeError(f"mean distance {a['mean_distance_mm']} mm (baseline) against "
                           f"{b['mean_distance_mm']} mm")
    largest = 0.0
    for name, parameter in a["parameters"].items():
        moved = abs(b["parameters"][name]["value"] - parameter["value"])
        in_errors = moved / parameter["standard_error"]
        if in_errors > SAME_STANDARD_ERRORS:
            raise RuntimeError(f"{name}: {parameter['value']} (baseline) against "
                               f"{b['parameters'][name]['value']}: {in_errors:.3f} standard errors")
        largest = max(largest, in_errors)
    return largest


def identify_once(tree: Path | None, out: Path) -> dict[str, float]:
    """One ``bemore identify`` of the sample from ``tree`` (None: this checkout): wall "total",
    "cpu", the polish phase's wall and CPU seconds, "load" before it."""
    from bemore.phases import cpu_durations, durations

    run = time_bemore(tree, ["identify", str(SAMPLE)], out)
    wall = durations(run.marks, run.started_unix_s, run.total)
    cpu = cpu_durations(run.marks, run.cpu)
    return {"total": run.total, "cpu": run.cpu, "polish": wall["polish"],
            "polish CPU": cpu["polish"], "load": run.load}


def whole_processes(pairs: int) -> list[Measurement]:
    """Alternated identify runs, main's tree then this checkout (module docstring)."""
    samples: dict[str, list[dict[str, float]]] = {"main": [], "now": []}
    moved = []
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        tree = commit_tree(MAIN_COMMIT, folder / "main")
        shutil.copyfile(REPOSITORY / "bemore" / "phases.py", tree / "bemore" / "phases.py")
        for pair in range(pairs + 1):  # the first pair unmeasured (caches, page cache)
            for name, source in (("main", tree), ("now", None)):
                sample = identify_once(source, folder / name)
                if pair:
                    samples[name].append(sample)
            moved.append(same_minimum(folder / "main", folder / "now"))
            starts = json.loads((folder / "now" / "athlete.json").read_text())["polish_starts"]
            if pair == 0:
                print("  this checkout's starts: Jacobians "
                      + ", ".join(str(start["jacobians"]) for start in starts) + "; nfev "
                      + ", ".join(str(start["nfev"]) for start in starts))
    loads = [sample["load"] for name in samples for sample in samples[name]]
    print(f"  whole processes: {pairs} alternated pairs, load {min(loads):.1f}–{max(loads):.1f};"
          f" same minimum (parameters within {max(moved):.2g} standard errors)")
    for name in ("main", "now"):
        print(f"  {name}: wall " + ", ".join(f"{s['total']:.2f}" for s in samples[name])
              + " s; CPU " + ", ".join(f"{s['cpu']:.2f}" for s in samples[name]) + " s")
    return [
        Measurement(f"identify {key} (median of {pairs})", "s",
                    statistics.median(s[key] for s in samples["now"]),
                    statistics.median(s[key] for s in samples["main"]), f"commit {MAIN_COMMIT}")
        for key in ("total", "cpu", "polish", "polish CPU")
    ]


def in_process(repeats: int, pack: int, iterations: int) -> list[Measurement]:
    """Each method from the same 3 starts (module docstring)."""
    from threadpoolctl import threadpool_limits

    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.run import RunSettings, worker_threads
    from bemore.identify.space import ParameterSpace
    from bemore.model.simulate import engine_threads_set
    from bemore.optimize.polish import polish_many
    from bemore.paths import data_dir
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial

    identification = load_identification()
    trial = prepare_trial(data_dir() / "sample_trial.c3d")
    space = ParameterSpace.from_config(identification, load_gymnast())
    search = IdentificationProblem.from_trial(
        trial, space, samples_per_step=identification.optimiser.search_samples_per_step,
        coarse_samples_per_step=identification.optimiser.polish_coarse_samples_per_step)
    problem = IdentificationProblem.from_trial(trial, space)
    methods = ("trf", "trf-lm", "lm")
    samples: dict[str, list[tuple[float, float]]] = {method: [] for method in methods}
    loads = []
    with threadpool_limits(limits=1, user_api="blas"):
        starts = search_starts(search, pack, iterations, 3)
        for repeat in range(repeats):
            for method in methods:
                loads.append(os.getloadavg()[0])
                wall, cpu = time.perf_counter(), time.process_time()
                with engine_threads_set(worker_threads(0)):  # as identify runs it
                    fits = polish_many(problem.residuals, starts, problem.lower, problem.upper,
                                       max_iterations=RunSettings().polish_iterations,
                                       jacobian=problem.jacobian, method=method)
                samples[method].append((time.perf_counter() - wall, time.process_time() - cpu))
                if repeat == 0:
                    print(f"  {method}: Jacobians per start "
                          + ", ".join(str(fit.result.options["jacobians"]) for fit in fits)
                          + "; costs " + ", ".join(f"{fit.result.fun:.10g}" for fit in fits)
                          + " m²")
    print(f"  in process: {repeats} alternated repeats, load {min(loads):.1f}–{max(loads):.1f}")
    return [
        Measurement(f"3-start polish {method} {kind} (median of {repeats})", "s",
                    statistics.median(s[index] for s in samples[method]),
                    statistics.median(s[index] for s in samples["trf"]), "trf")
        for method in ("trf-lm", "lm") for index, kind in ((0, "wall"), (1, "CPU"))
    ]


def run(smoke: bool) -> list[Measurement]:
    """The figures of the module docstring (smoke: in process only, one repeat of a 10 × 2
    search's starts)."""
    if smoke:
        return in_process(1, 10, 2)
    return whole_processes(PAIRS) + in_process(3, 200, 50)
