"""One athlete of a batch: identify from the trial, then synthesize the gesture.

:func:`run_item` runs anywhere (this process or a Dask worker): it writes the outputs of
``bemore identify`` and ``bemore synthesize`` into a private temporary folder through the same
library calls, and returns them as bytes with one summary row, so that the machine running the
batch writes every file (no shared file system needed) and a worker's crash leaves nothing
half-written in the output folder.
"""

from __future__ import annotations

import importlib
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bemore.batch.manifest import ItemSpec
from bemore.errors import BemoreError

SETPOINT_RATE_HZ = 1000.0


@dataclass
class ItemResult:
    """The files of one athlete (relative path → bytes) and its summary row."""

    athlete: str
    files: dict[str, bytes]
    row: dict[str, Any]


def run_item(spec: ItemSpec) -> ItemResult:
    """Identify and synthesize one athlete; see the module docstring.

    Raises the library's :class:`~bemore.errors.BemoreError` for bad input, and
    KeyboardInterrupt if Ctrl-C interrupted the identification (never a partial result).
    """
    # Load scipy's own BLAS now (scipy imports lazily), so that the pin below covers it too.
    for module in ("scipy.linalg", "scipy.optimize"):
        importlib.import_module(module)
    from threadpoolctl import threadpool_limits

    # One BLAS thread, wherever the item runs: LAPACK's rounding depends on its thread count,
    # and Dask workers start with 1 (OPENBLAS_NUM_THREADS=1) while this process may have more;
    # pinned, the same item gives bitwise the same numbers in-process and on any worker.
    with threadpool_limits(limits=1, user_api="blas"), tempfile.TemporaryDirectory(
        prefix=f"bemore-{spec.athlete}-"
    ) as folder:
        out = Path(folder)
        start = time.perf_counter()
        identified = _identify(spec, out)
        identify_s = time.perf_counter() - start
        gesture = _synthesize(spec, out)
        total_s = time.perf_counter() - start
        files = {
            str(path.relative_to(out)): path.read_bytes()
            for path in sorted(out.rglob("*"))
            if path.is_file()
        }
    row = {
        "athlete": spec.athlete,
        "trial": spec.trial,
        **identified,
        **gesture,
        "identify_s": round(identify_s, 3),
        "synthesize_s": round(total_s - identify_s, 3),
        "total_s": round(total_s, 3),
        "host": f"{socket.gethostname()}:{os.getpid()}",
    }
    return ItemResult(athlete=spec.athlete, files=files, row=row)


def _identify(spec: ItemSpec, out: Path) -> dict[str, Any]:
    """``bemore identify`` of the item into ``out``; returns the fit and the parameters."""
    from bemore.identify.run import RunSettings, identify
    from bemore.identify.space import ParameterSpace
    from bemore.paths import default_config
    from bemore.settings import load_gymnast, load_identification

    config_path = spec.identification_config or str(default_config("identification.toml"))
    identification = load_identification(config_path)
    defaults = identification.optimiser
    settings = RunSettings(
        algorithm=spec.algorithm or defaults.algorithm,
        pack=defaults.pack if spec.pack is None else spec.pack,
        iterations=defaults.iterations if spec.iterations is None else spec.iterations,
        seed=defaults.seed if spec.seed is None else spec.seed,
        polish=defaults.polish if spec.polish is None else spec.polish,
        workers=defaults.workers,
        polish_starts=defaults.polish_starts,
    )
    body_mass_kg = spec.body_mass_kg
    if body_mass_kg is None and spec.profile is not None:
        from bemore.profile import load_profile

        body_mass_kg = load_profile(spec.profile).body_mass_kg
    space = ParameterSpace.from_config(identification, load_gymnast(), config_path, body_mass_kg)
    problem, trial_summary = _problem(spec, space, defaults.samples_per_step, body_mass_kg)
    outcome = identify(problem, settings)
    if outcome.interrupted:
        raise KeyboardInterrupt
    config = {"identification": config_path, "batch_athlete": spec.athlete,
              "body_mass_kg": body_mass_kg, "model": spec.model}
    record = _write_identification(
        out, spec.plots, outcome, problem, settings, trial_summary, config
    )
    parameters = {
        f"{name} ({entry['unit']})": entry["value"] for name, entry in record["parameters"].items()
    }
    return {
        "cost_m2": record["cost_m2"],
        "mean_distance_mm": record["mean_distance_mm"],
        "evaluations": record["evaluations"],
        **parameters,
    }


