"""What the marker noise's propagation costs ``bemore identify``, and how many copies it needs.

On the bundled sample (body mass 41.1 kg, the seed protocol then the polish), at the optimum:

* time: the propagation (:func:`bemore.identify.propagation.propagated_noise`, K = 32 copies
  through the trial chain and one engine call) against the analysis it is part of without it
  (the exact Jacobian at the optimum and :func:`bemore.identify.identifiability.analyse`);
  medians of 5 calls each (wall and CPU time), in the same process, BLAS on one thread as in
  ``identify``, the load average printed (the machine is shared);
* convergence in K: the propagated standard errors with K = 8, 16, 32, 64 copies, each from 4
  seeds of the noise draws; the figure is the median over the parameters of the seeds'
  relative spread (standard deviation / mean), against 1/√(2K) (a sample standard deviation's
  relative error with K normal draws).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import numpy as np

from bench.common import Measurement

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample_trial.c3d"


def _median_time(function, repeats: int = 5) -> tuple[float, float]:
    """Median wall time and median CPU time (s) of ``repeats`` calls of ``function``."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        function()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def run(smoke: bool = False) -> list[Measurement]:
    """Time and convergence of the propagation (see the module docstring)."""
    from threadpoolctl import threadpool_limits

    from bemore.identify.identifiability import analyse
    from bemore.identify.pipeline import build_problem
    from bemore.identify.propagation import propagated_noise
    from bemore.identify.run import RunSettings, _values_and_widths, identify
    from bemore.identify.space import ParameterSpace
    from bemore.settings import load_gymnast, load_identification

    space = ParameterSpace.from_config(load_identification(), load_gymnast(), body_mass_kg=41.1)
    problem, _ = build_problem(SAMPLE, space, samples_per_step=2, body_mass_kg=41.1)
    settings = RunSettings(pack=20, iterations=3) if smoke else RunSettings()
    x = identify(problem, settings).x
    values, widths = _values_and_widths(problem, x)
    frames = problem.measured.shape[0]

    def analysis():
        residuals, jacobian = (a[0] for a in problem.jacobian(x[None, :]))
        return analyse(jacobian, residuals, problem.names, values, widths,
                       nuisance=problem.dim - space.dim, frames=frames, positions=x)

    jacobian = problem.jacobian(x[None, :])[1][0]
    with threadpool_limits(limits=1, user_api="blas"):
        propagated_noise(problem, x, jacobian)  # the engine's tables for per-member motions
        repeats = 1 if smoke else 5
        before = os.getloadavg()[0]
        baseline, baseline_cpu = _median_time(analysis, repeats)
        added, added_cpu = _median_time(lambda: propagated_noise(problem, x, jacobian), repeats)
        after = os.getloadavg()[0]
        print(f"  propagation (K = 32) {added:.3f} s wall, {added_cpu:.3f} s CPU; analysis "
              f"without it {baseline:.3f} s wall, {baseline_cpu:.3f} s CPU (medians of "
              f"{repeats}; load average {before:.1f} → {after:.1f} on 2 cores)")
        measurements = [Measurement("noise propagation at the optimum (K = 32)", "s", added,
                                    baseline, "Jacobian + analyse", "≤ 0.3 s")]
        if smoke:
            return measurements
        for count in (8, 16, 32, 64):
            errors = np.array([
                np.sqrt(np.diag(propagated_noise(problem, x, jacobian, count, seed).covariance))
                for seed in range(4)])
            spread = np.median(errors.std(axis=0, ddof=1) / errors.mean(axis=0))
            print(f"  K = {count}: relative spread of the propagated standard errors over 4 "
                  f"seeds, median over the unknowns {spread:.1%} (1/√(2K) = "
                  f"{1 / np.sqrt(2 * count):.1%})", flush=True)
    return measurements
