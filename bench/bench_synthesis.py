"""Synthesis speed: bemore's batched SLSQP vs finite-difference SLSQP on a plain solve_ivp model.

Target (issue 6): the whole synthesis (multi-start SLSQP) in ≤ 0.5 s; the seed took 23.82 s
(0.067 s per evaluation). Measured here, in the same run:

* time per evaluation (one gesture simulated: objective and constraints) on the coarse 10 ms
  grid: bemore's batched evaluation (a lockstep batch of 32 designs, one engine call, per
  design) vs ``scipy.integrate.solve_ivp`` (LSODA, rtol 1e-6) driving the engine's hybrid
  dynamics ``model.hybrid`` as a plain right-hand side, one design;
* one start solved to convergence on the coarse problem: bemore (batched stencils, one engine
  call per SLSQP point) vs ``scipy.optimize.minimize(method="SLSQP")`` with its own 2-point
  finite differences on the solve_ivp evaluation (the baseline a newcomer would write), from
  the same start;
* the whole synthesis of ``bemore synthesize`` (default config: screening, 4 starts, polish,
  verification), warm, median wall and CPU time, engine calls; its baseline is not run (hours):
  the per-evaluation baseline times bemore's evaluation count is printed as an estimate;
* the start-up of a fresh process (imports, model, compiled kernels loaded from the cache),
  reported separately;
* ``bemore synthesize`` as a whole process, warm, WITH its plots and GIF (what a coach waits
  for), alternated with the tree of commit ``BASELINE_COMMIT`` run from a ``git archive`` with
  the same interpreter and kernel cache: medians of the wall time, of the CPU time (the process
  and the child drawing its figures) and of each phase (:mod:`bemore.phases`), the load average
  before each run; both must find the same gesture (gesture.json's design, to the digit).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import (
    REPOSITORY,
    Measurement,
    byte_compiled,
    commit_tree,
    median_time,
    run_child,
    time_bemore,
)

SEED_ELAPSED_S = 23.82
BASELINE_COMMIT = os.environ.get("BENCH_SYNTHESIS_BASELINE", "3af6784")
"""The tree the whole processes are alternated with (``BENCH_SYNTHESIS_BASELINE``; default main
before synthesize stopped importing scipy.optimize; d926d4c: before the figures were drawn with
Pillow in a forked child)."""
PHASES = ("start-up", "synthesis", "outputs", "plots", "animation", "figures", "exit")
START = np.array([3.0, 2.0, np.deg2rad(140.0)])  # the box centre, the first screened start


def _setup(step_s: float):
    from bemore.model import exemplary_parameters, load_model
    from bemore.settings import load_synthesis
    from bemore.synthesis.problem import GestureProblem

    model = load_model("exemplary_gymnast")
    P = model.parameter_matrix([exemplary_parameters()])
    return GestureProblem(model, P, load_synthesis(), step_s=step_s)


def _ivp_evaluate(problem, x: np.ndarray, t_end: float | None = None) -> tuple[float, float]:
    """Baseline evaluation: solve_ivp on the hybrid dynamics; (objective N·m·s, rotation deg)."""
    from scipy.integrate import solve_ivp

    from bemore.synthesis.gesture import gesture_kinematics
    from bemore.synthesis.problem import objective_value

    model, P = problem.model, problem.P
    t_f = float(x[0])
    t_m = min(float(x[1]), t_f - 0.05)

    def driven(t: np.ndarray) -> np.ndarray:
        return gesture_kinematics(np.atleast_1d(t), t_f, t_m, float(x[2]))[:, 0]

    def rhs(t: float, y: np.ndarray) -> np.ndarray:
        k = driven(np.array([t]))
        acc, _ = model.hybrid(
            P, y[None, :5], y[None, 5:], k[0][:, None], k[1][:, None], k[2][:, None]
        )
        return np.concatenate([y[5:], acc[0]])

    end = t_f if t_end is None else t_end
    grid = np.linspace(0.0, end, max(round(end / problem.step_s), 1) + 1)
    y0 = np.concatenate([problem.start.free_q0, problem.start.free_qd0])
    solution = solve_ivp(rhs, (0.0, end), y0, method="LSODA", t_eval=grid, rtol=1e-6, atol=1e-9)
    k = driven(grid)
    _, effort = model.hybrid(
        P, solution.y[:5].T, solution.y[5:].T, k[0][:, None], k[1][:, None], k[2][:, None]
    )
    value = float(objective_value("abs_torque_integral", effort[:, 0], grid))
    return value, float(np.rad2deg(solution.y[2, -1] - y0[2]))


def _baseline_slsqp(problem, x0: np.ndarray, iterations: int) -> tuple[float, int, int]:
    """scipy SLSQP (2-point finite differences) on the solve_ivp evaluation from x0:
    (seconds, iterations, evaluations)."""
    from scipy.optimize import minimize

    lower, upper = problem.lower, problem.upper
    span = upper - lower
    cache: dict[bytes, tuple[float, float]] = {}

    def evaluate(u: np.ndarray) -> tuple[float, float]:
        key = u.tobytes()
        if key not in cache:
            cache[key] = _ivp_evaluate(problem, lower + u * span)
        return cache[key]

    band_low, band_high = problem.rotation_band_deg
    constraints = [
        {"type": "ineq", "fun": lambda u: (evaluate(u)[1] - band_low) / 10.0},
        {"type": "ineq", "fun": lambda u: (band_high - evaluate(u)[1]) / 10.0},
        {
            "type": "ineq",
            "fun": lambda u: (lower[0] + u[0] * span[0]) - (lower[1] + u[1] * span[1]) - 0.5,
        },
    ]
    f0 = evaluate((x0 - lower) / span)[0]
    start = time.perf_counter()
    result = minimize(
        lambda u: evaluate(u)[0] / f0,
        (x0 - lower) / span,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * 3,
        constraints=constraints,
        options={"maxiter": iterations, "eps": 1e-6},
    )
    return time.perf_counter() - start, int(result.nit), len(cache)


def _whole_synthesis(gradients: str = "auto"):
    from bemore.settings import load_identification, load_synthesis
    from bemore.synthesis.athlete import default_parameters
    from bemore.synthesis.synthesize import SynthesisOptions, synthesize

    identification = load_identification()
    return synthesize(default_parameters(identification), load_synthesis(),
                      SynthesisOptions(gradients=gradients))[0]


def gradient_comparison(rounds: int = 7) -> list[Measurement]:
    """The whole synthesis with exact (forward-mode) gradients against finite-difference
    stencils, interleaved in this run: evaluations (designs simulated) and median wall time."""
    walls: dict[str, list[float]] = {"exact": [], "finite-difference": []}
    found = {}
    for _ in range(rounds):
        for gradients in walls:
            start = time.perf_counter()
            found[gradients] = _whole_synthesis(gradients)
            walls[gradients].append(time.perf_counter() - start)
    exact, fd = found["exact"].optimisation, found["finite-difference"].optimisation
    print(f"  gradients: exact {exact.nfev} evaluations ({exact.njev} Jacobians), objective "
          f"{exact.fun:.9g} at {np.round(exact.x, 6).tolist()} | finite differences "
          f"{fd.nfev} evaluations ({fd.njev} Jacobians), objective {fd.fun:.9g} at "
          f"{np.round(fd.x, 6).tolist()}")
    return [
        Measurement("whole synthesis, evaluations (designs simulated)", "evaluations",
                    exact.nfev, fd.nfev, "finite-difference stencils, same run",
                    "≤ half the finite-difference count (issue 19)"),
        Measurement("whole synthesis, exact gradients against finite differences, warm, "
                    "median wall", "s", statistics.median(walls["exact"]),
                    statistics.median(walls["finite-difference"]),
                    "finite-difference stencils, same run (interleaved)"),
    ]


def _fresh_process_seconds() -> float:
    """Wall time of a fresh interpreter that imports bemore and runs one synthesis (s)."""
    code = (
        "import time; c = time.perf_counter(); from bench.bench_synthesis import "
        "_whole_synthesis; _whole_synthesis(); print(time.perf_counter() - c)"
    )
    out = run_child([sys.executable, "-c", code])
    return float(out.stdout.strip().splitlines()[-1])


def synthesize_once(tree: Path | None, out: Path, options: list[str]) -> dict[str, float]:
    """``bemore synthesize OPTIONS --out OUT`` from ``tree`` (None: this checkout) as a whole
    process: wall ("total") and CPU ("cpu", the process and its waited-for children) in s, each
    phase's seconds, the load average before it ("load")."""
    from bemore.phases import durations

    run = time_bemore(tree, ["synthesize", *options], out)
    return {"total": run.total, "cpu": run.cpu, "load": run.load,
            **durations(run.marks, run.started_unix_s, run.total)}


