"""Assemble and write the files of an identification run into its output folder."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from bemore.identify import report
from bemore.identify.problem import IdentificationProblem
from bemore.identify.run import Fit, Outcome, RunSettings
from bemore.paths import output_folder

FILES = (
    "athlete.json",
    "convergence.csv",
    "summary.txt",
    "trajectories.png",
    "stick_figures.png",
    "convergence.png",
)
"""Every file ``bemore identify`` writes in its output folder."""


def athlete_record(
    outcome: Outcome,
    problem: IdentificationProblem,
    settings: RunSettings,
    trial: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    """The content of athlete.json (JSON-ready)."""
    global_result = outcome.global_result.to_dict()
    global_result.pop("history")
    polish = None
    if outcome.polish_result is not None:
        polish = outcome.polish_result.to_dict()
        polish.pop("history")
    status = outcome.polish_result or outcome.global_result
    record: dict[str, Any] = {
        "format": report.ATHLETE_FORMAT,
        "parameters": report.parameter_rows(problem.space, outcome.values, outcome.identifiability,
                                            getattr(problem, "held", [])),
        # Parameters the trial cannot determine (not fitted, held at their seed values):
        # `bemore synthesize` refuses the athlete unless --accept-poor-fit.
        "unobservable_parameters": [item["name"] for item in getattr(problem, "held", [])],
        "initial_state": outcome.initial_state,
        # Model parameters measured on the trial and kept by the fit (SI; e.g. the neck-to-hip
        # distance): the athlete's body as her markers show it.
        "body": dict(getattr(problem, "body", {})),
        **outcome.metrics,
        # Does the model follow the trial? (bemore.identify.verdict; None: interrupted)
        "fit_verdict": outcome.verdict.to_dict() if outcome.verdict else None,
        "algorithm": settings.algorithm,
        "pack": settings.pack,
        "iterations": settings.iterations,
        "evaluations": outcome.evaluations,
        "analysis_evaluations": outcome.analysis_evaluations,
        "seed": settings.seed,
        "polish": settings.polish,
        "polish_jacobian": settings.polish_jacobian,  # exact | finite-difference
        "workers": settings.workers,
        # The search's cost only (global_run.fun, convergence.csv); the figures above are exact.
        "search_samples_per_step": getattr(problem, "samples_per_step", 1),
        "search_notes": list(getattr(problem, "notes", ())),
        "elapsed_s": outcome.elapsed_s,
        "interrupted": outcome.interrupted,
        # Ctrl-C during the analysis: the fit complete, no standard errors nor verdict.
        "analysis_interrupted": outcome.analysis_interrupted,
        # Ctrl-C while the chain-noise weighting's copies ran: the global run's best, unpolished.
        "polish_interrupted": outcome.polish_interrupted,
        "polish_coarse_first": settings.polish_coarse_first,
        # Samples per integrator step of the polish's first stage (1: no such stage ran).
        "polish_coarse_samples_per_step": (getattr(problem, "coarse_samples_per_step", 1)
                                           if settings.polish and settings.polish_coarse_first
                                           else 1),
        "polish_coarse_notes": list(getattr(problem, "coarse_notes", ())),
        "message": status.message,
        "global_run": global_result,
        "polish_run": polish,
        # Every polish start (the run's best distinct points): which won, what the others reached.
        "polish_starts": [asdict(start) for start in outcome.polish_starts],
        "identifiability": (outcome.identifiability.record() if outcome.identifiability
                            else None),
        # With bar forces: what the markers alone would flag (same Jacobian, joint-centre rows).
        "bar_forces": _bar_forces_record(outcome, problem),
        # The inertial mode (--inertial): every segment from the bar force, None when off.
        "inertial_parameters": _inertial_record(outcome),
        "trial": trial,
        # The shoulder flexion the trial recorded, which synthesize's coach view sets beside
        # the gesture (without reading the trial again).
        "recorded_shoulder_flexion": recorded_shoulder_flexion(problem),
        "config": config,
        "versions": report.versions(),
    }
    return record


RECORDED_FLEXION_STEP_S = 0.01
"""Time step (s) of athlete.json's ``recorded_shoulder_flexion`` (the markers' 100 Hz)."""


def recorded_shoulder_flexion(problem: IdentificationProblem) -> dict[str, Any] | None:
    """``{"t_s": [...], "rad": [...]}``: the shoulder flexion the fit was driven by, every
    RECORDED_FLEXION_STEP_S from the trial's start (None when the model drives no such
    coordinate)."""
    import numpy as np

    names = tuple(getattr(problem.model, "driven_coordinates", ()))
    if "shoulder_flexion" not in names:
        return None
    motion = problem.motion
    t = np.asarray(motion.t, dtype=float)
    q = np.asarray(motion.q, dtype=float).reshape(t.size, -1)[:, names.index("shoulder_flexion")]
    step = max(1, round(RECORDED_FLEXION_STEP_S / float(t[1] - t[0]))) if t.size > 1 else 1
    return {"t_s": [round(float(v), 6) for v in t[::step]],
            "rad": [round(float(v), 6) for v in q[::step]]}


def _bar_forces_record(outcome: Outcome, problem: IdentificationProblem
                       ) -> dict[str, Any] | None:
    """The force term's record (None when the cost had none): scales, fit, what it adds."""
    if not getattr(problem, "has_forces", False):
        return None
    markers_only = outcome.identifiability_markers_only
    errors = {}
    if markers_only is not None and outcome.identifiability is not None:
        alone = {item.name: item.relative_standard_error for item in markers_only.parameters}
        errors = {item.name: [alone[item.name], item.relative_standard_error]
                  for item in outcome.identifiability.parameters
                  if item.name not in outcome.identifiability.nuisance}
    return {
        "scale_m_per_n": [float(v) for v in problem.force_scale],
        "rms_residual_n": outcome.metrics.get("bar_force_rms_n"),
        # The channels' offsets (N), gains (%) and lag (ms) fitted with the parameters
        # (bemore.identify.force_channels); None: the channels taken as they read.
        "fitted_channel_errors": outcome.metrics.get("force_channel_errors"),
        "flagged_by_markers_alone": markers_only.flagged if markers_only else None,
        "made_identifiable_by_forces": outcome.made_identifiable_by_forces,
        # Relative standard error of each parameter: [markers alone, markers and forces].
        "relative_standard_errors": errors,
        "markers_only_identifiability": markers_only.record() if markers_only else None,
        # The errors-in-variables weighting the polish and the analysis used (None: none;
        # bemore.identify.chain_noise); the markers-alone analysis above is unweighted.
        "chain_noise_weighting": getattr(outcome, "chain_noise", None),
    }


