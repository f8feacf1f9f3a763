"""Do the identification's standard errors cover its errors? Coverage on synthetic trials.

Each trial is a clear hip circle of another athlete than the seed's (body mass 35–60 kg, segment
lengths ×0.93–1.10, the neck 0–7 cm beyond the shoulder joint, the twelve parameters drawn in the
box's middle), with 0.5–1.5 mm of marker noise, written as a C3D and read back through the
whole trial chain; the fit is told her body mass only. For every parameter marked identifiable,
z = (estimate − truth) / standard error; the figure is the share with |z| ≤ 3 (a 3-σ bound holds
for 99.7 % of the errors if the errors are honest), next to the same share with the white-noise
standard errors σ²(JᵀJ)⁻¹ of the same fits (the baseline). Also printed: each trial's verdict,
the largest |z| and where the bound fails.

``python -m bench coverage`` (16 trials, ≈ 10 s each on 2 idle cores); ``BEMORE_COVERAGE_TRIALS``
sets the number, ``BEMORE_COVERAGE_FIRST_SEED`` the first trial's seed (0; the standard errors'
input-noise factor was calibrated on seeds 0–13, so a check of it uses others).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from bench.common import Measurement


def _trial_spec(rng: np.random.Generator, seed: int):
    """A random athlete, convention and noise: (SyntheticSpec, body mass kg, parameters)."""
    from bemore.model.body import body_parameters, table_mass_kg
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial.synthetic import SyntheticSpec

    table = load_gymnast().segments
    identification = load_identification()
    body_mass = float(rng.uniform(35.0, 60.0))
    scale = float(rng.uniform(0.93, 1.10))
    offset = float(rng.uniform(0.0, 0.07))
    lengths = {name: scale * row.length_m for name, row in table.items()}
    lengths["trunk.neck_to_hip"] = scale * table["trunk"].length_m + offset
    parameters = body_parameters(table, body_mass, lengths)
    mass_scale = body_mass / table_mass_kg(table)
    for item in identification.parameters:
        if item.name == "neck.offset":
            continue
        seed_value = item.seed_value * (mass_scale if item.name == "trunk.mass" else 1.0)
        parameters[item.name] = float(seed_value * rng.uniform(0.8, 1.2))
    parameters["neck.offset"] = offset
    spec = SyntheticSpec(duration_s=float(rng.uniform(1.55, 1.8)), parameters=parameters,
                         noise_mm=float(rng.uniform(0.5, 1.5)), seed=seed,
                         starts={"forearm_length": scale * 0.206,
                                 "upper_arm_length": scale * 0.290})
    return spec, body_mass


def _one(seed: int, folder: Path, pack: int, iterations: int) -> dict:
    """Identify one random trial; z-scores with long-run and white-noise errors."""
    from bemore.errors import DataError
    from bemore.identify.identifiability import analyse
    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.run import RunSettings, _lowers, _values_and_widths, identify
    from bemore.identify.space import ParameterSpace
    from bemore.optimize.polish import finite_difference_jacobian
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial
    from bemore.trial.synthetic import write_synthetic_trial

    rng = np.random.default_rng(1000 + seed)
    spec, body_mass = _trial_spec(rng, seed)
    try:
        path, _, truth = write_synthetic_trial(spec, folder / f"coverage_{seed}.c3d")
    except DataError as error:  # a drawn body that cannot complete the circle
        return {"seed": seed, "skipped": str(error)}
    trial = prepare_trial(path)
    space = ParameterSpace.from_config(load_identification(), load_gymnast(),
                                       body_mass_kg=body_mass)
    problem = IdentificationProblem.from_trial(trial, space, samples_per_step=2,
                                               body_mass_kg=body_mass)
    outcome = identify(problem, RunSettings(pack=pack, iterations=iterations, seed=seed))
    jacobian, residuals, _ = finite_difference_jacobian(problem.residuals, outcome.x,
                                                        problem.lower, problem.upper)
    values, widths = _values_and_widths(problem, outcome.x)
    white = analyse(jacobian, residuals, problem.names, values, widths,
                    nuisance=problem.dim - space.dim, positions=outcome.x,
                    lowers=_lowers(problem))
    rows = {}
    for k, name in enumerate(space.names):
        item = outcome.identifiability.parameters[k]
        error = outcome.values[k] - truth.parameters[name]
        rows[name] = {"identifiable": item.identifiable,
                      "z": error / item.standard_error,
                      "z_white": error / white.parameters[k].standard_error}
    return {"seed": seed, "verdict": outcome.verdict.status, "noise_mm": spec.noise_mm,
            "mean_distance_mm": outcome.metrics["mean_distance_mm"], "rows": rows}


def run(smoke: bool = False) -> list[Measurement]:
    """Coverage of the 3-σ bounds over the trials (see the module docstring)."""
    trials = 1 if smoke else int(os.environ.get("BEMORE_COVERAGE_TRIALS", "16"))
    first = int(os.environ.get("BEMORE_COVERAGE_FIRST_SEED", "0"))
    pack, iterations = (20, 3) if smoke else (200, 50)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(first, first + trials):
            result = _one(seed, Path(folder), pack, iterations)
            results.append(result)
            if "rows" in result:
                worst = max(result["rows"].items(), key=lambda item: abs(item[1]["z"])
                            if item[1]["identifiable"] else 0.0)
                print(f"  trial {seed}: {result['verdict']}, noise {result['noise_mm']:.2f} mm, "
                      f"mean distance {result['mean_distance_mm']:.3f} mm, largest |z| among "
                      f"identifiable: {worst[0]} {worst[1]['z']:+.2f}", flush=True)
            else:
                print(f"  trial {seed}: skipped ({result['skipped']})", flush=True)
    z = [row["z"] for result in results if "rows" in result
         for row in result["rows"].values() if row["identifiable"]]
    z_white = [row["z_white"] for result in results if "rows" in result
               for row in result["rows"].values() if row["identifiable"]]
    if not z:
        return []
    inside = float(np.mean(np.abs(z) <= 3.0))
    inside_white = float(np.mean(np.abs(z_white) <= 3.0))
    print(f"  {len(z)} identifiable estimates over {len(results)} trials; |z| median "
          f"{np.median(np.abs(z)):.2f}, 95th percentile {np.percentile(np.abs(z), 95):.2f}, "
          f"largest {np.max(np.abs(z)):.2f} "
          f"(white-noise errors: {np.median(np.abs(z_white)):.2f}, "
          f"{np.percentile(np.abs(z_white), 95):.2f})")
    return [Measurement("share of identifiable estimates within 3 standard errors", "",
                        inside, inside_white, "white-noise errors", "≥ 0.99")]
