"""``bemore identify`` speed: the seed protocol end to end, and optimiser overhead on its cost.

Target (issue 5): the seed protocol — GWO, 200 wolves × 50 iterations on a 1.52 s trial at
1 kHz — in at most 3 s wall time once the compiled kernels are cached (at most 20 s on the very
first run), start-up and trial preparation included, peak resident memory under 1 GB. The seed
study needed 39.77 min (published, MATLAB).

* end to end: ``python -m bemore identify data/sample_trial.c3d`` trimmed to 1.52 s, as a
  subprocess: a first run with empty compile caches (``NUMBA_CACHE_DIR``,
  ``BEMORE_KERNEL_CACHE``), then warm runs; the time from the start of the process to the
  printed result (athlete.json written; the three plots come after it) and the total wall
  time; peak RSS from the child's rusage (smoke mode: one warm run of a 5 × 2 protocol on 0.5 s);
* in process, the same batched cost driven by bemore's GWO (whole pack per engine call), by
  mealpy's OriginalGWO (one engine call per wolf, its design) and by pyswarms' GlobalBestPSO:
  total time and optimiser overhead per iteration (total minus time inside the cost).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import Measurement

REPOSITORY = Path(__file__).resolve().parent.parent
SAMPLE = REPOSITORY / "data" / "sample_trial.c3d"


def trimmed_trial_config(folder: Path, duration_s: float) -> Path:
    """A copy of configs/trial.toml that keeps the first ``duration_s`` seconds."""
    text = (REPOSITORY / "configs" / "trial.toml").read_text()
    assert "end_s = 0.0" in text
    path = folder / "trial.toml"
    path.write_text(text.replace("end_s = 0.0", f"end_s = {duration_s}"))
    return path


def run_cli(args: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Time to the printed result (s), total wall time (s, with the plots written after the
    result) and peak RSS (MB) of ``python -m bemore identify ARGS`` in a subprocess."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "bemore", "identify", *args],
        cwd=REPOSITORY,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    result = float("nan")
    for line in child.stdout:
        # The fit line of the summary: the result is on screen (and athlete.json written).
        if line.startswith("cost ") and result != result:
            result = time.perf_counter() - start
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.stdout.close()
    if status != 0:
        raise RuntimeError(f"bemore identify failed: {child.stderr.read()[-500:]}")
    child.stderr.close()
    return result, wall, usage.ru_maxrss / 1024.0


class TimedCost:
    """The identification problem's batched cost, with the time spent inside it accumulated."""

    def __init__(self, problem) -> None:
        self.problem, self.seconds, self.calls = problem, 0.0, 0

    def __call__(self, X: np.ndarray) -> np.ndarray:
        start = time.perf_counter()
        costs = self.problem.evaluate(np.atleast_2d(X))
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return costs


def build_problem(duration_s: float, folder: Path):
    """The identification problem of the sample trial trimmed to ``duration_s``."""
    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.space import ParameterSpace
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial

    trial = prepare_trial(SAMPLE, None, trimmed_trial_config(folder, duration_s))
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    return IdentificationProblem.from_trial(trial, space)


def drive(name: str, problem, pack: int, iterations: int) -> tuple[float, float]:
    """Total wall time (s) and optimiser overhead per iteration (s) of one algorithm."""
    cost = TimedCost(problem)
    start = time.perf_counter()
    if name == "bemore":
        from bemore.optimize import FunctionProblem, make_algorithm, minimize

        wrapped = FunctionProblem(cost, problem.lower, problem.upper)
        minimize(wrapped, make_algorithm("gwo", wrapped, pack, iterations, seed=0))
    elif name == "mealpy":
        from mealpy import GWO, FloatVar

        GWO.OriginalGWO(epoch=iterations, pop_size=pack).solve(
            {
                "obj_func": lambda x: float(cost(x)[0]),
                "bounds": FloatVar(lb=[0.0] * problem.dim, ub=[1.0] * problem.dim),
                "minmax": "min",
                "log_to": None,
            },
            seed=0,
        )
    else:
        import logging

        from bemore.optimize.adapters import quiet_pyswarms_reporter

        with quiet_pyswarms_reporter():
            from pyswarms.single.global_best import GlobalBestPSO

            logging.getLogger("pyswarms").setLevel(logging.ERROR)
            optimizer = GlobalBestPSO(
                n_particles=pack,
                dimensions=problem.dim,
                options={"w": 0.7298, "c1": 1.49618, "c2": 1.49618},
                bounds=(np.zeros(problem.dim), np.ones(problem.dim)),
            )
        optimizer.optimize(cost, iters=iterations, verbose=False)
    total = time.perf_counter() - start
    return total, (total - cost.seconds) / iterations


