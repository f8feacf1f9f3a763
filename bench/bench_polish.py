"""``bemore identify``'s polish: lock step against one start at a time, in one run (both with
the finite-difference Jacobian; ``bench_sensitivities`` compares the exact one).

* whole processes: ``python -m bemore identify data/sample_trial.c3d`` (search, then the polish
  from 3 distinct starts), alternated between this checkout and the tree of commit
  ``BASELINE_COMMIT`` (the starts polished one after the other, each request its own engine
  call, the residuals in several passes), run from a ``git archive`` of it with the same
  interpreter; medians of the polish phase and of the whole process (:mod:`bemore.phases`),
  and the load average before each run (the machine is shared). Both must write the same
  parameters and cost in athlete.json (numbers to :data:`SAME_RELATIVE`; the standard errors,
  computed differently since, are not compared): a difference raises.
* in process, on the same 3 starts of a 200 × 50 search: the starts polished one after the
  other against :func:`bemore.optimize.polish.polish_many` (lock step), wall and CPU time,
  alternated; both must reach the same points bit for bit.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import Measurement, commit_tree, time_bemore

REPOSITORY = Path(__file__).resolve().parent.parent
SAMPLE = REPOSITORY / "data" / "sample_trial.c3d"
BASELINE_COMMIT = "ce76a10"
"""main before the lock-step polish, the single-copy residuals and the reused Jacobian."""

def load() -> float:
    """The 1-minute load average (runnable processes; 2 = both cores busy)."""
    return os.getloadavg()[0]


def baseline_tree(folder: Path) -> Path:
    """The files of :data:`BASELINE_COMMIT` extracted into ``folder`` (``git archive``)."""
    return commit_tree(BASELINE_COMMIT, folder)


def identify_once(tree: Path | None, out: Path, options: list[str],
                  accepted: tuple[int, ...] = (0,)) -> dict[str, float]:
    """Run identify on the sample from ``tree`` (None: this checkout): wall time ("total"),
    polish phase ("polish") and CPU time ("cpu") in s, the load before it ("load"). An exit
    code not in ``accepted`` raises RuntimeError."""
    from bemore.phases import read

    run = time_bemore(tree, ["identify", str(SAMPLE), *options], out, accepted)
    ends = {str(item["phase"]): float(item["end_unix_s"]) for item in read(run.marks)}
    return {"total": run.total, "polish": ends["polish"] - ends["search"], "load": run.load,
            "cpu": run.cpu}


def jacobian_config(folder: Path, jacobian: str) -> Path:
    """A copy of configs/identification.toml with ``polish_jacobian = jacobian`` in ``folder``."""
    config = REPOSITORY / "configs" / "identification.toml"
    text = config.read_text()
    line = 'polish_jacobian = "exact"'
    if line not in text:
        raise RuntimeError(f"{config} has no line {line!r}")
    path = folder / f"identification-{jacobian}.toml"
    path.write_text(text.replace(line, f'polish_jacobian = "{jacobian}"'))
    return path


SAME_RELATIVE = 1e-5
"""How close two runs' numbers must be (relative): the polish stops at scipy's xtol = ftol =
1e-8, so two versions of the same computation whose BLAS calls round differently (OpenBLAS's
AVX2 kernels) end a few 1e-9 apart in the parameters (measured: positions within 4e-9), and the
standard errors, from finite-difference Jacobians at those points of an ill-conditioned
problem, within 6e-7 relative; 1e-5 is far inside any difference a changed result makes."""
SAME_CORRELATION = 1e-4
"""The same for the correlation matrix's entries, absolute (measured within 1.5e-6)."""


NOT_COMPARED = ("standard_error", "relative_standard_error", "identifiable", "reasons")
"""Parameter fields not compared with the baseline: its standard errors are the residual
sandwich × 1.5, this checkout's the propagated marker noise and the model error
(docs/identify.md, "Standard errors"), and the flags follow the errors."""


def same_result(first: Path, second: Path) -> None:
    """Raise unless the two athlete.json hold the same parameters and fit (the standard errors
    and what follows from them left out, :data:`NOT_COMPARED`): text and flags equal, numbers
    within :data:`SAME_RELATIVE`."""
    a, b = (json.loads((folder / "athlete.json").read_text()) for folder in (first, second))
    for key in ("parameters", "fit"):
        differences = [line for line in _differences(a.get(key), b.get(key), key)
                       if line.split(":")[0].rsplit(".", 1)[-1] not in NOT_COMPARED]
        if differences:
            raise RuntimeError(f"athlete.json differs: {first} against {second}: "
                               + "; ".join(differences)[:3000])


def _differences(first, second, path: str) -> list[str]:
    """Where two JSON values differ ('path: first != second'), numbers beyond
    :data:`SAME_RELATIVE` of the larger one."""
    if isinstance(first, dict) and isinstance(second, dict):
        return [line for k in sorted(set(first) | set(second))
                for line in _differences(first.get(k), second.get(k), f"{path}.{k}")]
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        return [line for i, (x, y) in enumerate(zip(first, second, strict=True))
                for line in _differences(x, y, f"{path}[{i}]")]
    numbers = (int, float)
    if (isinstance(first, numbers) and isinstance(second, numbers)
            and not isinstance(first, bool) and not isinstance(second, bool)):
        if "correlation" in path:
            if abs(first - second) <= SAME_CORRELATION:
                return []
        elif path.startswith("parameters.") and path.endswith(".value"):
            # Compared through its position (value = lower + position·width, below): relative to
            # itself a value near 0 (neck.offset, 0.4 mm) would be held to nanometres, where the
            # polish's methods (trf, trf-lm) end apart within their tolerances.
            return []
        elif path.endswith(".position"):
            # A fraction of the box (0 … 1): compared to SAME_RELATIVE of the box's width, as a
            # parameter at a bound sits a rounding-sized 1e-11 inside it, not relatively equal.
            if abs(first - second) <= SAME_RELATIVE:
                return []
        elif abs(first - second) <= SAME_RELATIVE * max(abs(first), abs(second)) + 1e-300:
            return []
    elif first == second:
        return []
    return [f"{path}: {first!r} != {second!r}"]


