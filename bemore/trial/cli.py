"""``bemore trial``: inspect a motion-capture trial, synthesise one."""

from __future__ import annotations

import os
from pathlib import Path

import click

from bemore.config import parse_assignments
from bemore.errors import ConfigError, DataError
from bemore.paths import check_output_folder, output_folder

INSPECTION_FILES = ("joint_centres.csv", "driven.csv", "trial.json", "stick_figure.png")
"""What ``bemore trial inspect`` writes in ``--out`` (the stick figure last: ``--no-plot``
leaves it out)."""


@click.group("trial")
def trial_group() -> None:
    """Motion-capture trials: inspect a recording, synthesise a test trial."""


@trial_group.command("inspect")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--markerset-config", "markerset", type=click.Path(path_type=Path), default=None,
              help="Marker set and joint-centre recipes (default: configs/markerset.toml).")
@click.option("--trial-config", "settings", type=click.Path(path_type=Path), default=None,
              help="Preparation settings (default: configs/trial.toml).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("out/trial"),
              show_default=True,
              help="Folder for joint_centres.csv, driven.csv, stick_figure.png, trial.json "
              "(created if needed).")
@click.option("--no-plot", is_flag=True, help="Do not draw the stick figure.")
@click.option("--profile", type=click.Path(path_type=Path), default=None,
              help="Athlete profile whose [shoulder_centre] (trial score) moves the shoulder "
              "(default: none, the acromions alone).")
def inspect_command(file: Path, markerset: Path | None, settings: Path | None, out: Path,
                    no_plot: bool, profile: Path | None) -> None:
    """Summarise a trial and, if it is a bar trial, prepare it and export the results.

    \b
    Reads:  FILE (C3D, TRC or CSV), configs/markerset.toml, configs/trial.toml (or the files
            --markerset-config and --trial-config name).
    Prints: rate, duration, markers found / missing, gaps; then the prepared trial (initial
            state, range of the driven coordinates, what was filled or trimmed).
    Writes (in --out): joint_centres.csv (model plane, m), driven.csv (q, q', q''),
            stick_figure.png (joint centres at key frames), trial.json (summary).
    Example:
        bemore trial inspect data/sample_trial.c3d --out out/trial
    """
    from bemore.paths import on_interrupt, write_together
    from bemore.trial.markerset import load_markerset, load_trial_settings
    from bemore.trial.pipeline import prepare_markers, read_bar_forces, read_recording
    from bemore.trial.report import (
        driven_csv,
        joint_centres_csv,
        marker_summary,
        plot_stick_figure,
        trial_summary,
    )

    # Before the report: a folder or file it cannot write is said at once.
    check_output_folder(out, INSPECTION_FILES if not no_plot else INSPECTION_FILES[:-1])
    marker_set = load_markerset(markerset)
    trial_settings = load_trial_settings(settings)
    markers, source = read_recording(file)
    for line in marker_summary(markers, marker_set):
        click.echo(line)
    forces = read_bar_forces(source, trial_settings, markers.n_frames)
    centre = None
    if profile is not None:
        from bemore.profile import load_profile

        centre = load_profile(profile).shoulder_centre
    trial = prepare_markers(markers, marker_set, trial_settings, forces, centre)
    for line in trial_summary(trial):
        click.echo(line)
    output_folder(out)
    centres, driven, summary, stick = (out / name for name in INSPECTION_FILES)
    # One set, each file whole (bemore.paths.write_together): a full disk replaces none.
    written = write_together({centres: joint_centres_csv(trial), driven: driven_csv(trial),
                              summary: trial.summary_json() + "\n"})
    on_interrupt(f"after {', '.join(path.name for path in written)} were written in {out}")
    if not no_plot:
        plot_stick_figure(trial, stick)
        written.append(stick)
    click.echo(f"wrote {', '.join(str(path) for path in written)}")


@trial_group.command("synth")
@click.argument("output", type=click.Path(path_type=Path))
@click.option("--duration", "duration_s", type=float, default=1.8, show_default=True,
              help="Handstand to handstand, s (1.5 to 2.5).")
