"""One identification from a trial file to its written results: what ``bemore identify`` and
``bemore batch`` both run.

:func:`run_identification` reads the configuration, prepares the trial, builds the problem on
the model, runs :func:`bemore.identify.run.identify` (in this process or on a Dask cluster) and
writes athlete.json, convergence.csv and summary.txt; the callers add what is theirs (the
progress bar, the plots, the records database, the exit code).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from bemore.errors import ConfigError, DataError
from bemore.identify.run import Outcome, RunSettings, identify, worker_threads
from bemore.settings import Optimiser


@dataclass(frozen=True)
class Overrides:
    """Command-line choices that replace the identification file's ``[optimiser]`` values
    (None: the file's)."""

    algorithm: str | None = None
    pack: int | None = None
    iterations: int | None = None
    seed: int | None = None
    polish: bool | None = None
    workers: int | None = None
    inertial: bool | None = None  # the inertial mode (None: identification.toml [inertial])


def run_settings(optimiser: Optimiser, overrides: Overrides = Overrides()) -> RunSettings:
    """The run's settings: ``optimiser`` (the file's ``[optimiser]``) with ``overrides``;
    settings that cannot run raise one ConfigError line naming the option."""
    settings = RunSettings(
        algorithm=overrides.algorithm or optimiser.algorithm,
        pack=optimiser.pack if overrides.pack is None else overrides.pack,
        iterations=optimiser.iterations if overrides.iterations is None else overrides.iterations,
        seed=optimiser.seed if overrides.seed is None else overrides.seed,
        polish=optimiser.polish if overrides.polish is None else overrides.polish,
        workers=optimiser.workers if overrides.workers is None else overrides.workers,
        polish_starts=optimiser.polish_starts,
        polish_jacobian=optimiser.polish_jacobian,
        polish_coarse_first=optimiser.polish_coarse_first,
    )
    if settings.pack < 2:
        raise ConfigError(f"--pack {settings.pack}: a population needs at least 2 members")
    if settings.iterations < 1:
        raise ConfigError(f"--iterations {settings.iterations}: must be at least 1")
    if settings.seed < 0:
        raise ConfigError(f"--seed {settings.seed}: must be 0 or more")
    return settings


def build_problem(
    trial_path: str | Path, space: Any, markerset: str | Path | None = None,
    trial_config: str | Path | None = None, samples_per_step: int = 1,
    body_mass_kg: float | None = None, model_name: str | Path = "real_gymnast",
    forces: Any = None, shoulder_centre: dict[str, Any] | None = None,
    body_mass_uncertainty_kg: float | None = None, coarse_samples_per_step: int | None = None,
    segment_table: Any = None, soft_tissue: Any = None,
) -> tuple[Any, dict[str, Any]]:
    """Prepare the trial and build the identification problem on ``model_name`` (a built-in
    name or a description path; search cost: ``samples_per_step`` samples per integrator step,
    the polish's first stage ``coarse_samples_per_step``, None: the search's;
    the body scaled to ``body_mass_kg`` in kg, None: the segment table's; ``forces``: the
    bar-force term's settings, ``bemore.settings.ForceTerm``; ``shoulder_centre``: her
    profile's functional shoulder centre, used for the shoulder point;
    ``body_mass_uncertainty_kg``: kg, 1 SD, None: the configured default; ``segment_table``:
    how far her segments may be from the table's, ``bemore.settings.SegmentTableUncertainty``,
    None: the default file's; ``soft_tissue``: how far the markers may slide on the skin,
    ``bemore.settings.SoftTissueUncertainty``, None: the default file's). Returns the problem
    and the trial's summary."""
    from bemore.identify.problem import IdentificationProblem
    from bemore.model import load_model
    from bemore.trial import prepare_trial

    model = load_model(model_name)
    trial = prepare_trial(trial_path, markerset, trial_config, shoulder_centre)
    problem = IdentificationProblem.from_trial(trial, space, model,
                                               samples_per_step=samples_per_step,
                                               body_mass_kg=body_mass_kg, forces=forces,
                                               body_mass_uncertainty_kg=body_mass_uncertainty_kg,
                                               coarse_samples_per_step=coarse_samples_per_step,
                                               segment_table_uncertainty=None
                                               if segment_table is None else (
                                                   segment_table.mass, segment_table.com,
                                                   segment_table.gyration),
                                               soft_tissue_mm=None if soft_tissue is None
                                               else soft_tissue.by_point())
    return problem, trial.summary()


Runner = Callable[[Any, RunSettings], Outcome]
"""Runs :func:`~bemore.identify.run.identify` on (problem, settings), e.g. with a progress bar."""


class Identified(NamedTuple):
    """What :func:`run_identification` ran and found."""

    outcome: Outcome
    problem: Any  # the IdentificationProblem (wrapped for a Dask cluster when one was used)
    settings: RunSettings
    record: dict[str, Any]  # athlete.json's content


def run_identification(
    trial_path: str | Path,
    out: Path,
    *,
    config: str | Path | None = None,
    trial_config: str | Path | None = None,
    markerset: str | Path | None = None,
    body_mass_kg: float | None = None,
    body_mass_uncertainty_kg: float | None = None,
    profile: Any = None,
    model_name: str | Path = "real_gymnast",
    overrides: Overrides = Overrides(),
    dask_address: str | None = None,
    in_process: bool = False,
    run: Runner | None = None,
    extra_config: dict[str, Any] | None = None,
    polish_on: str = "without --no-polish",
    write: bool = True,
) -> Identified:
    """Identify the model from the trial at ``trial_path`` and write athlete.json,
    convergence.csv and summary.txt into ``out`` (no plots: :func:`bemore.identify.outputs.
    write_plots`). Returns (outcome, problem, settings, athlete record).

    ``config``: the identification TOML (default: configs/identification.toml);
    ``profile``: the athlete's profile (an :class:`~bemore.profile.AthleteProfile` or a TOML
    path), whose body mass (kg) applies when ``body_mass_kg`` is None;
    ``body_mass_uncertainty_kg``: how well that mass is known (kg, 1 SD; None: the file's
    ``[mass_budget]``, :func:`bemore.identify.problem.body_mass_uncertainty`); ``dask_address``:
    evaluate the populations on that Dask scheduler (default: the file's ``dask``, else this
    process; ``in_process``: in this process whatever the file says, as an item of a batch,
    itself the unit a cluster runs); ``run(problem, settings)`` runs the identification (default
    :func:`~bemore.identify.run.identify`); ``extra_config`` is added to the record's
    ``config``; ``polish_on``: how the user turns the polish on, in a poor fit's advice.
    ``out`` is shown writable first, before the trial is read
    (:func:`bemore.paths.check_output_folder`: a DataError at once, nothing left behind), and
    made when the results are written. A poor fit is told what it ran against the file's
    ``[optimiser]`` (:class:`bemore.identify.verdict.FitBudget`: a fit that stopped short of a
    minimum names that as its likely cause). The result is written even when
    interrupted or a poor fit: the caller decides; ``write=False``: not written, the caller
    writes it (``bemore identify``: after printing it, :func:`bemore.identify.outputs.
    write_result_set`).
    """
    from bemore.evaluate import EvaluatedProblem, make_evaluator
    from bemore.identify.outputs import FILES, athlete_record, write_results
    from bemore.identify.problem import body_mass_uncertainty
    from bemore.identify.space import ParameterSpace
    from bemore.identify.verdict import FitBudget
    from bemore.paths import check_output_folder, default_config
    from bemore.phases import mark
    from bemore.settings import load_gymnast, load_identification

    # Before any work: an output folder that cannot be written is said now, not after the fit.
    check_output_folder(out, FILES)
    config_path = config or default_config("identification.toml")
    identification = load_identification(config_path)
    gymnast = load_gymnast()
    if isinstance(profile, str | Path):
        from bemore.profile import load_profile

        profile = load_profile(profile)
    if body_mass_kg is None and profile is not None:
        body_mass_kg = profile.body_mass_kg
    defaults = identification.optimiser
    settings = run_settings(defaults, overrides)
    space = ParameterSpace.from_config(identification, gymnast, str(config_path), body_mass_kg)
    if body_mass_uncertainty_kg is None:
        body_mass_uncertainty_kg = body_mass_uncertainty(identification, gymnast.segments,
                                                         body_mass_kg)
    problem, trial_summary = build_problem(trial_path, space, markerset, trial_config,
                                           defaults.search_samples_per_step, body_mass_kg,
                                           model_name, identification.forces,
                                           profile.shoulder_centre if profile is not None
                                           else None, body_mass_uncertainty_kg,
                                           defaults.polish_coarse_samples_per_step,
                                           identification.segment_table,
                                           identification.soft_tissue)
    mark("identify", "trial")
    inertial_mode = (identification.inertial.identify if overrides.inertial is None
                     else overrides.inertial)
    if inertial_mode and not problem.has_forces:
        raise DataError(f"{trial_path}: the inertial mode needs the bar's force channels "
                        "(configs/trial.toml [forces]) and identification.toml [forces] "
                        "use = true; this trial has no bar forces")
    fitted = problem  # the problem itself, even when a Dask cluster evaluates its populations
    record_config = {
        "identification": str(config_path),
        "gymnast": str(default_config("gymnast.toml")),
        "trial": str(trial_config or default_config("trial.toml")),
        "markerset": str(markerset or default_config("markerset.toml")),
        "profile": profile.to_dict() if profile is not None else None,
        "model": str(model_name),
        "body_mass_kg": body_mass_kg,
        "body_mass_uncertainty_kg": body_mass_uncertainty_kg,
        "trunk_mass_upper_bound_kg": float(space.upper[space.names.index("trunk.mass")])
        if "trunk.mass" in space.names
        else None,
        "box": problem.space.describe(),
        "initial_state_box": problem.start.describe() if problem.start is not None else None,
        "identification_settings": identification.model_dump(),
        **(extra_config or {}),
    }
    # docs/scale.md: a lab hands population evaluation to a Dask cluster, nothing else changes.
    dask_address = None if in_process else dask_address or defaults.dask
    evaluator = make_evaluator(dask_address, worker_threads(settings.workers))
    try:
        if dask_address:
            problem = EvaluatedProblem(problem, evaluator)
        record_config["evaluator"] = evaluator.describe()
        outcome = (run or identify)(problem, settings)
        record_config["evaluator"] = evaluator.describe()
    finally:
        evaluator.close()
    if outcome.verdict is not None:
        # A poor fit that stopped short of a minimum is the fit's, not a body part's.
        polish = outcome.polish_result
        outcome.verdict = outcome.verdict.with_budget(FitBudget(
            outcome.global_result.nfev, defaults.pack, defaults.iterations, settings.polish,
            polish is None or polish.success, polish_on))
    if inertial_mode and not outcome.interrupted:
        from bemore.identify.inertial_mode import identify_inertial

        outcome.inertial = identify_inertial(fitted, outcome.x, identification.inertial)
        mark("identify", "inertial")
    record = (write_results(out, outcome, problem, settings, trial_summary, record_config) if write
              else athlete_record(outcome, problem, settings, trial_summary, record_config))
    return Identified(outcome, problem, settings, record)
