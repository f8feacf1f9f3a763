"""The coach's whole wait: ``bemore identify`` on the sample trial, then ``bemore synthesize`` on
the athlete.json it wrote, as whole processes, phase by phase.

Target (issue 24): warm, ``identify`` (with its default least-squares polish) ≤ 3 s and
``synthesize`` ≤ 1.2 s with its plots, the coach's whole wait ≤ 5 s; a first run on a fresh
machine (empty compile caches) ≤ 15 s.

* each command runs in a subprocess, timed by wall clock from its start to its exit; the
  commands write the end of each phase (start-up, trial, search, polish, analysis, result, plots
  for identify; start-up, synthesis, outputs, figures (the wait for the child
  process drawing the plots and GIF beside the outputs) for synthesize) to the file named
  by ``BEMORE_PHASE_TIMES`` (:mod:`bemore.phases`), so each phase is the difference of two
  instants, the first from the process's start, the last ("exit") to the process's end;
* warm: the medians of ``repeats`` pairs; first run: one pair with ``BEMORE_KERNEL_CACHE`` and
  ``NUMBA_CACHE_DIR`` pointed at an empty folder (what a fresh machine compiles), and one pair
  on another empty folder after ``python -m bemore.warmup`` (what ``make venv`` runs) filled it;
* the load average before each run (the machine is shared) and the CPU model are printed;
* baseline, in the same run: what a user would otherwise assemble — mealpy's OriginalGWO driving
  ``scipy.integrate.solve_ivp`` (LSODA) on the same model's right-hand side (``model.hybrid``)
  and the same joint-centre cost, one simulation per wolf — run reduced (a small pack, few
  iterations, counted evaluations) and extrapolated to the evaluations bemore's identify made;
  plus the synthesis as scipy SLSQP would drive solve_ivp (bench_synthesis' baseline evaluation
  × the evaluations bemore's synthesis made); next to them the seed study's published times
  (39.77 min identification, 23.82 s synthesis, MATLAB).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import Measurement, byte_compiled

REPOSITORY = Path(__file__).resolve().parent.parent
SAMPLE = REPOSITORY / "data" / "sample_trial.c3d"
SEED_IDENTIFY_S = 39.77 * 60.0
SEED_SYNTHESIS_S = 23.82
IDENTIFY_PHASES = ("start-up", "trial", "search", "polish", "analysis", "result", "plots", "exit")
SYNTHESIZE_PHASES = ("start-up", "synthesis", "outputs", "figures", "exit")


def load() -> float:
    """The 1-minute load average (runnable processes; 2 = both cores busy)."""
    return os.getloadavg()[0]


def timed_command(args: list[str], env: dict[str, str], marks: Path,
                  accepted: tuple[int, ...] = (0,)) -> dict[str, float]:
    """Run ``python -m bemore ARGS`` to its end; return its wall time ("total", s) and the
    seconds of each phase it marked (:mod:`bemore.phases`), "exit" being the teardown after
    the last mark. An exit code not in ``accepted`` raises RuntimeError with the end of its
    stderr."""
    marks.unlink(missing_ok=True)
    env = dict(env, BEMORE_PHASE_TIMES=str(marks))
    started = time.time()
    clock = time.perf_counter()
    child = subprocess.run([sys.executable, "-m", "bemore", *args], cwd=REPOSITORY, env=env,
                           capture_output=True, text=True, check=False)
    total = time.perf_counter() - clock
    if child.returncode not in accepted:
        raise RuntimeError(f"bemore {args[0]} exited with {child.returncode}:\n"
                           f"{child.stderr[-2000:]}")
    from bemore.phases import durations

    return {"total": total, **durations(marks, started, total)}


def coach_pair(folder: Path, env: dict[str, str], identify_options: list[str],
               synthesize_options: list[str], smoke: bool = False
               ) -> tuple[dict[str, float], dict[str, float]]:
    """identify on the sample, then synthesize on the athlete.json it wrote: phase seconds of
    each (:func:`timed_command`; ``smoke``: identify's poor-fit exit 1 is accepted)."""
    identified = folder / "identify"
    folder.mkdir(parents=True, exist_ok=True)
    first = timed_command(["identify", str(SAMPLE), *identify_options, "--out", str(identified)],
                          env, folder / "identify-phases.jsonl", (0, 1) if smoke else (0,))
    second = timed_command(["synthesize", str(identified / "athlete.json"), *synthesize_options,
                            "--out", str(folder / "gesture")], env,
                           folder / "synthesize-phases.jsonl")
    return first, second


def identification_problem(trial_config: Path | None):
    """The identification problem ``bemore identify`` builds for the sample (default model,
    body from the segment table and the trial's lengths)."""
    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.space import ParameterSpace
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial

    trial = prepare_trial(SAMPLE, None, trial_config)
    identification = load_identification()
    space = ParameterSpace.from_config(identification, load_gymnast())
    return IdentificationProblem.from_trial(trial, space)


def ivp_cost(problem, x: np.ndarray) -> float:
    """The joint-centre cost (m²) of the normalised point x computed the plain way: LSODA
    (rtol 1e-6, atol 1e-9) on ``model.hybrid`` with the driven motion interpolated linearly,
    the points from the solution at every frame. A failed solve gets the problem's penalty."""
    from scipy.integrate import solve_ivp

    model, motion = problem.model, problem.motion
    P, q0, qd0 = problem.members(np.asarray(x, dtype=float)[None, :])
    t = motion.t
    nf = model.n_free

    tables = (motion.q, motion.qd, motion.qdd)

    def rhs(time_s: float, y: np.ndarray) -> np.ndarray:
        i = min(max(int(np.searchsorted(t, time_s)) - 1, 0), t.size - 2)
        w = (time_s - t[i]) / (t[i + 1] - t[i])
        driven = [(1.0 - w) * table[i][None] + w * table[i + 1][None] for table in tables]
        acc, _ = model.hybrid(P, y[None, :nf], y[None, nf:], *driven)
        return np.concatenate([y[nf:], acc[0]])

    y0 = np.concatenate([np.atleast_2d(q0)[0], np.atleast_2d(qd0)[0]])
    solution = solve_ivp(rhs, (t[0], t[-1]), y0, method="LSODA", t_eval=t, rtol=1e-6, atol=1e-9)
    if not solution.success or solution.y.shape[1] != t.size:
        return float(problem.penalty)
    q_full = np.concatenate([solution.y[:nf].T, motion.q], axis=1)
    points = model.point_positions(P, q_full)[0]
    index = [model.point_names.index(name) for name in problem.cost_points]
    value = float(np.nansum((points[:, index] - problem.measured) ** 2))
    return value if np.isfinite(value) else float(problem.penalty)


def mealpy_ivp_seconds_per_evaluation(pack: int, iterations: int) -> tuple[float, int]:
    """Seconds per evaluation (and evaluations) of a reduced run of mealpy's OriginalGWO whose
    objective is :func:`ivp_cost` on the sample's identification problem."""
    from mealpy import GWO, FloatVar

    problem = identification_problem(None)
    count = [0]

    def objective(x: np.ndarray) -> float:
        count[0] += 1
        return ivp_cost(problem, x)

    objective(np.full(problem.dim, 0.5))  # numba's reference kernels loaded outside the timing
    count[0] = 0
    clock = time.perf_counter()
    GWO.OriginalGWO(epoch=iterations, pop_size=pack).solve(
        {"obj_func": objective, "bounds": FloatVar(lb=[0.0] * problem.dim, ub=[1.0] * problem.dim),
         "minmax": "min", "log_to": None},
        seed=0,
    )
    return (time.perf_counter() - clock) / count[0], count[0]


def synthesis_ivp_seconds_per_evaluation() -> float:
    """bench_synthesis' baseline: one gesture evaluated by LSODA on ``model.hybrid`` (s)."""
    import numpy as np

    from bench.bench_synthesis import START, _ivp_evaluate, _setup

    problem = _setup(step_s=0.01)
    _ivp_evaluate(problem, START, 0.02)  # load the reference kernels outside the timing
    clock = time.perf_counter()
    _ivp_evaluate(problem, np.asarray(START))
    return time.perf_counter() - clock


def _median(samples: list[dict[str, float]], key: str) -> float:
    values = [sample.get(key, 0.0) for sample in samples]
    return statistics.median(values)


def run(smoke: bool) -> list[Measurement]:
    """The coach's wait, warm and on a first run, phase by phase, beside the baselines."""
    repeats = 1 if smoke else 3
    measurements: list[Measurement] = []
    byte_compiled(REPOSITORY)  # as installed: bytecode compiled once (bemore.warmup does it)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        identify_options: list[str] = []
        synthesize_options: list[str] = []
        if smoke:
            # Seconds-long: a 5 × 2 search on the first 0.5 s, no polish, one synthesis start.
            from bench.bench_identify import trimmed_trial_config

            config = trimmed_trial_config(folder, 0.5)
            identify_options = ["--trial-config", str(config), "--pack", "5", "--iterations",
                                "2", "--no-polish"]
            synthesize_options = ["--starts", "1", "--no-animation", "--accept-poor-fit"]
        env = dict(os.environ)
        first_load = None
        if not smoke:
            first_load = load()
            cold_env = dict(env, NUMBA_CACHE_DIR=str(folder / "numba-cache"),
                            BEMORE_KERNEL_CACHE=str(folder / "kernels"))
            cold = coach_pair(folder / "cold", cold_env, identify_options, synthesize_options)
            # The same on another empty cache after `make venv`'s warm-up (bemore.warmup).
            installed_env = dict(env, NUMBA_CACHE_DIR=str(folder / "numba-installed"),
                                 BEMORE_KERNEL_CACHE=str(folder / "kernels-installed"))
            clock = time.perf_counter()
            subprocess.run([sys.executable, "-m", "bemore.warmup"], cwd=REPOSITORY,
                           env=installed_env, capture_output=True, check=True)
            warmup_seconds = time.perf_counter() - clock
            installed_load = load()
            installed = coach_pair(folder / "installed", installed_env, identify_options,
                                   synthesize_options)
        warm_loads, warm = [], []
        if not smoke:
            coach_pair(folder / "warm-up", env, identify_options, synthesize_options)
        for repeat in range(repeats):
            warm_loads.append(load())
            warm.append(coach_pair(folder / f"warm{repeat}", env, identify_options,
                                   synthesize_options, smoke))
        athlete = json.loads((folder / f"warm{repeats - 1}" / "identify" / "athlete.json")
                             .read_text())
        gesture = json.loads((folder / f"warm{repeats - 1}" / "gesture" / "gesture.json")
                             .read_text())
        baseline_load = load()
        if not smoke:
            pack, iterations = 5, 1  # mealpy takes at least 5 wolves
            per_identify_evaluation, counted = mealpy_ivp_seconds_per_evaluation(pack, iterations)
            per_gesture_evaluation = synthesis_ivp_seconds_per_evaluation()
    identify_runs = [pair[0] for pair in warm]
    synthesize_runs = [pair[1] for pair in warm]
    loads = f"load {min(warm_loads):.1f}–{max(warm_loads):.1f}"
    what = f"median of {repeats}, {loads}"
    identify_total = _median(identify_runs, "total")
    synthesize_total = _median(synthesize_runs, "total")
    wait = statistics.median(a["total"] + b["total"] for a, b in warm)
    evaluations = int(athlete["evaluations"]) + int(athlete.get("analysis_evaluations", 0))
    baseline_identify = baseline_synthesis = None
    if not smoke:
        baseline_identify = per_identify_evaluation * evaluations
        baseline_synthesis = per_gesture_evaluation * int(gesture["optimisation"]["nfev"])
        print(f"  baseline (load {baseline_load:.1f}): mealpy OriginalGWO + solve_ivp LSODA, "
              f"{pack} wolves × {iterations} iterations = {counted} evaluations, "
              f"{per_identify_evaluation:.3f} s each, × bemore's {evaluations} = "
              f"{baseline_identify / 60:.1f} min; synthesis: solve_ivp "
              f"{per_gesture_evaluation:.3f} s per gesture × bemore's "
              f"{gesture['optimisation']['nfev']} = {baseline_synthesis:.0f} s; seed (published): "
              f"{SEED_IDENTIFY_S / 60:.2f} min + {SEED_SYNTHESIS_S} s")
    measurements.append(Measurement(
        f"coach's wait, warm: identify + synthesize, whole processes ({what})", "s", wait,
        None if smoke else baseline_identify + baseline_synthesis,
        "mealpy GWO + solve_ivp, extrapolated", target="≤ 5 s (seed, published: "
        f"{(SEED_IDENTIFY_S + SEED_SYNTHESIS_S) / 60:.1f} min)"))
    measurements.append(Measurement(
        f"identify warm, whole process ({what}; {evaluations} simulations)", "s",
        identify_total, baseline_identify, "mealpy GWO + solve_ivp, extrapolated",
        target=f"≤ 3 s (seed {SEED_IDENTIFY_S / 60:.2f} min)"))
    measurements.append(Measurement(
        f"synthesize warm, whole process with plots and GIF ({what}; "
        f"{gesture['optimisation']['nfev']} evaluations)", "s", synthesize_total,
        baseline_synthesis, "SLSQP-count × solve_ivp, extrapolated",
        target=f"≤ 1.2 s (seed {SEED_SYNTHESIS_S} s)"))
    for command, runs, phases in (("identify", identify_runs, IDENTIFY_PHASES),
                                  ("synthesize", synthesize_runs, SYNTHESIZE_PHASES)):
        for phase in phases:
            if any(phase in item for item in runs):
                measurements.append(Measurement(f"  {command} warm: {phase}", "s",
                                                max(_median(runs, phase), 1e-6)))
    if not smoke:
        cold_identify, cold_synthesize = cold
        measurements.append(Measurement(
            f"coach's wait, first run (empty BEMORE_KERNEL_CACHE and NUMBA_CACHE_DIR; load "
            f"{first_load:.1f})", "s", cold_identify["total"] + cold_synthesize["total"],
            target="≤ 15 s"))
        measurements.append(Measurement(
            f"coach's wait, first run after the install's warm-up (python -m bemore.warmup, "
            f"{warmup_seconds:.1f} s at install; load {installed_load:.1f})", "s",
            installed[0]["total"] + installed[1]["total"], target="≤ 15 s"))
        for command, run_phases, phases in (("identify", cold_identify, IDENTIFY_PHASES),
                                            ("synthesize", cold_synthesize, SYNTHESIZE_PHASES)):
            measurements.append(Measurement(f"  {command} first run", "s", run_phases["total"]))
            for phase in phases:
                if phase in run_phases:
                    measurements.append(Measurement(f"    {command} first run: {phase}", "s",
                                                    max(run_phases[phase], 1e-6)))
    return measurements


if __name__ == "__main__":
    from bench.common import machine

    print(f"machine: {machine()}; load average {os.getloadavg()}")
    for measurement in run(smoke="--smoke" in sys.argv):
        print("  " + measurement.line())