@click.option("--set", "parameters", multiple=True, metavar="NAME=VALUE",
              help="Model parameter (SI, docs/model.md names), e.g. --set trunk.mass=13.5; "
              "repeatable (default: the model's own values).")
@click.option("--amplitude", "amplitudes", multiple=True, metavar="NAME=VALUE",
              help="Mid-trial excursion of a driven coordinate (rad or m), e.g. hip=1.3; "
              "repeatable (default: the built-in circle's).")
@click.option("--noise-mm", type=float, default=1.0, show_default=True,
              help="Standard deviation of the marker noise, mm.")
@click.option("--gaps", type=int, default=3, show_default=True, help="Number of short gaps.")
@click.option("--seed", type=int, default=0, show_default=True, help="Noise and gap seed.")
@click.option("--prefix", default="Gymnast:", show_default=True,
              help="Subject prefix of the labels ('' for none).")
@click.option("--bar-forces", is_flag=True,
              help="Also write the bar's spring-damper force as analog channels BarFX, BarFZ (N).")
@click.option("--force-noise-pct", type=float, default=2.0, show_default=True,
              help="With --bar-forces: noise, % of each channel's RMS force.")
@click.option("--analog-per-frame", type=int, default=10, show_default=True,
              help="With --bar-forces: analog samples per marker frame (rate must divide 1 kHz).")
def synth_command(output: Path, duration_s: float, parameters: tuple[str, ...],
                  amplitudes: tuple[str, ...], noise_mm: float, gaps: int, seed: int,
                  prefix: str, bar_forces: bool, force_noise_pct: float,
                  analog_per_frame: int) -> None:
    """Simulate a clear hip circle and write it as a synthetic motion-capture trial.

    \b
    Reads:  the real-gymnast model (bemore.model) and its default parameters.
    Writes: OUTPUT (a .c3d name: C3D, 100 Hz, mm, full marker set of markerset.md, labelled
            synthetic) and OUTPUT's stem + .truth.json (parameters, initial state, noise,
            seed, gaps, and the true joint centres and coordinates at every frame), neither
            overwritten if there; with --bar-forces, analog channels BarFX (lab X = model x)
            and BarFZ (lab Z = model y): the bar spring-dampers' force on the bar, N, with
            noise, at 10 samples per frame (1 kHz).
    Example:
        bemore trial synth out/circle.c3d --set trunk.mass=13.5 --noise-mm 1 --seed 4
        bemore trial synth out/forces.c3d --bar-forces --force-noise-pct 2
    """
    from bemore.trial.synthetic import SyntheticSpec, truth_path, write_synthetic_trial

    if noise_mm < 0 or gaps < 0 or force_noise_pct < 0:
        raise ConfigError("--noise-mm, --gaps and --force-noise-pct must not be negative")
    if output.suffix.lower() != ".c3d":  # bemore reads TRC and CSV but writes only C3D
        raise DataError(f"{output}: trial synth writes a C3D file: name it .c3d (it has no "
                        f"writer for {output.suffix or 'a name without a suffix'})")
    for path in (output, truth_path(output)):  # a trial, like a session log, is data
        if os.path.lexists(path):
            raise DataError(f"{path}: exists; trial synth never overwrites a file (give "
                            "another name, or remove it)")
    check_output_folder(output.parent, files=[output.name, truth_path(output).name])
    spec = SyntheticSpec(duration_s=duration_s, parameters=parse_assignments(parameters, "--set"),
                         amplitudes=parse_assignments(amplitudes, "--amplitude"), noise_mm=noise_mm,
                         gaps=gaps, seed=seed, prefix=prefix, bar_forces=bar_forces,
                         force_noise_pct=force_noise_pct, analog_per_frame=analog_per_frame)
    c3d_path, truth_path, truth = write_synthetic_trial(spec, output)
    click.echo(f"wrote {c3d_path} ({len(truth.t)} frames at {spec.rate_hz:g} Hz, "
               f"{spec.noise_mm:g} mm noise, {len(truth.gaps)} gaps, seed {seed})")
    if bar_forces:
        click.echo(f"bar forces: analog channels BarFX, BarFZ at "
                   f"{spec.rate_hz * spec.analog_per_frame:g} Hz, {force_noise_pct:g} % noise")
    click.echo(f"wrote {truth_path} (ground truth)")


