"""One athlete of a batch: identify from the trial, then synthesize the gesture.

:func:`run_item` runs anywhere (this process or a Dask worker): it writes the outputs of
``bemore identify`` and ``bemore synthesize`` into a private temporary folder through the same
library calls, and returns them as bytes with one summary row, so that the machine running the
batch writes every file (no shared file system needed) and a worker's crash leaves nothing
half-written in the output folder. An athlete ``bemore synthesize`` would refuse (a poor fit,
unobservable parameters) is not synthesized: her identification's files come back with the
reason (:attr:`ItemResult.refused`), to be kept for the coach to inspect.
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

GESTURE = "gesture"  # the synthesis's subfolder of an athlete's folder


@dataclass
class ItemResult:
    """The files of one athlete (relative path → bytes) and its summary row; ``refused``: why
    her fit was not synthesized (the fit's one line, naming no file), None when it was."""

    athlete: str
    files: dict[str, bytes]
    row: dict[str, Any]
    refused: str | None = None


def item_outputs() -> tuple[str, ...]:
    """Relative paths of every file an item can write: ``bemore identify``'s
    (:data:`bemore.identify.outputs.FILES`), then the gesture's in ``gesture/``
    (:data:`bemore.synthesis.pipeline.FILES`) and its plots in ``gesture/plots/``
    (:data:`bemore.synthesis.outputs.PLOT_FILES`, in its ``PLOTS_FOLDER``)."""
    from bemore.identify.outputs import FILES
    from bemore.synthesis.outputs import PLOT_FILES, PLOTS_FOLDER
    from bemore.synthesis.pipeline import FILES as GESTURE_FILES

    return (*FILES, *(f"{GESTURE}/{name}" for name in GESTURE_FILES),
            *(f"{GESTURE}/{PLOTS_FOLDER}/{name}" for name in PLOT_FILES))


def run_item(spec: ItemSpec) -> ItemResult:
    """Identify and synthesize one athlete; see the module docstring.

    Raises the library's :class:`~bemore.errors.BemoreError` for bad input, and
    KeyboardInterrupt if Ctrl-C interrupted the identification (never a partial result). A fit
    that ``bemore synthesize`` would refuse is returned unsynthesized, ``refused`` saying why.
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
        identified, refused = _identify(spec, out)
        identify_s = time.perf_counter() - start
        gesture = {} if refused else _synthesize(spec, out)
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
    return ItemResult(athlete=spec.athlete, files=files, row=row, refused=refused)


def _identify(spec: ItemSpec, out: Path) -> tuple[dict[str, Any], str | None]:
    """``bemore identify`` of the item into ``out`` (the same library call,
    :func:`~bemore.identify.pipeline.run_identification`); returns the fit and the
    parameters, and why ``bemore synthesize`` would refuse the fit (None: it would not;
    :func:`bemore.synthesis.athlete.fit_record`)."""
    from bemore.identify.outputs import write_plots
    from bemore.identify.pipeline import Overrides, run_identification
    from bemore.synthesis.athlete import fit_record

    overrides = Overrides(algorithm=spec.algorithm, pack=spec.pack, iterations=spec.iterations,
                          seed=spec.seed, polish=spec.polish)
    outcome, problem, settings, record = run_identification(
        spec.trial, out, config=spec.identification_config, trial_config=spec.trial_config,
        markerset=spec.markerset, body_mass_kg=spec.body_mass_kg, profile=spec.profile,
        model_name=spec.model, overrides=overrides, in_process=True,
        extra_config={"batch_athlete": spec.athlete},
        polish_on="polish = true in her manifest line",
    )
    if outcome.interrupted:
        raise KeyboardInterrupt
    if spec.plots:
        write_plots(out, outcome, problem, settings)
    parameters = {
        f"{name} ({entry['unit']})": entry["value"] for name, entry in record["parameters"].items()
    }
    fit = fit_record(record, "athlete.json", accept_poor_fit=True)  # judged, not refused
    return {
        "fit": fit["status"],
        "cost_m2": record["cost_m2"],
        "mean_distance_mm": record["mean_distance_mm"],
        "evaluations": record["evaluations"],
        **parameters,
    }, fit["message"] if fit["accepted_by_flag"] else None


def _synthesize(spec: ItemSpec, out: Path) -> dict[str, Any]:
    """``bemore synthesize`` of the identified athlete into ``out/gesture`` (the same library
    calls, :mod:`bemore.synthesis.pipeline`); the gesture row."""
    from bemore.settings import load_identification, load_synthesis
    from bemore.synthesis.athlete import load_athlete
    from bemore.synthesis.outputs import PLOTS_FOLDER, write_gesture_json, write_plots
    from bemore.synthesis.pipeline import (
        run_synthesis,
        synthesis_options,
        write_gesture_setpoints,
    )

    synthesis = load_synthesis(spec.synthesis_config)
    identification = load_identification(spec.identification_config)
    athlete = load_athlete(out / "athlete.json", identification)
    options = synthesis_options(synthesis.solver, starts=spec.starts, seed=spec.synthesis_seed)
    folder = out / GESTURE
    result, _, profiles = run_synthesis(athlete, synthesis, options, folder,
                                        spec.synthesis_config)
    # The batch runs in a temporary folder: name the athlete by its place in the output folder.
    result.inputs["athlete"] = f"{spec.athlete}/athlete.json"
    write_gesture_json(folder / "gesture.json", result)
    if spec.plots:
        write_plots(folder / PLOTS_FOLDER, profiles, result.design.flexion_end_time_s)
    if result.feasible:
        write_gesture_setpoints(folder / "setpoints.csv", profiles,
                                f"{spec.athlete}/athlete.json", result)
    design = result.design
    return {
        "final_time_s": design.final_time_s,
        "flexion_end_time_s": design.flexion_end_time_s,
        "max_flexion_deg": float(np.rad2deg(design.max_flexion_rad)),
        f"objective ({result.objective_unit})": result.objective_value,
        "feasible": result.feasible,
    }


def describe_error(error: BaseException) -> str:
    """One line for a failed item: the library's message, or the exception's type and text."""
    if isinstance(error, BemoreError):
        return str(error)
    return f"{type(error).__name__}: {error}"
