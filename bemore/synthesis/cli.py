"""``bemore synthesize``: the optimal shoulder gesture of an athlete, and its bench setpoints."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np

from bemore import drawing as figures_child
from bemore.errors import ConfigError
from bemore.settings import load_identification, load_synthesis
from bemore.synthesis.athlete import default_parameters, load_athlete
from bemore.synthesis.results import OBJECTIVES, SynthesisResult

if TYPE_CHECKING:
    from bemore.synthesis.problem import GestureProblem


def summary_lines(
    result: SynthesisResult,
    seed: dict[str, float],
    seed_rotation_deg: float,
    bounds: dict[str, tuple[float, float]],
) -> list[str]:
    """The seed's Table 10 layout: bemore's optimum, its position in the bounds, the seed's."""
    design = result.design
    rows = [
        ("t_f (s)", design.final_time_s, bounds["final_time_s"], seed["final_time_s"]),
        (
            "t_flexmax (s)",
            design.flexion_end_time_s,
            bounds["flexion_end_time_s"],
            seed["flexion_end_time_s"],
        ),
        (
            "phi_max (deg)",
            np.rad2deg(design.max_flexion_rad),
            bounds["max_flexion_deg"],
            seed["max_flexion_deg"],
        ),
    ]
    if "mid_fraction_flexion" in result.design_position:
        for name in ("mid_fraction_flexion", "mid_fraction_extension"):
            rows.append((name, getattr(design, name), bounds[name], 0.5))
    lines = [f"{'':22}{'bemore':>12}  {'within bounds':<22}{'seed (fmincon)':>15}"]
    for label, value, (low, high), seed_value in rows:
        position = (value - low) / (high - low)
        where = f"{position:4.0%} of [{low:g}, {high:g}]"
        lines.append(f"{label:22}{value:12.4f}  {where:<22}{seed_value:15.4g}")
    unit = result.objective_unit
    lines += [
        f"{'objective (' + unit + ')':22}{result.objective_value:12.4f}  {result.objective:<22}",
        f"{'rotation at t_f (deg)':22}{result.final_rotation_deg:12.4f}  {'band [360, 362]':<22}"
        f"{seed_rotation_deg:15.2f}",
        f"{'peak torque/shoulder':22}{result.peak_torque_per_shoulder_nm:12.1f}  {'N·m':<22}",
        f"{'iterations':22}{result.optimisation.nit:12d}",
        f"{'evaluations':22}{result.optimisation.nfev:12d}  {'':<22}{seed['evaluations']:15.0f}",
        f"{'engine calls':22}{result.engine_calls:12d}  {'(batched)':<22}",
        f"{'time (s)':22}{result.elapsed_s:12.2f}  {_time_split(result):<22}"
        f"{seed['elapsed_s']:15.2f}",
    ]
    return lines


def _time_split(result: SynthesisResult) -> str:
    """'start-up a + search b' (s) from the stage timings, or '' without them."""
    timings = result.timings_s
    if "startup" not in timings:
        return ""
    search = sum(value for name, value in timings.items() if name != "startup")
    return f"start-up {timings['startup']:.2f} + {search:.2f}"


def difference_sentence(
    result: SynthesisResult,
    seed: dict[str, float],
    seed_rotation_deg: float,
    seed_objective: float | None = None,
) -> str:
    """Why bemore's optimum may differ from the seed's, with the facts measured in this run."""
    same = (
        abs(result.design.final_time_s - seed["final_time_s"]) < 0.01
        and abs(result.design.flexion_end_time_s - seed["flexion_end_time_s"]) < 0.01
    )
    if same:
        return "bemore's optimum matches the seed's to within 10 ms."
    (band,) = [c for c in result.constraints if c.name == "rotation about the bar at t_f"]
    if band.lower <= seed_rotation_deg <= band.upper and seed_objective is not None:
        return (
            f"The seed's gesture is feasible here ({seed_rotation_deg:.1f} deg) but costs "
            f"{seed_objective:.1f} {result.objective_unit} against bemore's "
            f"{result.objective_value:.1f}: bemore's is the better optimum of this model."
        )
    return (
        f"The optimum differs from the seed's: the seed's gesture, simulated in this exemplary "
        f"model, turns {seed_rotation_deg:.1f} deg about the bar (band {band.lower:g}-"
        f"{band.upper:g} deg). The fall from a handstand at rest is near-critical: no model "
        "parameter moves that by more than a few degrees, but a start rotation rate of 4 deg/s "
        "(--start-rate 4) makes the seed's gesture turn 360 deg (docs/synthesis.md, physics "
        "check)."
    )