def whole_processes(pairs: int, options: list[str]) -> list[Measurement]:
    """Alternated ``bemore synthesize`` runs, the baseline tree's then this checkout's, after one
    unmeasured pair (module docstring)."""
    samples: dict[str, list[dict[str, float]]] = {"baseline": [], "now": []}
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        tree = commit_tree(BASELINE_COMMIT, folder / "baseline-tree")
        byte_compiled(REPOSITORY)  # both trees as installed: bytecode compiled once
        for pair in range(pairs + 1):
            for name, source in (("baseline", tree), ("now", None)):
                sample = synthesize_once(source, folder / name, options)
                if pair:
                    samples[name].append(sample)
            designs = [json.loads((folder / name / "gesture.json").read_text())["design"]
                       for name in ("baseline", "now")]
            if designs[0] != designs[1]:
                raise RuntimeError(f"the gestures differ: {designs[0]} against {designs[1]}")
            figures = sorted(path.name for path in (folder / "now" / "plots").iterdir())
            if len(figures) != 8 or ("--no-animation" not in options
                                     and not (folder / "now" / "gesture.gif").is_file()):
                raise RuntimeError(f"figures missing after the command: {figures}")
    loads = [sample["load"] for name in samples for sample in samples[name]]
    print(f"  whole processes: {pairs} alternated pairs, load {min(loads):.1f}–{max(loads):.1f};"
          " the same gesture.json design in every run")
    for name in ("baseline", "now"):
        phases = [key for key in PHASES if any(key in sample for sample in samples[name])]
        print(f"  {'commit ' + BASELINE_COMMIT if name == 'baseline' else 'now':>15}, phase "
              "medians (s): " + ", ".join(
                  f"{key} {statistics.median(sample.get(key, 0.0) for sample in samples[name]):.2f}"
                  for key in phases))
    measurements = []
    for key, label in (("total", "synthesize, whole process with plots and GIF, wall"),
                       ("cpu", "synthesize, whole process, CPU time (with its figures' child)")):
        measurements.append(Measurement(
            f"{label} (median of {pairs})", "s",
            statistics.median(sample[key] for sample in samples["now"]),
            statistics.median(sample[key] for sample in samples["baseline"]),
            f"commit {BASELINE_COMMIT}", "≤ 1.2 s" if key == "total" else ""))
    return measurements