def run(smoke: bool) -> list[Measurement]:
    """End-to-end seed protocol (first and warm) and optimiser overhead on the identify cost."""
    duration, pack, iterations, warm_repeats = (0.5, 5, 2, 1) if smoke else (1.52, 200, 50, 3)
    loop_iterations = 2 if smoke else 5
    measurements = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        config = trimmed_trial_config(folder, duration)
        args = [str(SAMPLE), "--trial-config", str(config), "--pack", str(pack)]
        args += ["--iterations", str(iterations), "--out", str(folder / "out")]
        env = dict(os.environ)
        if not smoke:
            # Empty caches (numba's and the engine's generated kernels): the first run compiles.
            env["NUMBA_CACHE_DIR"] = str(folder / "numba-cache")
            env["BEMORE_KERNEL_CACHE"] = str(folder / "kernels")
            first_result, first, first_rss = run_cli(args, env)
            measurements.append(
                Measurement(
                    "identify, first run (compiles): start to printed result", "s",
                    first_result, target="≤ 20 s",
                )
            )
            measurements.append(
                Measurement("identify, first run (compiles): with the plots", "s", first)
            )
        warm = [run_cli(args, env) for _ in range(warm_repeats)]
        protocol = f"{pack}×{iterations}, {duration} s trial at 1 kHz"
        measurements.append(
            Measurement(
                f"identify warm, start to printed result ({protocol}, median of {warm_repeats})",
                "s",
                statistics.median(item[0] for item in warm),
                target="≤ 3 s (seed study: 39.77 min)",
            )
        )
        measurements.append(
            Measurement(
                f"identify warm, with the plots written after the result (median of "
                f"{warm_repeats})",
                "s",
                statistics.median(item[1] for item in warm),
            )
        )
        rss = max(item[2] for item in warm + ([(0.0, 0.0, first_rss)] if not smoke else []))
        measurements.append(Measurement("identify peak RSS", "MB", rss, target="< 1024 MB"))
        problem = build_problem(duration, folder)
        problem.evaluate(np.full((2, problem.dim), 0.5))  # compile outside the timings
        # Imports (seconds for mealpy) are not overhead per iteration.
        import mealpy  # noqa: F401

        from bemore.optimize.adapters import quiet_pyswarms_reporter

        with quiet_pyswarms_reporter():
            import pyswarms  # noqa: F401

        import bemore.optimize  # noqa: F401
        figures = {
            name: drive(name, problem, pack, loop_iterations)
            for name in ("bemore", "mealpy", "pyswarms")
        }
    what = f"pack {pack}, {loop_iterations} iterations on the identify cost"
    for baseline, label in (("mealpy", "mealpy OriginalGWO"), ("pyswarms", "pyswarms PSO")):
        measurements.append(
            Measurement(
                f"optimiser overhead per iteration ({what})",
                "ms",
                max(figures["bemore"][1], 1e-9) * 1e3,
                figures[baseline][1] * 1e3,
                label,
            )
        )
    measurements.append(
        Measurement(
            f"optimiser + cost per iteration ({what})",
            "s",
            figures["bemore"][0] / loop_iterations,
            figures["mealpy"][0] / loop_iterations,
            "mealpy OriginalGWO (one engine call per wolf)",
        )
    )
    return measurements