@click.command("synthesize")
@click.argument("athlete_json", required=False, type=click.Path(path_type=Path))
@click.option(
    "--synthesis-config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Synthesis TOML (default: configs/synthesis.toml).",
)
@click.option(
    "--objective",
    type=click.Choice(sorted(OBJECTIVES)),
    default=None,
    help="∫|C|dt (abs_torque_integral, default), peak |C|, or ∫C²dt.",
)
@click.option(
    "--method",
    type=click.Choice(["slsqp", "trust-constr", "pymoo"]),
    default=None,
    help="Multi-start SLSQP (default), multi-start trust-constr, or pymoo DE.",
)
@click.option(
    "--starts",
    type=click.IntRange(1, 1000),
    default=None,
    help="Number of starting points (default: from the config).",
)
@click.option(
    "--seed",
    type=click.IntRange(0),
    default=None,
    help="Seed of the starting points / global search (default: from the config).",
)
@click.option(
    "--gradients",
    type=click.Choice(["finite-difference", "exact"]),
    default=None,
    help="SLSQP's gradients: finite differences (faster here) or exact forward-mode derivatives "
    "(half the evaluations) (default: from the config, finite-difference).",
)
@click.option(
    "--free-midpoints",
    is_flag=True,
    help="Also optimise each phase's mid-interval value (the 8th degree's freedom).",
)
@click.option(
    "--start-rate",
    "start_rate_deg_s",
    type=float,
    default=0.0,
    show_default=True,
    metavar="DEG_PER_S",
    help="Rotation rate about the bar at the start (deg/s, in the circle's direction); "
    "0 = the handstand at rest.",
)
@click.option(
    "--torque-limit",
    "torque_limit",
    default=None,
    metavar="NM|athlete",
    help="Constrain the peak torque of each shoulder (N·m), or 'athlete' for the athlete "
    "profile's shoulder_torque_limit_Nm (--profile); default: no torque constraint.",
)
@click.option(
    "--profile",
    "profile_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Athlete profile TOML (her peak shoulder torque and range; default: the documented "
    "default athlete, controller/profile.py).",
)
@click.option(
    "--bench-config",
    type=click.Path(path_type=Path),
    default=None,
    help="Bench configuration the requirements are compared with "
         "(default: controller/configs/bench.toml).",
)
@click.option(
    "--segments",
    type=click.Choice(["identified", "table"]),
    default="identified",
    show_default=True,
    help="Lump the body with the athlete's identified trunk mass and CoMs, or with the "
    "segment table's (only the bar and shoulder springs identified, docs/synthesis.md).",
)
@click.option(
    "--model",
    "model_name",
    default=None,
    help="The real-gymnast description the athlete's values belong to, lumped into the "
    "exemplary model (default: the one athlete.json names, else real_gymnast).",
)
@click.option(
    "--accept-poor-fit",
    is_flag=True,
    help="Synthesize for an athlete whose identification was poor or interrupted (refused "
    "otherwise); gesture.json records it.",
)
@click.option("--no-animation", is_flag=True, help="Skip the animated GIF (gesture.gif).")
@click.option(
    "--dask",
    "dask_address",
    default=None,
    metavar="ADDRESS",
    help="Evaluate the designs on the Dask scheduler at ADDRESS (tcp://host:8786); "
    "default: in this process.",
)
@click.option(
    "--athlete",
    "athlete_name",
    default=None,
    metavar="NAME",
    help="The athlete in the records database: her profile (limits) instead of --profile, "
    "her latest identified model when ATHLETE_JSON is not given, and this run recorded under "
    "her name (docs/records.md). Default: none, no records.",
)
@click.option(
    "--db",
    "db_path",
    type=click.Path(path_type=Path),
    default=None,
    metavar="PATH",
    help="Records database for --athlete (default: $BEMORE_DB, else "
    "$XDG_DATA_HOME/bemore/records.sqlite).",
)
@click.option(
    "--out",
    "out_dir",
    default=Path("out/gesture"),
    show_default=True,
    type=click.Path(path_type=Path),
    help="Folder for the outputs (created if needed).",
)
def synthesize_command(
    athlete_json: Path | None,
    config_path: Path | None,
    objective: str | None,
    method: str | None,
    starts: int | None,
    seed: int | None,
    gradients: str | None,
    free_midpoints: bool,
    start_rate_deg_s: float,
    torque_limit: str | None,
    profile_path: Path | None,
    bench_config: Path | None,
    segments: str,
    model_name: str | None,
    accept_poor_fit: bool,
    no_animation: bool,
    dask_address: str | None,
    athlete_name: str | None,
    db_path: Path | None,
    out_dir: Path,
) -> None:
    """Synthesize the optimal shoulder gesture of a clear hip circle and its bench setpoints.

    \b
    Reads:  ATHLETE_JSON (written by `bemore identify`; without it, with --athlete NAME her
            latest model in the records, else the seed's identified values),
            configs/synthesis.toml (bounds, constraints, solver) or --synthesis-config,
            configs/identification.toml (parameter names and defaults).
    Writes: OUT/gesture.json (design, objective, constraints, the optimisers' report, inputs),
            OUT/profiles.csv (1 kHz: angle, velocity, acceleration, jerk, torques, rotation,
            bar displacement), OUT/setpoints.csv (what `bemore drive` plays, with the static
            torque for slow motion), OUT/plots/*.png, OUT/gesture.gif. gesture.json and the
            console give the bench requirements: peak/RMS torque, torque rate, velocity and
            power per shoulder against controller/configs/bench.toml and the athlete
            profile, and the modes, loads and speeds that pass (as `bemore drive --plan`).
            With --athlete, the run in the records (athlete.json read, gesture.json and
            setpoints.csv written, with their hashes).
            Exit code 1 if no feasible gesture exists (setpoints not written); with
            --torque-limit, one line then gives the lowest peak reachable within the bounds.
    Example:
        bemore synthesize out/identify/athlete.json --out out/gesture
    """
    from bemore.paths import on_interrupt

    # gesture.json, profiles.csv and setpoints.csv are written as one set once the result is
    # complete: until then a Ctrl-C leaves the folder as it was.
    on_interrupt(f"nothing was replaced in {out_dir}")
    # The engine and scipy load only when the command runs, not for `bemore --help`.
    from bemore.paths import (
        check_output_folder,
        ctrl_c_held,
        default_config,
        output_folder,
        write_together,
    )
    from bemore.phases import mark
    from bemore.profile import DEFAULT_PROFILE, load_profile
    from bemore.settings import load_bench
    from bemore.synthesis.outputs import (
        ANIMATION_FILE,
        PLOTS_FOLDER,
        gesture_json_text,
        profiles_text,
        setpoints_sha256,
    )
    from bemore.synthesis.pipeline import (
        FILES,
        gesture_setpoints_text,
        run_synthesis,
        synthesis_options,
    )

    # Before anything is read or said: an output folder it cannot write (its result files, the
    # figures' folder and animation) is the whole output, one line, not after the synthesis.
    out_dir = Path(out_dir)
    check_output_folder(out_dir, FILES + (() if no_animation else (ANIMATION_FILE,)),
                        (PLOTS_FOLDER,))

    records = None
    if athlete_name is not None:
        from bemore.records import open_athlete
        from bemore.records.store import latest_model_file, utc_now

        started_utc = utc_now()
        records, athlete_record = open_athlete(athlete_name, db_path, profile_path)
        if athlete_json is None:
            athlete_json = latest_model_file(records, athlete_record.name)
    synthesis = load_synthesis(config_path)
    identification = load_identification()
    profile = load_profile(profile_path) if profile_path else DEFAULT_PROFILE
    if records is not None:
        profile = athlete_record.to_profile()
    bench = load_bench(bench_config)
    athlete = (
        load_athlete(athlete_json, identification, accept_poor_fit)
        if athlete_json
        else default_parameters(identification)
    )
    if model_name is not None:
        from dataclasses import replace

        athlete = replace(athlete, model=model_name)
    options = synthesis_options(
        synthesis.solver, method=method, objective=objective, starts=starts, seed=seed,
        gradients=gradients, free_midpoints=free_midpoints,
        start_rate_deg_s=start_rate_deg_s,
        torque_limit_nm=_torque_limit(torque_limit, profile.shoulder_torque_limit_Nm),
        segments=segments,
    )
    click.echo(
        f"synthesizing ({options.method}, {options.objective}, {options.starts} start(s), "
        f"athlete: {athlete.source}) ..."
    )
    mark("synthesize", "start-up")
    result, problem, profiles = run_synthesis(athlete, synthesis, options, out_dir, config_path,
                                              dask_address, write=False)
    mark("synthesize", "synthesis")
    output_folder(out_dir)
    # The figures are drawn by a child process beside the result's writing (the other core),
    # into a folder of their own in OUT, moved into place once the result is written
    # (bemore.drawing.place); the command returns once both are done.
    figures = {
        "folder": out_dir / figures_child.STAGING, "profiles": profiles, "result": result,
        "athlete_json": athlete_json,
        "limits": {"athlete": profile.shoulder_torque_limit_Nm,
                   "bench": bench.limits.max_torque_nm},
        "animation": not no_animation,
    }
    # Everything loaded so far lives until the process ends: out of the collector's sight, the
    # child shares its pages with this process and the interpreter's teardown skips them
    # (0.2–0.3 s of CPU per run, docs/speed.md).
    gc.freeze()
    drawing = figures_child.start(lambda: _write_figures(**figures))
    gesture, profiles_csv, setpoints = (out_dir / name
                                        for name in ("gesture.json", "profiles.csv",
                                                     "setpoints.csv"))
    try:
        seed_result = synthesis.seed_result.model_dump()
        seed_rotation, seed_objective = _seed_evaluation(problem, seed_result)
        result.inputs["seed_gesture_rotation_deg"] = seed_rotation
        result.inputs["seed_gesture_objective"] = seed_objective
        bounds = _bounds(problem)
        for line in summary_lines(result, seed_result, seed_rotation, bounds):
            click.echo(line)
        click.echo(difference_sentence(result, seed_result, seed_rotation, seed_objective))

        def record(outcome: str) -> None:
            """With --athlete: the run in the records (what it read and wrote, with hashes)."""
            if records is None:
                return
            from bemore.records.register import register_synthesis

            register_synthesis(
                records, athlete_record.name, started_utc, athlete_json, out_dir,
                {"method": options.method, "objective": options.objective,
                 "starts": options.starts, "seed": options.seed,
                 "free_midpoints": free_midpoints, "start_rate_deg_s": start_rate_deg_s,
                 "torque_limit_nm": options.torque_limit_nm, "segments": segments,
                 "accept_poor_fit": accept_poor_fit},
                {"synthesis": str(config_path or default_config("synthesis.toml")),
                 "bench": str(bench_config or default_config("bench.toml"))}, outcome)
            click.echo(f"recorded in the records: {athlete_record.name}, {outcome} gesture")

        def write_set(contents: dict[Path, str]) -> None:
            """The result's files as one set (bemore.paths.write_together): the previous
            setpoints.csv removed first and the new one put in place last, so that a
            setpoints.csv in the folder is always the one gesture.json describes."""
            with ctrl_c_held():
                write_together(contents, remove=[setpoints])
                on_interrupt(f"after the result was written in {out_dir}")

        if not result.feasible:
            # The closest design, and no setpoints.csv (the previous one removed: no gesture
            # that this gesture.json does not describe is left to drive).
            write_set({gesture: gesture_json_text(result),
                       profiles_csv: profiles_text(profiles)})
            record("infeasible")
            failing = [s for s in result.constraints if not s.satisfied]
            for status in failing:
                allowed = (
                    f"≤ {status.upper:g}" if status.lower is None
                    else f"≥ {status.lower:g}" if status.upper is None
                    else f"[{status.lower:g}, {status.upper:g}]"
                )
                click.echo(
                    f"constraint failed: {status.name} = {status.value:.4f} {status.unit} "
                    f"(allowed {allowed})"
                )
            click.echo(
                f"bemore: no feasible gesture within the bounds; closest design written to "
                f"{gesture} (no setpoints.csv)",
                err=True,
            )
            if options.torque_limit_nm is not None:
                click.echo(_lowest_peak_line(athlete, synthesis, options, config_path), err=True)
            mark("synthesize", "outputs")
            sys.exit(1)
        from bemore.synthesis.requirements import bench_requirements, requirement_lines

        setpoints_csv = gesture_setpoints_text(profiles, athlete.source, result)
        # The bench's window is that of the file drive will read, checked before it is written.
        result.bench_requirements = bench_requirements(
            profiles,
            setpoints,
            bench,
            str(bench_config) if bench_config else "bench.toml",
            profile,
            text=setpoints_csv,
        )
        # On the screen first: a disk that refuses the files does not lose the numbers.
        click.echo(f"{result.message}")
        for line in requirement_lines(result.bench_requirements):
            click.echo(line)
        write_set({gesture: gesture_json_text(result, setpoints_sha256(setpoints_csv)),
                   profiles_csv: profiles_text(profiles), setpoints: setpoints_csv})
        record("feasible")
        click.echo(f"wrote {out_dir}/gesture.json, profiles.csv, setpoints.csv; plotting…")
        mark("synthesize", "outputs")
    except SystemExit:  # no feasible gesture: the figures show the closest design
        _finish_figures(drawing, figures, out_dir)
        raise
    except BaseException:
        _finish_figures(drawing, figures, out_dir, quietly=True)  # the first error is told
        raise
    _finish_figures(drawing, figures, out_dir)
    gc.freeze()


