"""One synthesis from an athlete to its written gesture: what ``bemore synthesize`` and
``bemore batch`` both run.

:func:`synthesis_options` assembles the run's options from the configuration and the caller's
choices, :func:`run_synthesis` runs :func:`bemore.synthesis.synthesize.synthesize` (in this
process or on a Dask cluster) and writes profiles.csv, :func:`write_gesture_setpoints` writes the
setpoints ``bemore drive`` plays with their header; the callers add what is theirs (the console
summary, the bench requirements, the figures, the records database, the exit code).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bemore.paths import check_output_folder, output_folder
from bemore.settings import Solver
from bemore.synthesis.synthesize import SynthesisOptions

SETPOINT_RATE_HZ = 1000.0
"""Sample rate (Hz) of profiles.csv and setpoints.csv."""

FILES = ("profiles.csv", "setpoints.csv", "gesture.json")
"""The result's files in the output folder, shown writable before the synthesis."""


def synthesis_options(solver: Solver, *, method: str | None = None,
                      objective: str | None = None, starts: int | None = None,
                      seed: int | None = None, gradients: str | None = None,
                      **choices: Any) -> SynthesisOptions:
    """The run's options: the configuration's ``[solver]`` with the caller's ``method``,
    ``objective``, ``starts``, ``seed`` and ``gradients`` (None or 0 starts: the file's), and
    any other :class:`SynthesisOptions` field in ``choices``."""
    return SynthesisOptions(
        method=method or solver.method,
        objective=objective or solver.objective,
        starts=starts or solver.starts,
        seed=solver.seed if seed is None else seed,
        gradients=gradients or solver.gradients,
        **choices,
    )


class Synthesized(NamedTuple):
    """What :func:`run_synthesis` found."""

    result: Any  # SynthesisResult
    problem: Any  # the fine GestureProblem
    profiles: Any  # Profiles sampled at SETPOINT_RATE_HZ


def run_synthesis(athlete: Any, synthesis: Any, options: SynthesisOptions, out_dir: Path,
                  config_path: str | Path | None = None,
                  dask_address: str | None = None, write: bool = True) -> Synthesized:
    """Synthesize the gesture of ``athlete`` (AthleteParameters) with ``synthesis`` (the
    configuration read from ``config_path``) and ``options``, evaluating the designs on the
    Dask scheduler at ``dask_address`` when given (recorded in ``result.inputs["evaluator"]``);
    write ``out_dir``/profiles.csv (created if needed). ``out_dir`` and the FILES in it are
    shown writable before the synthesis (:func:`bemore.paths.check_output_folder`: a DataError
    at once, nothing left behind). gesture.json and setpoints.csv are the caller's to write,
    once the result is complete; ``write=False``: profiles.csv too (``bemore synthesize``
    writes the three as one set)."""
    from bemore.synthesis.outputs import write_profiles
    from bemore.synthesis.synthesize import synthesize

    check_output_folder(out_dir, FILES)
    evaluator = None
    if dask_address:
        from bemore.evaluate import make_evaluator

        evaluator = make_evaluator(dask_address)
    try:
        result, problem = synthesize(athlete, synthesis, options, config_path, evaluator)
        if evaluator is not None:
            result.inputs["evaluator"] = evaluator.describe()
    finally:
        if evaluator is not None:
            evaluator.close()
    profiles = problem.profiles(problem.vector(result.design), SETPOINT_RATE_HZ)
    if write:
        write_profiles(output_folder(out_dir) / "profiles.csv", profiles)
    return Synthesized(result, problem, profiles)


def write_gesture_setpoints(path: Path, profiles: Any, athlete: str, result: Any) -> Path:
    """Write setpoints.csv (:func:`gesture_setpoints_text`) atomically. Returns the path."""
    from bemore.paths import write_file

    return write_file(path, gesture_setpoints_text(profiles, athlete, result))


def gesture_setpoints_text(profiles: Any, athlete: str, result: Any) -> str:
    """setpoints.csv (``bemore-setpoints 1``, SETPOINT_RATE_HZ) of the gesture ``result`` for
    the athlete named ``athlete``, its header naming the design (s, deg) and the objective."""
    from bemore.synthesis.outputs import setpoints_text

    design = result.design
    phi_max_deg = float(np.rad2deg(design.max_flexion_rad))
    return setpoints_text(
        profiles,
        SETPOINT_RATE_HZ,
        athlete,
        f"clear hip circle, t_f {design.final_time_s:.3f} s, t_flexmax "
        f"{design.flexion_end_time_s:.3f} s, phi_max {phi_max_deg:.1f} deg",
        {
            "final_time_s": f"{design.final_time_s:.6f}",
            "flexion_end_time_s": f"{design.flexion_end_time_s:.6f}",
            "max_flexion_deg": f"{phi_max_deg:.4f}",
            "objective": f"{result.objective} {result.objective_value:.6g} "
            f"{result.objective_unit}",
        },
    )