def _write_identification(out: Path, plots: bool, *args: Any) -> dict[str, Any]:
    """``bemore identify``'s files from (outcome, problem, settings, trial, config).

    The three PNG plots only if ``plots``; the rest is written exactly as ``write_outputs`` does.
    """
    from bemore.identify import report
    from bemore.identify.outputs import athlete_record, convergence_csv, write_outputs

    if plots:
        return write_outputs(out, *args)
    record = athlete_record(*args)
    report.write_json(out / "athlete.json", record)
    (out / "convergence.csv").write_text(convergence_csv(args[0]), encoding="utf-8")
    (out / "summary.txt").write_text(report.summary_text(record) + "\n", encoding="utf-8")
    return record


def _problem(spec: ItemSpec, space: Any, samples_per_step: int,
             body_mass_kg: float | None) -> tuple[Any, dict[str, Any]]:
    """The identification problem of the item's prepared trial on the real-gymnast model,
    searched as ``bemore identify`` does (``samples_per_step`` samples per integrator step),
    the body scaled to ``body_mass_kg``."""
    from bemore.identify.problem import IdentificationProblem
    from bemore.model import load_model
    from bemore.trial import prepare_trial

    model = load_model(spec.model)
    trial = prepare_trial(spec.trial, spec.markerset, spec.trial_config)
    problem = IdentificationProblem.from_trial(trial, space, model,
                                               samples_per_step=samples_per_step,
                                               body_mass_kg=body_mass_kg)
    return problem, trial.summary()


def _synthesize(spec: ItemSpec, out: Path) -> dict[str, Any]:
    """``bemore synthesize`` of the identified athlete into ``out/gesture``; the gesture row."""
    from bemore.settings import load_identification, load_synthesis
    from bemore.synthesis.athlete import load_athlete
    from bemore.synthesis.outputs import (
        write_gesture_json,
        write_plots,
        write_profiles,
        write_setpoints,
    )
    from bemore.synthesis.synthesize import SynthesisOptions, synthesize

    synthesis = load_synthesis(spec.synthesis_config)
    identification = load_identification(spec.identification_config)
    athlete = load_athlete(out / "athlete.json", identification)
    solver = synthesis.solver
    options = SynthesisOptions(
        method=solver.method,
        objective=solver.objective,
        starts=spec.starts or solver.starts,
        seed=solver.seed if spec.synthesis_seed is None else spec.synthesis_seed,
    )
    result, problem = synthesize(athlete, synthesis, options, config_path=spec.synthesis_config)
    # The batch runs in a temporary folder: name the athlete by its place in the output folder.
    result.inputs["athlete"] = f"{spec.athlete}/athlete.json"
    folder = out / "gesture"
    folder.mkdir()
    profiles = problem.profiles(problem.vector(result.design), SETPOINT_RATE_HZ)
    write_gesture_json(folder / "gesture.json", result)
    write_profiles(folder / "profiles.csv", profiles)
    if spec.plots:
        write_plots(folder / "plots", profiles, result.design.flexion_end_time_s)
    design = result.design
    phi_max_deg = float(np.rad2deg(design.max_flexion_rad))
    if result.feasible:
        write_setpoints(
            folder / "setpoints.csv",
            profiles,
            SETPOINT_RATE_HZ,
            f"{spec.athlete}/athlete.json",
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
    return {
        "final_time_s": design.final_time_s,
        "flexion_end_time_s": design.flexion_end_time_s,
        "max_flexion_deg": phi_max_deg,
        f"objective ({result.objective_unit})": result.objective_value,
        "feasible": result.feasible,
    }


def describe_error(error: BaseException) -> str:
    """One line for a failed item: the library's message, or the exception's type and text."""
    if isinstance(error, BemoreError):
        return str(error)
    return f"{type(error).__name__}: {error}"