COACH_PLOT = "coach_view.png"
"""The coach's view (:func:`bemore.synthesis.outputs.write_coach_plot`) in the plots folder."""


def _write_figures(folder: Path, profiles: Any, result: SynthesisResult,
                   athlete_json: Path | None, limits: dict[str, float], animation: bool) -> None:
    """The plots (folder/plots/), the coach's view and the animated stick figure (folder/
    gesture.gif unless ``animation`` is False)."""
    from bemore.synthesis import outputs

    flexion_end = result.design.flexion_end_time_s
    plots = folder / outputs.PLOTS_FOLDER
    outputs.write_plots(plots, profiles, flexion_end, limits=limits)
    outputs.write_coach_plot(plots / COACH_PLOT, profiles, flexion_end,
                             _recorded_flexion(athlete_json))
    if animation:
        outputs.write_animation(folder / outputs.ANIMATION_FILE, profiles)


def _finish_figures(drawing: Any, figures: dict[str, Any], out_dir: Path,
                    quietly: bool = False) -> None:
    """Wait for the figures (:func:`bemore.drawing.finish`; drawn here without a child), drawn
    in ``figures["folder"]``, and move them into ``out_dir`` (:func:`bemore.drawing.place`,
    Ctrl-C held off); one line says what was written. A child that failed raises a
    BemoreError with its reason (exit code 1): the result already written stays as it is.
    ``quietly``: the command is ending on another error (the result not written): only wait
    for the child, its figures dropped."""
    from bemore.errors import BemoreError
    from bemore.paths import ctrl_c_held
    from bemore.phases import mark
    from bemore.synthesis.outputs import ANIMATION_FILE, PLOT_FILES, PLOTS_FOLDER

    staging = figures["folder"]
    if quietly:
        figures_child.abandon(drawing, staging)
        return
    names = [f"{PLOTS_FOLDER}/{name}" for name in (*PLOT_FILES, COACH_PLOT)]
    names += [ANIMATION_FILE] if figures["animation"] else []
    with ctrl_c_held():
        reason, placed = figures_child.finish_and_place(
            drawing, lambda: _write_figures(**figures), staging, out_dir, names)
    if reason is not None:
        drawn = f" ({len(placed)} of {len(names)} written)" if placed else ""
        raise BemoreError(f"the figures in {out_dir} were not written: {reason}{drawn}; "
                          "gesture.json, profiles.csv and setpoints.csv there are complete")
    mark("synthesize", "figures")
    click.echo(f"wrote {out_dir}/{PLOTS_FOLDER}/"
               + (f", {ANIMATION_FILE}" if figures["animation"] else ""))


