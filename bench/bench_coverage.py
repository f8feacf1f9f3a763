"""Do the identification's standard errors cover its errors? Coverage on synthetic trials.

Two sets of trials, each written as a C3D and read back through the whole trial chain:

* **random athletes**: a clear hip circle of another athlete than the seed's (body mass 35–60
  kg, segment lengths ×0.93–1.10, the neck 0–7 cm beyond the shoulder joint, the twelve
  parameters drawn in the box's middle), with 0.5–1.5 mm of marker noise; the fit is told her
  body mass only;
* **trunk side**: the acromion markers on the trunk's side of the shoulder springs (declared
  so; the arm's end from the elbow and the TRICEPS), with tests/identify/test_conventions.py's
  values for the neck at 3 cm and at 7 cm, each with noise seeds 3, 5, 6 and 8 (1 mm).

For every parameter marked identifiable, z = (estimate − truth) / standard error; the figures
are the shares with |z| ≤ 2 and ≤ 3 (95.4 % and 99.7 % if the errors are honest and normal).
Each standard error is compared in five forms, from the same fits: the one reported (``z``: the
propagated marker noise and the model error, the sandwich's part beyond what the noise puts
into it), the sandwich × 1.5 (``z_old``: the calibrated factor it replaces), the larger of the
sandwich and the propagated noise (``z_max``), their root sum of squares (``z_sum``, which counts
the target noise twice), and the white-noise σ²(JᵀJ)⁻¹ (``z_white``). Also printed: each
trial's verdict, the largest |z|, the median ratio of the reported standard errors to the
sandwich × 1.5, and the coverage of the identifiable estimates correlated beyond 0.95 with
another (admitted by the quadratic check, docs/identify.md "Identifiability").

``python -m bench coverage`` (16 + 8 trials, ≈ 10–20 s each on 2 idle cores);
``BEMORE_COVERAGE_TRIALS`` sets the number of random athletes (0: none),
``BEMORE_COVERAGE_FIRST_SEED`` the first one's seed (0), ``BEMORE_COVERAGE_TRUNK`` = 0 leaves
the trunk-side trials out.
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


TRUNK_SIDE_VALUES = {  # neck offset: the trial's own values (tests/identify/test_conventions.py)
    0.03: {"neck.offset": 0.03, "trunk.neck_to_hip": 0.458, "trunk.mass": 14.0,
           "bar.stiffness_x": 21000.0, "shoulder.stiffness_pd": 26000.0},
    0.07: {"neck.offset": 0.07, "trunk.neck_to_hip": 0.498, "trunk.mass": 11.5,
           "bar.stiffness_y": 27000.0, "shoulder.stiffness_ap": 21000.0},
}
TRUNK_SIDE_SEEDS = (3, 5, 6, 8)


def _one(seed: int, folder: Path, pack: int, iterations: int) -> dict:
    """Identify one random trial; its z-scores (see the module docstring)."""
    from bemore.errors import DataError

    rng = np.random.default_rng(1000 + seed)
    spec, body_mass = _trial_spec(rng, seed)
    try:
        return _fit(spec, body_mass, folder / f"coverage_{seed}.c3d", "arm", pack, iterations,
                    f"trial {seed}")
    except DataError as error:  # a drawn body that cannot complete the circle
        return {"label": f"trial {seed}", "skipped": str(error)}


def _trunk_side(neck_m: float, seed: int, folder: Path, pack: int, iterations: int) -> dict:
    """Identify one trunk-side trial (see the module docstring); its z-scores."""
    from bemore.trial.synthetic import SyntheticSpec

    spec = SyntheticSpec(duration_s=1.6, parameters=TRUNK_SIDE_VALUES[neck_m], noise_mm=1.0,
                         seed=seed, acromion_side="trunk")
    return _fit(spec, None, folder / f"trunk_{neck_m}_{seed}.c3d", "trunk", pack, iterations,
                f"trunk side, neck {neck_m * 100:g} cm, noise seed {seed}")


def _fit(spec, body_mass, path: Path, side: str, pack: int, iterations: int, label: str
         ) -> dict:
    """Write ``spec``'s trial at ``path``, identify it (acromions declared on ``side``) and
    give each parameter's identifiability and z-scores."""
    from bemore.identify.identifiability import MAX_CORRELATION, MAX_RELATIVE_ERROR, analyse
    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.run import RunSettings, _lowers, _values_and_widths, identify
    from bemore.identify.space import ParameterSpace
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial
    from bemore.trial.markerset import load_markerset
    from bemore.trial.synthetic import write_synthetic_trial

    path, _, truth = write_synthetic_trial(spec, path)
    markerset = None
    if side == "trunk":
        markerset = load_markerset()
        markerset = markerset.model_copy(update={"conventions": markerset.conventions.model_copy(
            update={"acromion_side": "trunk"})})
    trial = prepare_trial(path, markerset)
    space = ParameterSpace.from_config(load_identification(), load_gymnast(),
                                       body_mass_kg=body_mass)
    problem = IdentificationProblem.from_trial(trial, space, samples_per_step=2,
                                               body_mass_kg=body_mass)
    outcome = identify(problem, RunSettings(pack=pack, iterations=iterations, seed=spec.seed))
    residuals, jacobian = (a[0] for a in problem.jacobian(outcome.x[None, :]))
    values, widths = _values_and_widths(problem, outcome.x)
    white = analyse(jacobian, residuals, problem.names, values, widths,
                    nuisance=problem.dim - space.dim, positions=outcome.x,
                    lowers=_lowers(problem))
    rows = {}
    for k, name in enumerate(space.names):
        item = outcome.identifiability.parameters[k]
        error = outcome.values[k] - truth.parameters[name]
        old = 1.5 * item.standard_error_residuals
        # Flagged before for the same reasons but the relative error, which is the old one's.
        other = [reason for reason in item.reasons if not reason.startswith("relative")]
        rows[name] = {
            "identifiable": item.identifiable,
            "identifiable_old": not other and old / abs(outcome.values[k]) <= MAX_RELATIVE_ERROR,
            "z": error / item.standard_error,
            "z_old": error / old,
            "z_max": error / max(item.standard_error_residuals, item.standard_error_noise),
            "z_sum": error / np.hypot(item.standard_error_residuals, item.standard_error_noise),
            "z_white": error / white.parameters[k].standard_error,
            "ratio": item.standard_error / old,
            # Correlated beyond MAX_CORRELATION, identifiable because its quadratic check held.
            "correlated": abs(item.correlation) > MAX_CORRELATION,
        }
    return {"label": label, "verdict": outcome.verdict.status, "noise_mm": spec.noise_mm,
            "mean_distance_mm": outcome.metrics["mean_distance_mm"], "rows": rows}