def whole_processes(pairs: int, options: list[str], accepted: tuple[int, ...] = (0,)
                    ) -> list[Measurement]:
    """Alternated identify runs, the baseline tree's then this checkout's (module docstring)."""
    samples: dict[str, list[dict[str, float]]] = {"baseline": [], "now": []}
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        tree = baseline_tree(folder / "baseline")
        # This checkout with the baseline's finite-difference Jacobian: the same numbers are
        # expected (bench_sensitivities compares the exact Jacobian).
        now = ["--identification-config", str(jacobian_config(folder, "finite-difference"))]
        for pair in range(pairs + 1):  # the first pair unmeasured (caches, page cache)
            for name, source in (("baseline", tree), ("now", None)):
                sample = identify_once(source, folder / name,
                                       options + (now if source is None else []), accepted)
                if pair:
                    samples[name].append(sample)
            same_result(folder / "baseline", folder / "now")
    loads = [sample["load"] for name in samples for sample in samples[name]]
    print(f"  whole processes: {pairs} alternated pairs, load {min(loads):.1f}–{max(loads):.1f};"
          " athlete.json parameters and fit the same (to 1e-5 relative)")
    measurements = []
    for key, label in (("polish", "identify polish phase"), ("total", "identify whole process"),
                       ("cpu", "identify CPU time")):
        now = statistics.median(sample[key] for sample in samples["now"])
        before = statistics.median(sample[key] for sample in samples["baseline"])
        measurements.append(Measurement(f"{label} (median of {pairs})", "s", now, before,
                                        f"commit {BASELINE_COMMIT}"))
    return measurements


def in_process(repeats: int, pack: int, iterations: int, polish_iterations: int = 100
               ) -> list[Measurement]:
    """Sequential starts against lock step on the same 3 starts (module docstring)."""
    from threadpoolctl import threadpool_limits

    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.run import _Archive
    from bemore.identify.space import ParameterSpace
    from bemore.optimize import make_algorithm, minimize
    from bemore.optimize.polish import distinct_starts, polish, polish_many
    from bemore.paths import data_dir
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial

    trial = prepare_trial(data_dir() / "sample_trial.c3d")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem.from_trial(trial, space)
    samples: dict[str, list[tuple[float, float]]] = {"sequential": [], "lock step": []}
    with threadpool_limits(limits=1, user_api="blas"):
        archive = _Archive(problem)
        minimize(archive, make_algorithm("gwo", problem, pack, iterations, 0, {}), seed=0)
        X, F = np.vstack(archive.points), np.concatenate(archive.costs)
        starts = X[distinct_starts(X, F, 3, problem.lower, problem.upper)]
        arguments = (problem.residuals, problem.lower, problem.upper)

        def sequential():
            return [polish(arguments[0], x, *arguments[1:], max_iterations=polish_iterations)
                    for x in starts]

        def lock_step():
            return polish_many(arguments[0], starts, *arguments[1:],
                               max_iterations=polish_iterations)

        loads = []
        for _ in range(repeats):
            fits = {}
            for name, function in (("sequential", sequential), ("lock step", lock_step)):
                loads.append(load())
                wall, cpu = time.perf_counter(), time.process_time()
                fits[name] = function()
                samples[name].append((time.perf_counter() - wall, time.process_time() - cpu))
            for one, other in zip(fits["sequential"], fits["lock step"], strict=True):
                if not (np.array_equal(one.result.x, other.result.x)
                        and np.array_equal(one.jacobian, other.jacobian)):
                    raise RuntimeError("lock step reached another point than the starts alone")
    print(f"  in process: {repeats} alternated repeats, load {min(loads):.1f}–{max(loads):.1f};"
          " lock step reaches the same points and Jacobians bit for bit")
    return [
        Measurement(f"3-start polish {kind} time (median of {repeats})", "s",
                    statistics.median(s[index] for s in samples["lock step"]),
                    statistics.median(s[index] for s in samples["sequential"]),
                    "starts one after the other")
        for index, kind in ((0, "wall"), (1, "CPU"))
    ]


def run(smoke: bool) -> list[Measurement]:
    """The figures of the module docstring (smoke: one pair of a 5 × 2 search on the first
    0.5 s, and one repeat of 5 polish iterations)."""
    if smoke:
        from bench.bench_identify import trimmed_trial_config

        with tempfile.TemporaryDirectory() as scratch:
            # The baseline tree predates [forces]: a copy without it serves both trees.
            config = trimmed_trial_config(Path(scratch), 0.5, keep_forces=False)
            options = ["--trial-config", str(config), "--pack", "5", "--iterations", "2"]
            # A 5 × 2 search may not fit the trial: identify's poor-fit exit 1 is accepted.
            measured = whole_processes(1, options, (0, 1))
        return measured + in_process(1, 10, 2, polish_iterations=5)
    return whole_processes(3, []) + in_process(3, 200, 50)