def run(smoke: bool) -> list[Measurement]:
    """Per-evaluation, per-solve and whole-synthesis figures of bemore next to the baseline."""
    from bemore.synthesis.solve import solve_multistart

    problem = _setup(step_s=0.05 if smoke else 0.01)
    rng = np.random.default_rng(0)
    batch = START + rng.uniform(-0.05, 0.05, (32, 3)) * np.array([1.0, 1.0, 0.1])
    problem.evaluate(batch)  # load the compiled kernels
    repeats = 3 if smoke else 9
    per_design = median_time(lambda: problem.evaluate(batch), repeats) / len(batch)
    single = median_time(lambda: problem.evaluate(START[None]), repeats)
    t_end = 0.02 if smoke else None  # smoke: only the first 0.02 s of the gesture
    baseline_eval = median_time(lambda: _ivp_evaluate(problem, START, t_end), 1 if smoke else 3)
    measurements = [
        Measurement(
            "time per evaluation, 32-design batch (one engine call)"
            + (" (smoke: baseline over 0.02 s only)" if smoke else ""),
            "s",
            per_design,
            baseline_eval,
            "solve_ivp LSODA + model.hybrid, one design",
            "seed 0.067 s",
        ),
        Measurement(
            "time per evaluation, one design alone", "s", single, baseline_eval,
            "solve_ivp LSODA + model.hybrid",
        ),
    ]
    if smoke:
        return measurements
    calls_before = problem.engine_calls
    start = time.perf_counter()
    outcome = solve_multistart(problem, START[None], tolerance=1e-6, max_iterations=40)
    bemore_solve = time.perf_counter() - start
    calls = problem.engine_calls - calls_before
    baseline_solve, baseline_iterations, baseline_evaluations = _baseline_slsqp(
        problem, START, 40
    )
    print(
        f"  one start to convergence: bemore {outcome.nit} iterations, "
        f"{outcome.nfev} evaluations in {calls} engine calls | baseline "
        f"{baseline_iterations} iterations, {baseline_evaluations} evaluations"
    )
    measurements.append(
        Measurement(
            "one start, SLSQP to convergence (coarse grid)",
            "s",
            bemore_solve,
            baseline_solve,
            "scipy SLSQP (2-point FD) on solve_ivp",
        )
    )
    walls, cpus, results = [], [], []
    for _ in range(7):
        wall, cpu = time.perf_counter(), time.process_time()
        results.append(_whole_synthesis())
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    last = results[-1]
    stages = {
        name: statistics.median(r.timings_s[name] for r in results) for name in last.timings_s
    }
    print(
        f"  whole synthesis: {last.optimisation.nfev} evaluations in {last.engine_calls} engine "
        f"calls ({last.optimisation.nbatch} batched requests); stage medians (s): "
        + ", ".join(f"{name} {value:.3f}" for name, value in stages.items())
        + f"; wall min {min(walls):.3f} s"
    )
    measurements.append(
        Measurement(
            "whole synthesis (screening, 4 starts, polish, verification), warm, median wall",
            "s",
            statistics.median(walls),
            baseline_eval * last.optimisation.nfev,
            "estimate: solve_ivp per evaluation × the same evaluation count",
            f"≤ 0.5 s (seed {SEED_ELAPSED_S} s)",
        )
    )
    measurements.append(
        Measurement(
            "whole synthesis, CPU time of the process (both cores), median",
            "s",
            statistics.median(cpus),
        )
    )
    measurements += gradient_comparison()
    measurements.append(
        Measurement(
            "start-up + one synthesis in a fresh process (imports, model, cached kernels)",
            "s",
            _fresh_process_seconds(),
        )
    )
    measurements += whole_processes(int(os.environ.get("BENCH_SYNTHESIZE_PAIRS", "5")), [])
    return measurements


if __name__ == "__main__":
    from bench.common import machine

    print(f"machine: {machine()}; load average {os.getloadavg()}")
    # --whole: only the whole processes against the baseline commit (PAIRS pairs, default 5)
    # --gradients: only the exact against finite-difference gradients comparison
    found = (whole_processes(int(os.environ.get("BENCH_SYNTHESIZE_PAIRS", "5")), [])
             if "--whole" in sys.argv else gradient_comparison()
             if "--gradients" in sys.argv else run(smoke="--smoke" in sys.argv))
    for measurement in found:
        print("  " + measurement.line())