def _shares(results: list[dict], key: str, flag: str) -> tuple[int, float, float]:
    """(count, share within 2, share within 3) of ``key``'s |z| over the estimates ``flag``
    marks identifiable."""
    z = np.abs([row[key] for result in results if "rows" in result
                for row in result["rows"].values() if row[flag]])
    if not z.size:
        return 0, float("nan"), float("nan")
    return int(z.size), float(np.mean(z <= 2.0)), float(np.mean(z <= 3.0))


def run(smoke: bool = False) -> list[Measurement]:
    """Coverage of the 2- and 3-σ bounds over the trials (see the module docstring)."""
    from bemore.identify.identifiability import MAX_CORRELATION

    trials = 1 if smoke else int(os.environ.get("BEMORE_COVERAGE_TRIALS", "16"))
    first = int(os.environ.get("BEMORE_COVERAGE_FIRST_SEED", "0"))
    trunk = not smoke and os.environ.get("BEMORE_COVERAGE_TRUNK", "1") != "0"
    pack, iterations = (20, 3) if smoke else (200, 50)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        jobs = [lambda seed=seed: _one(seed, Path(folder), pack, iterations)
                for seed in range(first, first + trials)]
        if trunk:
            jobs += [lambda neck=neck, seed=seed: _trunk_side(neck, seed, Path(folder), 100, 30)
                     for neck in TRUNK_SIDE_VALUES for seed in TRUNK_SIDE_SEEDS]
        for job in jobs:
            result = job()
            results.append(result)
            if "rows" in result:
                worst = max(result["rows"].items(), key=lambda item: abs(item[1]["z"])
                            if item[1]["identifiable"] else 0.0)
                print(f"  {result['label']}: {result['verdict']}, noise "
                      f"{result['noise_mm']:.2f} mm, mean distance "
                      f"{result['mean_distance_mm']:.3f} mm, largest |z| among identifiable: "
                      f"{worst[0]} {worst[1]['z']:+.2f} (sandwich × 1.5: "
                      f"{worst[1]['z_old']:+.2f})", flush=True)
            else:
                print(f"  {result['label']}: skipped ({result['skipped']})", flush=True)
    groups = {"all": results,
              "random athletes": [r for r in results if not r["label"].startswith("trunk")],
              "trunk side": [r for r in results if r["label"].startswith("trunk")]}
    measurements = []
    for group, members in groups.items():
        if not any("rows" in r for r in members):
            continue
        shares = {key: _shares(members, key, flag) for key, flag in (
            ("z", "identifiable"), ("z_old", "identifiable_old"), ("z_max", "identifiable"),
            ("z_sum", "identifiable"), ("z_white", "identifiable"))}
        text = ", ".join(f"{key} {n} estimates: {two:.1%} within 2, {three:.1%} within 3"
                         for key, (n, two, three) in shares.items())
        print(f"  {group}: {text}")
        admitted = [(r["label"], name, row["z"]) for r in members if "rows" in r
                    for name, row in r["rows"].items() if row["identifiable"] and row["correlated"]]
        if admitted:
            z = np.abs([item[2] for item in admitted])
            print(f"  {group}: {len(admitted)} identifiable estimates correlated beyond "
                  f"{MAX_CORRELATION} (their quadratic check held): {np.mean(z <= 2.0):.1%} "
                  f"within 2, {np.mean(z <= 3.0):.1%} within 3, largest |z| {z.max():.2f}")
        if group == "all":
            ratios = [row["ratio"] for r in members if "rows" in r for row in r["rows"].values()
                      if row["identifiable"]]
            print(f"  median ratio of the reported standard errors to the sandwich × 1.5 "
                  f"(identifiable estimates): {np.median(ratios):.2f}")
            measurements.append(Measurement(
                "share of identifiable estimates within 3 standard errors", "",
                shares["z"][2], shares["z_old"][2], "sandwich × 1.5", "≥ 0.99"))
    return measurements