def _inertial_record(outcome: Outcome) -> dict[str, Any] | None:
    """The inertial mode's result (SI), with the undetermined quantities listed."""
    if getattr(outcome, "inertial", None) is None:
        return None
    return {**asdict(outcome.inertial), "undetermined": outcome.inertial.undetermined}


def convergence_csv(outcome: Outcome) -> str:
    """convergence.csv: one row per iteration of the global run, then per evaluation of the
    kept polish start (its best is the lowest so far: it may start above the global best)."""
    rows = ["phase,iteration,evaluations,best_cost_m2,batch_best_m2,batch_mean_m2,elapsed_s"]
    offset, best = 0, float("inf")
    for phase, result in (("global", outcome.global_result), ("polish", outcome.polish_result)):
        if result is None:
            continue
        for item in result.history:
            best = min(best, item.best)
            rows.append(
                f"{phase},{item.iteration},{item.nfev + offset},{best:.10g},"
                f"{item.batch_best:.10g},{item.batch_mean:.10g},{item.elapsed_s:.4f}"
            )
        offset += result.nfev
    return "\n".join(rows) + "\n"


RESULT_FILES = ("convergence.csv", "summary.txt", "athlete.json")
"""The result's files, put in place together in this order (athlete.json, what synthesize
reads, last: once it is the new one, so are the others)."""
PLOT_FILES = ("trajectories.png", "stick_figures.png", "convergence.png")
"""The figures :func:`write_plots` draws."""
INTERRUPTED_FOLDER = "interrupted"
"""Where an interrupted run writes its files when the output folder holds a complete fit
(``OUT/interrupted/``): an interruption never replaces a complete athlete.json."""


