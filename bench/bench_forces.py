"""Identification with the bar forces in the cost against without, in the same run.

One synthetic trial with bar forces (``bemore trial synth --bar-forces``: 1.6 s, 1 mm marker
noise, 2 % force noise, seed 1) is prepared once; the same identification (seed protocol
200 × 50 and the default polish from 5 starts, one integrator step per 2 samples in the
search) runs on it three ways, alternated: ``[forces] use = false`` (markers only), the force
term with least squares (``chain_noise = false``) and the default, the force term with the
chain-noise weighting; the median wall time of each is reported (the machine is shared: the
load average is printed). The force term costs the simulation's free-coordinate outputs (the
search's cost otherwise keeps only the running sum of squared distances), 2 more residuals per
frame and 2 more start unknowns (the bar's start velocity); every polish uses the exact
Jacobian. The weighting adds its K noisy copies of the trial through the trial chain and their
simulation, and the rank-K product on every residual and Jacobian of the polish.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import Measurement


def run(smoke: bool) -> list[Measurement]:
    """Median identification times (s) with and without the force term, alternated."""
    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.run import RunSettings, identify
    from bemore.identify.space import ParameterSpace
    from bemore.settings import ForceTerm, load_gymnast, load_identification
    from bemore.trial import prepare_trial
    from bemore.trial.synthetic import SyntheticSpec, write_synthetic_trial

    spec = SyntheticSpec(duration_s=1.6, bar_forces=True, force_noise_pct=2.0, seed=1)
    with tempfile.TemporaryDirectory() as folder:
        path, _, _ = write_synthetic_trial(spec, Path(folder) / "forces.c3d")
        trial = prepare_trial(path)
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    settings = (RunSettings(pack=10, iterations=2, polish_iterations=2, polish_starts=1)
                if smoke else RunSettings(seed=1))
    terms = {"markers only": ForceTerm(use=False),
             "least squares": ForceTerm(use=True, chain_noise=False),
             "weighted": ForceTerm(use=True, chain_noise=True)}
    problems = {name: IdentificationProblem.from_trial(trial, space, samples_per_step=2,
                                                       forces=term)
                for name, term in terms.items()}
    times: dict[str, list[float]] = {name: [] for name in terms}
    loads = []
    for _ in range(1 if smoke else 3):
        for name in terms:
            loads.append(os.getloadavg()[0])
            start = time.perf_counter()
            identify(problems[name], settings)
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(values) for name, values in times.items()}
    load = f"load {min(loads):.1f}–{max(loads):.1f}"
    return [
        Measurement(f"identify with bar forces, chain-noise weighting (the default; 200 × 50 "
                    f"+ polish; {load})", "s", median["weighted"], median["markers only"],
                    "markers only, same trial"),
        Measurement(f"identify with bar forces, least squares (200 × 50 + polish; {load})",
                    "s", median["least squares"], median["markers only"],
                    "markers only, same trial"),
    ]
