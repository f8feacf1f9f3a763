"""``bemore identify`` speed: the seed protocol end to end, and optimiser overhead on its cost.

Target (issue 5): the seed protocol — GWO, 200 wolves × 50 iterations on a 1.52 s trial at
1 kHz — in at most 3 s wall time once the compiled kernels are cached (at most 20 s on the very
first run), start-up and trial preparation included, peak resident memory under 1 GB. The seed
study needed 39.77 min (published, MATLAB).

* end to end: ``python -m bemore identify data/sample_trial.c3d`` trimmed to 1.52 s, as a
  subprocess: a first run with empty compile caches (``NUMBA_CACHE_DIR``,
  ``BEMORE_KERNEL_CACHE``), then warm runs; the time from the start of the process to the
  printed result (athlete.json written; the three plots come after it) and the total wall
  time; its CPU time and peak RSS from the child's rusage (smoke mode: one warm run of a 5 × 2
  protocol on 0.5 s); the load average next to each figure (the machine is shared); baseline:
  the same first and warm runs with the engine's kernels compiled by numba (``BEMORE_CC=none``,
  what every run did before the C backend);
* where the warm time goes: the same steps in a child process with a timer per phase (imports,
  trial preparation, engine kernel load, the populations' engine calls, their per-member start
  states, the rest of the run, athlete.json);
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

from bench.common import Measurement, run_child

REPOSITORY = Path(__file__).resolve().parent.parent
SAMPLE = REPOSITORY / "data" / "sample_trial.c3d"


def trimmed_trial_config(folder: Path, duration_s: float, keep_forces: bool = True) -> Path:
    """A copy of configs/trial.toml that keeps the first ``duration_s`` seconds; without
    ``keep_forces``, without its ``[forces]`` tables (the last of the file: a tree older than
    the bar-force channels refuses the key; the sample has no analog channels anyway)."""
    text = (REPOSITORY / "configs" / "trial.toml").read_text()
    assert "end_s = 0.0" in text
    if not keep_forces:
        assert "\n[forces]\n" in text
        text = text[: text.index("\n[forces]\n") + 1]
    path = folder / "trial.toml"
    path.write_text(text.replace("end_s = 0.0", f"end_s = {duration_s}"))
    return path


def load() -> float:
    """The 1-minute load average (runnable processes; 2 = both cores busy)."""
    return os.getloadavg()[0]


def run_cli(args: list[str], env: dict[str, str]) -> tuple[float, float, float, float]:
    """Time to the printed result (s), total wall time (s, with the plots written after the
    result), peak RSS (MB) and CPU time (s) of ``python -m bemore identify ARGS`` in a
    subprocess."""
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
    return result, wall, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime


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
    identification = load_identification()
    space = ParameterSpace.from_config(identification, load_gymnast())
    return IdentificationProblem.from_trial(
        trial, space, samples_per_step=identification.optimiser.search_samples_per_step,
        coarse_samples_per_step=identification.optimiser.polish_coarse_samples_per_step)


PHASES = ("imports", "trial preparation", "engine kernel load", "populations (engine)",
          "start states (equilibrium)", "rest of the run (optimiser, analysis)", "athlete.json")


def phases_child(start: float, duration_s: float, pack: int, iterations: int, folder: str) -> None:
    """In a child process started at ``start`` (perf_counter): the CLI's steps, one timer each;
    prints them as JSON (s)."""
    import json

    import bemore.identify.cli
    import bemore.model
    from bemore.identify import initial
    from bemore.identify.outputs import write_results
    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.run import RunSettings, identify
    from bemore.identify.space import ParameterSpace
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial

    times = {"imports": time.perf_counter() - start}
    clock = time.perf_counter()
    trial = prepare_trial(SAMPLE, None, trimmed_trial_config(Path(folder), duration_s))
    times["trial preparation"] = time.perf_counter() - clock
    identification = load_identification()
    space = ParameterSpace.from_config(identification, load_gymnast())
    clock = time.perf_counter()
    problem = IdentificationProblem.from_trial(
        trial, space, samples_per_step=identification.optimiser.search_samples_per_step,
        coarse_samples_per_step=identification.optimiser.polish_coarse_samples_per_step)
    problem.evaluate(np.full((2, problem.dim), 0.5))
    times["engine kernel load"] = time.perf_counter() - clock
    spent = {"populations (engine)": 0.0, "start states (equilibrium)": 0.0}

    def timed(function, key):
        def wrapper(*args, **kwargs):
            clock = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - clock
        return wrapper

    bemore.model.joint_centre_cost = timed(bemore.model.joint_centre_cost, "populations (engine)")
    initial.spring_equilibrium = timed(initial.spring_equilibrium, "start states (equilibrium)")
    clock = time.perf_counter()
    settings = RunSettings(pack=pack, iterations=iterations)
    outcome = identify(problem, settings)
    run = time.perf_counter() - clock
    times.update(spent)
    times["rest of the run (optimiser, analysis)"] = run - sum(spent.values())
    clock = time.perf_counter()
    write_results(Path(folder) / "phases", outcome, problem, settings, trial.summary(), {})
    times["athlete.json"] = time.perf_counter() - clock
    print(json.dumps(times))


def phases(duration_s: float, pack: int, iterations: int, folder: Path) -> dict[str, float]:
    """Seconds per phase of one warm run (:func:`phases_child` in a fresh process)."""
    import json

    code = (f"import time; start = time.perf_counter(); from bench.bench_identify import "
            f"phases_child; phases_child(start, {duration_s}, {pack}, {iterations}, "
            f"{str(folder)!r})")
    output = run_child([sys.executable, "-c", code], cwd=REPOSITORY).stdout
    return json.loads(output.splitlines()[-1])


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
    """Seed protocol end to end (first and warm), phases, optimiser overhead on its cost."""
    duration, pack, iterations, warm_repeats = (0.5, 5, 2, 1) if smoke else (1.52, 200, 50, 3)
    loop_iterations = 2 if smoke else 5
    measurements = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        config = trimmed_trial_config(folder, duration)
        args = [str(SAMPLE), "--trial-config", str(config), "--pack", str(pack)]
        args += ["--iterations", str(iterations), "--out", str(folder / "out")]
        env = dict(os.environ)
        rss = []
        if not smoke:
            # Empty caches (numba's and the engine's generated kernels): the first run compiles.
            env["NUMBA_CACHE_DIR"] = str(folder / "numba-cache")
            env["BEMORE_KERNEL_CACHE"] = str(folder / "kernels")
            before = load()
            first_result, first, first_rss, first_cpu = run_cli(args, env)
            rss.append(first_rss)
            # Baseline: the same, the engine's kernels compiled by numba (BEMORE_CC=none), as
            # before the C backend; then one warm run of it.
            numba_env = dict(env, BEMORE_CC="none", NUMBA_CACHE_DIR=str(folder / "nb-numba"),
                             BEMORE_KERNEL_CACHE=str(folder / "nb-kernels"))
            numba_first = run_cli(args, numba_env)[0]
            numba_warm = run_cli(args, numba_env)[0]
            measurements.append(
                Measurement(
                    f"identify, first run (compiles): start to printed result (load {before:.1f}; "
                    f"CPU {first_cpu:.1f} s with the plots)", "s", first_result, numba_first,
                    "kernels compiled by numba", target="≤ 20 s",
                )
            )
            measurements.append(
                Measurement("identify, first run (compiles): with the plots", "s", first)
            )
        warm, loads = [], []
        for _ in range(warm_repeats):
            loads.append(load())
            warm.append(run_cli(args, env))
        rss += [item[2] for item in warm]
        protocol = f"{pack}×{iterations}, {duration} s trial at 1 kHz"
        cpu = statistics.median(item[3] for item in warm)
        measurements.append(
            Measurement(
                f"identify warm, start to printed result ({protocol}, median of {warm_repeats}; "
                f"load {min(loads):.1f}–{max(loads):.1f}; CPU {cpu:.2f} s with the plots)",
                "s",
                statistics.median(item[0] for item in warm),
                *((numba_warm, "numba kernels, one warm run") if not smoke else ()),
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
        measurements.append(Measurement("identify peak RSS", "MB", max(rss), target="< 1024 MB"))
        phase_load = load()
        split = phases(duration, pack, iterations, folder)
        for name in PHASES:
            measurements.append(
                Measurement(f"warm phase: {name} (load {phase_load:.1f})", "s", split[name])
            )
        problem = build_problem(duration, folder)
        problem.evaluate(np.full((2, problem.dim), 0.5))  # compile outside the timings
        # Imports (seconds for mealpy) are not overhead per iteration.
        import mealpy  # noqa: F401

        from bemore.optimize.adapters import quiet_pyswarms_reporter

        with quiet_pyswarms_reporter():
            import pyswarms  # noqa: F401

        import bemore.optimize  # noqa: F401
        loop_load = load()
        figures = {
            name: drive(name, problem, pack, loop_iterations)
            for name in ("bemore", "mealpy", "pyswarms")
        }
    what = f"pack {pack}, {loop_iterations} iterations on the identify cost, load {loop_load:.1f}"
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