def _recorded_flexion(athlete_json: Path | None) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(time s, shoulder flexion rad, source) of the trial the athlete's model was identified
    from: athlete.json's ``recorded_shoulder_flexion``, or for an athlete file written before
    it was recorded, the trial itself (``trial.source``) prepared again; None without a trial
    (the default athlete) or when it is no longer there."""
    import json

    if athlete_json is None:
        return None
    try:
        record = json.loads(Path(athlete_json).read_text(encoding="utf-8-sig"))
        source = record["trial"]["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    recorded = record.get("recorded_shoulder_flexion") if isinstance(record, dict) else None
    if isinstance(recorded, dict):
        try:
            t, q = (np.asarray(recorded[key], dtype=float) for key in ("t_s", "rad"))
        except (KeyError, TypeError, ValueError):
            return None
        return (t, q, str(source)) if t.shape == q.shape and t.size > 1 else None
    if not isinstance(source, str) or not Path(source).is_file():
        return None
    from bemore.trial import prepare_trial

    trial = prepare_trial(source)
    column = trial.driven_names.index("shoulder_flexion")
    return trial.t, trial.driven_q[:, column], source


def _lowest_peak_line(
    athlete: Any, synthesis: Any, options: Any, config_path: Path | None
) -> str:
    """One line: the lowest per-shoulder peak torque reachable within the bounds (found by
    minimising the peak with the other constraints kept) and what would have to change."""
    from dataclasses import replace

    from bemore.synthesis.synthesize import synthesize

    search = replace(options, objective="peak_torque", torque_limit_nm=None)
    lowest, _ = synthesize(athlete, synthesis, search, config_path)
    if not lowest.feasible:
        return (
            f"bemore: not even without the torque limit is a gesture feasible within the "
            f"bounds (closest peak {lowest.peak_torque_per_shoulder_nm:.1f} N·m per shoulder)"
        )
    at_bounds = [
        name for name, position in lowest.design_position.items()
        if position <= 1e-3 or position >= 1 - 1e-3
    ]
    where = (
        f"; at that gesture {' and '.join(at_bounds)} "
        f"{'is on its bound' if len(at_bounds) == 1 else 'are on their bounds'} in "
        f"{config_path or 'configs/synthesis.toml'}: widening "
        f"{'it' if len(at_bounds) == 1 else 'them'} may lower the peak"
        if at_bounds else ""
    )
    return (
        f"bemore: the lowest peak torque reachable within the bounds is "
        f"{lowest.peak_torque_per_shoulder_nm:.1f} N·m per shoulder (minimising the peak), above "
        f"the limit {options.torque_limit_nm:g} N·m: the limit must be at least that{where}"
    )


def _torque_limit(text: str | None, athlete_limit_nm: float) -> float | None:
    """Per-shoulder torque limit (N·m) from ``--torque-limit``: a number, or 'athlete' for
    ``athlete_limit_nm`` (her profile's peak shoulder torque)."""
    if text is None:
        return None
    if text.strip().lower() == "athlete":
        return float(athlete_limit_nm)
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value) or value <= 0.0:
        raise ConfigError(
            f"--torque-limit {text!r}: expected a positive number of N·m or 'athlete'"
        )
    return value


def _seed_evaluation(problem: GestureProblem, seed: dict[str, float]) -> tuple[float, float]:
    """Rotation about the bar (deg) and objective of the seed's optimal gesture in this model."""
    x = [seed["final_time_s"], seed["flexion_end_time_s"], np.deg2rad(seed["max_flexion_deg"])]
    x += [0.5] * (len(problem.names) - 3)
    evaluation = problem.evaluate_batch(np.array(x)[None])
    return float(evaluation.rotation_deg[0]), float(evaluation.objective[0])


def _bounds(problem: GestureProblem) -> dict[str, tuple[float, float]]:
    """Bounds by name for the summary (φ_max in degrees)."""
    bounds = {
        name: (float(lo), float(hi))
        for name, lo, hi in zip(problem.names, problem.lower, problem.upper, strict=True)
    }
    low, high = bounds.pop("max_flexion_rad")
    bounds["max_flexion_deg"] = (float(np.rad2deg(low)), float(np.rad2deg(high)))
    return bounds