def write_outputs(
    out_dir: Path,
    outcome: Outcome,
    problem: IdentificationProblem,
    settings: RunSettings,
    trial: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    """Write athlete.json, convergence.csv, summary.txt and the three plots; return the record."""
    record = write_results(out_dir, outcome, problem, settings, trial, config)
    write_plots(out_dir, outcome, problem, settings)
    return record


def write_results(
    out_dir: Path,
    outcome: Outcome,
    problem: IdentificationProblem,
    settings: RunSettings,
    trial: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    """Write athlete.json, convergence.csv and summary.txt (no plots) as one set
    (:func:`write_result_set`); return the record."""
    record = athlete_record(outcome, problem, settings, trial, config)
    write_result_set(out_dir, record, outcome)
    return record


def write_result_set(out_dir: Path, record: dict[str, Any], outcome: Outcome) -> list[Path]:
    """Write RESULT_FILES of ``record`` into ``out_dir`` (made if needed) as one set: every
    file written whole before any is replaced (:func:`bemore.paths.write_together`), so a full
    disk is one DataError naming the file, the previous files kept. Returns the paths."""
    from bemore.paths import write_together

    output_folder(out_dir)
    texts = {"convergence.csv": convergence_csv(outcome),
             "summary.txt": report.summary_text(record) + "\n",
             "athlete.json": report.json_text(record)}
    return write_together({out_dir / name: texts[name] for name in RESULT_FILES})


def _interrupted_mark(path: Path) -> bool | None:
    """The ``interrupted`` mark of the athlete.json at ``path``: True or False, None when
    there is no readable athlete.json there."""
    import json

    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record.get("interrupted") if isinstance(record, dict) else None


def complete_fit(path: Path) -> bool:
    """True when ``path`` is an athlete.json of a run that ended (not interrupted; a poor fit
    is complete too)."""
    return _interrupted_mark(path) is False


def result_folder(out_dir: Path, interrupted: bool) -> Path:
    """Where a run's result goes: ``out_dir``, or for an ``interrupted`` run when ``out_dir``
    holds a complete fit (:func:`complete_fit`), ``out_dir/interrupted/``: the complete fit is
    kept, the interrupted one written beside it."""
    if interrupted and complete_fit(out_dir / "athlete.json"):
        return out_dir / INTERRUPTED_FOLDER
    return out_dir


def remove_interrupted(out_dir: Path) -> str | None:
    """After a complete run wrote its result in ``out_dir``: remove the stale result an earlier
    interrupted run left in ``out_dir/interrupted/`` (:func:`result_folder`) — its
    RESULT_FILES and PLOT_FILES, then the folder if nothing else is in it (files bemore did
    not write there are left). Only a folder whose athlete.json is marked interrupted is
    touched. Returns the line to print (``removed the interrupted run's result in
    OUT/interrupted/``), or None when there was none."""
    folder = out_dir / INTERRUPTED_FOLDER
    if _interrupted_mark(folder / "athlete.json") is not True:
        return None
    try:
        for name in (*RESULT_FILES, *PLOT_FILES):
            (folder / name).unlink(missing_ok=True)
        others = sorted(path.name for path in folder.iterdir())
        if not others:
            folder.rmdir()
    except OSError as error:
        return (f"the interrupted run's result in {folder}/ is stale (superseded by this run) "
                f"but could not be removed: {error.strerror or error}")
    left = f" (left there, not bemore's: {', '.join(others)})" if others else ""
    return f"removed the interrupted run's result in {folder}/{left}"


def write_plots(
    out_dir: Path, outcome: Outcome | Fit, problem: IdentificationProblem, settings: RunSettings
) -> None:
    """trajectories.png, stick_figures.png and convergence.png (drawn with Pillow) of the
    outcome, or of the fit before its analysis (:class:`~bemore.identify.run.Fit`, what
    ``bemore identify`` hands a child process drawing them meanwhile); ``out_dir`` is made if
    it is not there yet."""
    output_folder(out_dir)
    t = problem.motion.t
    index = [problem.model.point_names.index(name) for name in problem.cost_points]
    simulated = outcome.simulated_points[:, index]
    names = list(problem.cost_points)
    report.plot_trajectories(out_dir / "trajectories.png", t, problem.measured, simulated, names)
    report.plot_stick_figures(out_dir / "stick_figures.png", t, problem.measured, simulated)
    history = outcome.global_result.history
    nfev = [item.nfev for item in history]
    best = [item.best for item in history]
    if outcome.polish_result is not None:
        offset = outcome.global_result.nfev
        nfev += [item.nfev + offset for item in outcome.polish_result.history]
        best += [min(best[-1], item.best) for item in outcome.polish_result.history]
    label = f"{settings.algorithm} {settings.pack} × {settings.iterations}" + (
        " + least-squares polish" if settings.polish else ""
    )
    report.plot_convergence(out_dir / "convergence.png", nfev, best, label)