@trial_group.command("score")
@click.argument("calibration", type=click.Path(path_type=Path))
@click.option("--side", type=click.Choice(["right", "left"]), default="right", show_default=True,
              help="Which arm moved (its upper-arm cluster of markerset.toml [score]).")
@click.option("--profile", type=click.Path(path_type=Path), default=None,
              help="Athlete profile TOML to write the centre into ([shoulder_centre]; default: "
              "none, printed only).")
@click.option("--markerset-config", "markerset", type=click.Path(path_type=Path), default=None,
              help="Marker set with its [score] clusters (default: configs/markerset.toml).")
def score_command(calibration: Path, side: str, profile: Path | None,
                  markerset: Path | None) -> None:
    """Locate her gleno-humeral centre from a calibration movement (SCoRE, Ehrig et al. 2006).

    \b
    Reads:  CALIBRATION (C3D, TRC or CSV: the arm circumducted, flexed and abducted, with the
            thorax and upper-arm clusters of configs/markerset.toml [score]).
    Prints: the centre in the thorax cluster's frame ± its standard error per axis (the
            markers' noise, frames correlated in time allowed for, the noise's bias removed;
            not skin movement), the fit's residual, the movement's conditioning
            (weakest-direction rotation spread, condition number); a movement too small to
            locate the centre is refused in one line.
    Writes: with --profile, its [shoulder_centre] table (trial preparation then uses the
            centre instead of the acromions for the shoulder).
    Example:
        bemore trial score calibration.c3d --side right --profile athlete.toml
    """
    import numpy as np

    from bemore.trial.markerset import load_markerset
    from bemore.trial.readers import read_markers
    from bemore.trial.score import score_markers, write_shoulder_centre

    marker_set = load_markerset(markerset)
    if marker_set.score is None:
        raise ConfigError(f"{markerset or 'configs/markerset.toml'}: no [score] table (the "
                          "thorax and upper-arm clusters)")
    clusters = marker_set.score
    arm = clusters.upper_arm_right if side == "right" else clusters.upper_arm_left
    acromion = clusters.acromion_right if side == "right" else clusters.acromion_left
    markers = read_markers(calibration)
    result = score_markers(markers, [marker_set.label(n) for n in clusters.thorax],
                           [marker_set.label(n) for n in arm], marker_set.label(acromion),
                           clusters.min_spread_rad)
    centre = ", ".join(f"{v * 1e3:.1f}" for v in result.centre_thorax_m)
    errors = ", ".join(f"{v:.2f}" for v in result.standard_error_mm)
    click.echo(f"{side} gleno-humeral centre (SCoRE), thorax frame: ({centre}) mm "
               f"± ({errors}) mm (1 standard error per axis); {result.frames} frames")
    bias = ", ".join(f"{v:.2f}" for v in result.bias_correction_mm)
    click.echo(f"the ± is the markers' noise ({result.marker_noise_mm[0]:.2f} mm thorax, "
               f"{result.marker_noise_mm[1]:.2f} mm arm cluster; errors correlated over "
               f"{result.lag_frames} frame(s)); the noise's bias, ({bias}) mm, removed; not in "
               "it: skin and cluster sliding over the bone, a thorax cluster that bends")
    click.echo(f"fit residual {result.residual_mm:.2f} mm RMS; conditioning: rotation spread "
               f"{result.spread_rad:.3f} rad in the weakest direction (refused below "
               f"{clusters.min_spread_rad:g}), condition number {result.condition:.1f}")
    offset = ", ".join(f"{v * 1e3:.1f}" for v in result.acromion_offset_m)
    click.echo(f"offset from {acromion} (thorax frame): ({offset}) mm, "
               f"{np.linalg.norm(result.acromion_offset_m) * 1e3:.1f} mm long, varying "
               f"{result.acromion_offset_sd_mm:.1f} mm RMS over the movement")
    for note in result.notes:
        click.echo(f"note: {note}")
    if profile is not None:
        write_shoulder_centre(profile, result.profile_table(side, str(calibration)))
        click.echo(f"wrote [shoulder_centre] into {profile}")
