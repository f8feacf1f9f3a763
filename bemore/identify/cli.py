"""``bemore identify``: the command line over :func:`bemore.identify.run.identify`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from bemore.optimize.driver import ALGORITHMS


@click.command("identify")
@click.argument("trial", type=click.Path(path_type=Path))
@click.option(
    "--identification-config",
    "config",
    type=click.Path(path_type=Path),
    default=None,
    help="Identification TOML (default: configs/identification.toml).",
)
@click.option(
    "--trial-config",
    type=click.Path(path_type=Path),
    default=None,
    help="Trial preparation TOML (default: configs/trial.toml).",
)
@click.option(
    "--markerset-config",
    "markerset",
    type=click.Path(path_type=Path),
    default=None,
    help="Marker-set TOML (default: configs/markerset.toml).",
)
@click.option(
    "--body-mass",
    "body_mass_kg",
    type=click.FloatRange(10.0, 200.0),
    default=None,
    metavar="KG",
    help="The athlete's body mass (kg): the segment table's masses and the trunk-mass bounds "
    "scale to it (default: her profile's, else the table's 41.1 kg).",
)
@click.option(
    "--body-mass-uncertainty",
    "body_mass_uncertainty_kg",
    type=click.FloatRange(0.0, 50.0),
    default=None,
    metavar="KG",
    help="How well the body mass is known (kg, 1 SD), counted in every standard error "
    "(default: identification.toml [mass_budget] body_mass_uncertainty_kg, 0.2, for a body "
    "mass given; without one the table's total ± [inertial] mass_spread of it). With bar "
    "forces the bar mass needs it to a few hundredths of a kg (docs/identify.md).",
)
@click.option(
    "--profile",
    type=click.Path(path_type=Path),
    default=None,
    help="The athlete's profile TOML (body mass, stature, limits; configs/athlete.example.toml; "
    "default: none, the body mass from --body-mass or the segment table).",
)
@click.option(
    "--model",
    "model_name",
    default="real_gymnast",
    show_default=True,
    help="Model fitted: a built-in name or a description TOML (docs/model.md); its driven "
    "coordinates are matched to the trial's by name.",
)
@click.option("--algorithm", type=click.Choice(ALGORITHMS), default=None, help="Default: gwo.")
@click.option("--pack", type=int, default=None, help="Population size (default 200).")
@click.option("--iterations", type=int, default=None, help="Population evaluations (default 50).")
@click.option("--polish/--no-polish", default=None,
              help="Least-squares polish after the global run (default: on; --no-polish runs "
              "the seed protocol alone).")
@click.option("--seed", type=int, default=None, help="Random seed (default 0).")
@click.option("--inertial/--no-inertial", default=None,
              help="After the fit, identify every segment's mass, centre of mass and inertia "
              "from the trial's bar force, physically consistent (J ≻ 0), against the segment "
              "table (docs/identify.md, \"Inertial parameters\"; needs bar forces; default: "
              "identification.toml [inertial] identify, off).")
@click.option("--workers", type=int, default=None,
              help="Threads for the engine (0 = all cores; default: identification.toml's, "
              "all cores).")
@click.option(
    "--dask",
    "dask_address",
    default=None,
    metavar="ADDRESS",
    help="Evaluate populations on the Dask scheduler at ADDRESS (tcp://host:8786); "
    "default: in this process.",
)
@click.option("--athlete", default=None, metavar="NAME",
              help="The athlete in the records database: her profile (body mass) instead of "
              "--profile, and this run recorded under her name (trial and configs read, "
              "athlete.json written, with hashes; docs/records.md). Default: none, no records.")
@click.option("--db", "db_path", type=click.Path(path_type=Path), default=None, metavar="PATH",
              help="Records database for --athlete (default: $BEMORE_DB, else "
              "$XDG_DATA_HOME/bemore/records.sqlite).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("out/identify"),
              show_default=True, help="Output folder (created if needed).")
def identify_command(
    trial: Path,
    config: Path | None,
    trial_config: Path | None,
    markerset: Path | None,
    body_mass_kg: float | None,
    body_mass_uncertainty_kg: float | None,
    profile: Path | None,
    model_name: str,
    algorithm: str | None,
    pack: int | None,
    iterations: int | None,
    polish: bool | None,
    seed: int | None,
    inertial: bool | None,
    workers: int | None,
    dask_address: str | None,
    athlete: str | None,
    db_path: Path | None,
    out: Path,
) -> None:
    """Identify the gymnast model's parameters (identification.toml) from a motion-capture trial.

    \b
    Reads:  TRIAL (C3D, TRC or CSV; see docs/trials.md), configs/identification.toml (bounds,
            optimiser defaults), configs/gymnast.toml (segment table, scaled to the athlete's
            body mass and to the segment lengths her trial shows), --profile FILE (her body
            mass), configs/trial.toml and configs/markerset.toml (trial preparation).
    Writes: OUT/athlete.json (parameters, fit, identifiability, run record), OUT/convergence.csv,
            OUT/summary.txt, OUT/trajectories.png, OUT/stick_figures.png, OUT/convergence.png;
            with --athlete, the run in the records (trial and athlete.json with their hashes);
            with --inertial, every segment's inertial parameters (athlete.json
            inertial_parameters, summary.txt).
    Defaults: the seed protocol (Grey Wolf Optimizer, 200 wolves, 50 iterations), evaluated in
    this process on all cores; --dask ADDRESS evaluates the populations on a Dask cluster.
    A least-squares polish follows (--no-polish: the seed protocol alone). The fit is judged
    against the trial's own marker noise: a poor fit writes everything, then exits 1 naming the
    joint centres that do not follow. Ctrl-C stops cleanly: the best result so far is written,
    marked interrupted (exit code 1).
    Example:
        bemore identify data/sample_trial.c3d --body-mass 41.1 --out out/identify
    """
    import gc

    from bemore.paths import ctrl_c_held, on_interrupt

    on_interrupt(f"before the fit: nothing was written in {out}")
    from bemore import drawing as figures_child
    from bemore.errors import BemoreError
    from bemore.identify.outputs import (
        PLOT_FILES,
        remove_interrupted,
        result_folder,
        write_plots,
        write_result_set,
    )
    from bemore.identify.pipeline import Overrides, run_identification
    from bemore.identify.report import summary_text
    from bemore.identify.run import identify
    from bemore.phases import mark

    mark("identify", "start-up")
    athlete_profile: Any = profile
    records = None
    if athlete is not None:
        from bemore.records import open_athlete
        from bemore.records.store import utc_now

        started_utc = utc_now()
        records, athlete_record = open_athlete(athlete, db_path, profile)
        athlete_profile = athlete_record.to_profile()
    overrides = Overrides(algorithm=algorithm, pack=pack, iterations=iterations, seed=seed,
                          polish=polish, workers=workers, inertial=inertial)
    # The plots are drawn by a child process from the fit, beside the analysis and the
    # result's writing (the other core), into a folder of their own in OUT, moved into place
    # once the result is written (bemore.drawing.place); the command returns once both are.
    staging = out / figures_child.STAGING
    drawing: list[Any] = [None]  # the child drawing them, once the fit is known

    def draw_meanwhile(fit: Any, problem: Any, settings: Any) -> None:
        # What is loaded so far lives until the process ends: out of the collector's sight,
        # the child shares its pages with this process (as in synthesize; docs/speed.md).
        gc.freeze()
        drawing[0] = figures_child.start(lambda: write_plots(staging, fit, problem, settings))

    def abandon_figures() -> None:
        figures_child.abandon(drawing[0], staging)  # the first error is the one to tell

    try:
        outcome, problem, settings, record = run_identification(
            trial, out, config=config, trial_config=trial_config, markerset=markerset,
            body_mass_kg=body_mass_kg, body_mass_uncertainty_kg=body_mass_uncertainty_kg,
            profile=athlete_profile, model_name=model_name, overrides=overrides,
            dask_address=dask_address,
            run=lambda problem, settings: _run_with_progress(
                problem, settings, identify,
                on_fit=lambda fit: draw_meanwhile(fit, problem, settings)),
            write=False,
        )
    except BaseException:
        abandon_figures()
        raise
    # The fit is known: a Ctrl-C from now on waits until it is printed and written.
    with ctrl_c_held():
        # On the screen first: a disk that refuses the files does not lose the numbers.
        click.echo(summary_text(record))
        folder = result_folder(out, outcome.interrupted)
        if folder != out:
            click.echo(f"{out}/athlete.json holds a complete fit: kept; this interrupted run's "
                       f"result goes to {folder}/")
        try:
            write_result_set(folder, record, outcome)
        except BaseException:
            abandon_figures()
            raise
        on_interrupt(f"after the result was written in {folder}")
        click.echo(f"wrote {folder}/athlete.json, convergence.csv, summary.txt; plotting…")
        if not outcome.interrupted:  # a complete fit supersedes an interrupted run's result
            superseded = remove_interrupted(folder)
            if superseded is not None:
                click.echo(superseded)
        mark("identify", "result")
        reason, placed = figures_child.finish_and_place(
            drawing[0], lambda: write_plots(staging, outcome, problem, settings), staging,
            folder, PLOT_FILES)
        if reason is None:
            click.echo(f"wrote {folder}/" + ", ".join(PLOT_FILES))
            mark("identify", "plots")
    # What is loaded lives until the process ends: out of the collector's sight, the
    # interpreter's teardown does not walk it (as in synthesize; docs/speed.md).
    gc.freeze()
    if records is not None:
        from bemore.records.register import register_identify

        verdict = ("interrupted" if outcome.interrupted else
                   outcome.verdict.status if outcome.verdict is not None else "good")
        register_identify(records, athlete_record.name, started_utc, trial, folder,
                          {"algorithm": settings.algorithm, "pack": settings.pack,
                           "iterations": settings.iterations, "seed": settings.seed,
                           "polish": settings.polish, "model": model_name,
                           "body_mass_kg": record["config"]["body_mass_kg"]},
                          {key: record["config"][key] for key in
                           ("identification", "gymnast", "trial", "markerset")}, verdict)
        click.echo(f"recorded in the records: {athlete_record.name}, model of "
                   f"{trial} ({verdict} fit)")
    if reason is not None:
        drawn = f" ({', '.join(path.name for path in placed)} written)" if placed else ""
        raise BemoreError(f"the plots in {folder} were not written: {reason}{drawn}; the "
                          "result there is written and complete")
    if outcome.interrupted:
        sys.exit(1)
    if outcome.verdict is not None and outcome.verdict.poor:
        from bemore.errors import PoorFitError

        raise PoorFitError(f"{trial}: {outcome.verdict.message} (results written to {folder}, "
                           "marked poor)")


LOG_WIDTH = 160  # columns of the progress bar's line when the output is not a terminal


def _run_with_progress(problem: Any, settings: Any, identify: Any, on_fit: Any = None) -> Any:
    """Run with a rich progress bar: best cost (m²), RMS joint-centre distance (mm), ETA
    (``on_fit``: as :func:`bemore.identify.run.identify`'s). While the search runs its figures
    are the search's best, labelled so once the polish starts; the frame that stays shows the
    result's cost and mean distance (summary.txt's), labelled the fit."""
    import numpy as np
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from bemore.phases import mark

    observed = max(int(np.sum(np.all(np.isfinite(problem.measured), axis=-1))), 1)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} it"),
        TextColumn("best {task.fields[best]}"),
        TextColumn("distance {task.fields[distance]}"),
        TimeRemainingColumn(),
    )
    console = Console()
    if not console.is_terminal:
        # Off a terminal rich prints one frame, when the bar stops: a line of the output, which
        # its 80 columns would cut.
        console = Console(width=LOG_WIDTH)
    with Progress(*columns, console=console, transient=False) as progress:
        search = f"{settings.algorithm} {settings.pack}×{settings.iterations}"
        task = progress.add_task(search, total=settings.iterations, best="-", distance="-")
        ran = [f"{search} search"]  # the phases run so far, for the bar's last frame

        distance = ["-"]  # the global run's best RMS distance, as last shown

        def callback(record: Any, best_x: Any) -> bool:
            # RMS distance over the seen joint centres, the seed's "mean marker distance".
            rms_mm = np.sqrt(record.best / observed) * 1e3
            distance[0] = f"{rms_mm:.3g} mm (rms)"
            progress.update(task, completed=record.iteration, best=f"{record.best:.4g} m²",
                            distance=distance[0])
            return False

        ended = ["search"]  # the phase under way, which the next one ends

        def on_phase(name: str) -> None:
            mark("identify", ended[0])
            ended[0] = name
            ran.append(name)
            # The bar's figures are the global search's best, before the polish: say so once
            # the next phase starts (a coach read 13.6 mm as the fit, whose figure was 0.435 mm).
            progress.update(task, description=f"{name}…",
                            distance=f"{distance[0]} (the search's best, not the fit)")

        outcome = identify(problem, settings, callback=callback, on_phase=on_phase,
                           on_fit=on_fit)
        mark("identify", ended[0])
        # The frame that stays (the only one off a terminal) is printed once the phases are
        # over, before the results are written and the plots finished: it says what ran.
        ending = "interrupted" if outcome.interrupted else "done"
        final = getattr(outcome, "metrics", None) or {}
        if "cost_m2" in final and "mean_distance_mm" in final:
            # the frame that stays shows the result's own figures, as summary.txt states them
            progress.update(task, description=f"{', '.join(ran)}: {ending}",
                            best=f"{final['cost_m2']:.4g} m²",
                            distance=f"mean {final['mean_distance_mm']:.3g} mm (the fit)")
        else:
            progress.update(task, description=f"{', '.join(ran)}: {ending}")
        return outcome
