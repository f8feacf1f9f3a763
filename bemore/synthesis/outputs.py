"""Files written by ``bemore synthesize``: gesture.json, profiles.csv, setpoints.csv, plots, GIF.

The setpoint format is the contract with ``bemore drive`` (``docs/formats.md``,
``bemore-setpoints 1``), defined once by the bench side that reads it
(:mod:`controller.setpoints`: its tag, columns, header keys, digest and writer); everything else
is for people. Radians inside, degrees labelled on plots.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from bemore import filekinds
from bemore.errors import DataError
from bemore.paths import output_folder
from bemore.synthesis.results import Profiles, SynthesisResult
from controller.cli import setpoints as _setpoints

PLOTS_FOLDER = "plots"
"""The folder of the PNG plots (:func:`write_plots`, :func:`write_coach_plot`) in the output
folder."""
ANIMATION_FILE = "gesture.gif"
"""The animated stick figure (:func:`write_animation`) in the output folder."""
PROFILE_COLUMNS = filekinds.PROFILE_COLUMNS
"""The profiles.csv's columns (its one definition is where the bench side recognises the file,
:mod:`controller.filekinds`)."""


def _check_uniform(t_s: np.ndarray, rate_hz: float) -> None:
    """Refuse a time base that does not start at 0 with steps of 1/rate_hz (s)."""
    steps = np.diff(t_s)
    if t_s.size < 2 or abs(t_s[0]) > 1e-12 or np.abs(steps - 1.0 / rate_hz).max() > 1e-9:
        raise DataError(f"setpoints: time base must start at 0 s with steps of 1/{rate_hz:g} s")


def write_setpoints(
    path: Path,
    profiles: Profiles,
    rate_hz: float,
    athlete: str,
    gesture: str,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write the ``bemore-setpoints 1`` file that ``bemore drive`` plays.

    One row per sample of ``profiles`` (which must be sampled at ``rate_hz`` from 0 s): time (s),
    per-shoulder angle (rad), velocity (rad/s) and torque (N·m, half the total), and when known
    its static (gravity) part (N·m, per shoulder; for slow motion). The header holds
    the per-shoulder absolute peak values in degrees and N·m, the athlete, the gesture and the
    ``extra`` keys. Written by the bench side's writer
    (:func:`controller.setpoints.format_setpoints`). Returns the path written.
    """
    t = np.asarray(profiles.t_s, float)
    _check_uniform(t, rate_hz)
    setpoints = _setpoints.Gesture(
        str(path), rate_hz, t, profiles.angle_rad, profiles.velocity_rad_s,
        profiles.torque_per_shoulder_nm, metadata={"athlete": athlete, "gesture": gesture,
                                                   **(extra or {})},
        static_torque_nm=profiles.static_torque_per_shoulder_nm)
    return _setpoints.write_setpoints(path, setpoints)


def write_profiles(path: Path, profiles: Profiles) -> Path:
    """Write profiles.csv: every profile of the gesture, one row per sample (SI units)."""
    columns = [
        profiles.t_s,
        profiles.angle_rad,
        profiles.velocity_rad_s,
        profiles.acceleration_rad_s2,
        profiles.jerk_rad_s3,
        profiles.torque_total_nm,
        profiles.torque_per_shoulder_nm,
        profiles.rotation_rad,
        profiles.bar_x_m,
        profiles.bar_y_m,
    ]
    table = np.column_stack(columns)
    np.savetxt(
        path, table, delimiter=",", header=",".join(PROFILE_COLUMNS), comments="", fmt="%.10g"
    )
    return Path(path)


def write_gesture_json(path: Path, result: SynthesisResult) -> Path:
    """Write gesture.json: design variables, objective, constraints, evaluations, inputs."""
    Path(path).write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
    return Path(path)


PLOTS = (
    # file name, title, y label, (profiles → values in plotted unit)
    ("shoulder_angle.png", "Shoulder flexion", "angle (deg)", lambda p: np.rad2deg(p.angle_rad)),
    (
        "shoulder_velocity.png",
        "Shoulder flexion velocity",
        "velocity (deg/s)",
        lambda p: np.rad2deg(p.velocity_rad_s),
    ),
    (
        "shoulder_acceleration.png",
        "Shoulder flexion acceleration",
        "acceleration (deg/s²)",
        lambda p: np.rad2deg(p.acceleration_rad_s2),
    ),
    (
        "shoulder_jerk.png",
        "Shoulder flexion jerk",
        "jerk (deg/s³)",
        lambda p: np.rad2deg(p.jerk_rad_s3),
    ),
    (
        "shoulder_torque.png",
        "Shoulder flexion torque, per shoulder",
        "torque per shoulder (N·m)",
        lambda p: p.torque_per_shoulder_nm,
    ),
    (
        "rotation_about_bar.png",
        "Rotation about the bar since the start",
        "rotation (deg)",
        lambda p: np.rad2deg(p.rotation_rad),
    ),
)


TORQUE_PLOT = "shoulder_torque.png"
BAR_PLOT = "bar_displacement.png"
PLOT_FILES = (*(name for name, *_ in PLOTS), BAR_PLOT)
"""The files :func:`write_plots` writes in its folder."""
LIMIT_STYLES = ("tab:red", "tab:orange", "tab:purple")
PLOT_SIZE_PX = (640, 360)
TORQUE_PLOT_SIZE_PX = (640, 440)
COACH_PLOT_SIZE_PX = (800, 420)


def write_plots(
    folder: Path,
    profiles: Profiles,
    flexion_end_time_s: float,
    limits: dict[str, float] | None = None,
) -> list[Path]:
    """One PNG per profile (the seed's Figures 35–40) plus the bar displacement; returns paths.

    ``limits`` (label → N·m per shoulder, e.g. the athlete's and the bench's) are drawn as
    ±limit lines on the torque plot, which is per shoulder like the console and setpoints.csv.
    Drawn with Pillow (:mod:`bemore.raster`).
    """
    from bemore.raster import Chart

    folder = output_folder(folder)
    written = []
    for name, title, label, values in PLOTS:
        torque = name == TORQUE_PLOT
        chart = Chart(title, "time (s)", label, legend_below=torque)
        chart.line(profiles.t_s, values(profiles), colour="tab:blue")
        chart.vertical.append((flexion_end_time_s, "grey", "dotted", "t_flexmax"))
        if torque:
            if profiles.static_torque_per_shoulder_nm is not None:
                chart.line(profiles.t_s, profiles.static_torque_per_shoulder_nm,
                           colour="tab:green", width=1.0,
                           label="of which gravity (slow-motion floor)")
            for (what, value), colour in zip((limits or {}).items(), LIMIT_STYLES, strict=False):
                chart.horizontal.append((value, colour, "dashed",
                                         f"{what} limit ±{value:g} N·m"))
                chart.horizontal.append((-value, colour, "dashed", None))
        chart.save(folder / name, TORQUE_PLOT_SIZE_PX if torque else PLOT_SIZE_PX)
        written.append(folder / name)
    chart = Chart("Bar displacement", "time (s)", "displacement (mm)")
    chart.line(profiles.t_s, 1e3 * profiles.bar_x_m, colour="tab:blue", label="horizontal")
    chart.line(profiles.t_s, 1e3 * profiles.bar_y_m, colour="tab:orange", label="vertical")
    written.append(chart.save(folder / BAR_PLOT, PLOT_SIZE_PX))
    return written


def write_coach_plot(
    path: Path,
    profiles: Profiles,
    flexion_end_time_s: float,
    recorded: tuple[np.ndarray, np.ndarray, str] | None,
) -> Path:
    """The coach's view: the athlete's recorded shoulder flexion (from the trial her model came
    from: (time s, angle rad, source)) beside the optimal gesture, on one time axis from the
    start of the circle, with the key instants marked (start, maximal flexion, end)."""
    from bemore.raster import Chart, Mark

    chart = Chart("Shoulder flexion: what she did, what the optimal gesture does",
                  "time from the handstand (s)", "shoulder flexion (deg)", legend_below=True)
    angle = np.rad2deg(profiles.angle_rad)
    chart.line(profiles.t_s, angle, colour="tab:blue", width=2.0, label="optimal gesture")
    peak = int(np.argmax(angle))
    chart.marks += [Mark(profiles.t_s[peak], angle[peak], "tab:blue",
                         f"max flexion {angle[peak]:.0f}° at {profiles.t_s[peak]:.2f} s"),
                    Mark(profiles.t_s[-1], angle[-1], "tab:blue", f"end {profiles.t_s[-1]:.2f} s")]
    if recorded is not None:
        t, recorded_rad, source = recorded
        recorded_deg = np.rad2deg(recorded_rad)
        chart.line(t - t[0], recorded_deg, colour="tab:orange", width=2.0,
                   label=f"her recorded circle ({Path(source).name})")
        top = int(np.argmax(recorded_deg))
        chart.marks += [Mark(t[top] - t[0], recorded_deg[top], "tab:orange",
                             f"max flexion {recorded_deg[top]:.0f}° at {t[top] - t[0]:.2f} s"),
                        Mark(t[-1] - t[0], recorded_deg[-1], "tab:orange",
                             f"end {t[-1] - t[0]:.2f} s")]
    chart.vertical.append((flexion_end_time_s, "grey", "dotted", None))
    return chart.save(path, COACH_PLOT_SIZE_PX)


def write_animation(path: Path, profiles: Profiles, fps: int = 25) -> Path:
    """Animated stick figure (GIF) of the gesture: the named points joined in order, bar at 0,
    ``fps`` frames per second of the gesture plus its last sample, each captioned with the
    time and the shoulder angle (Pillow, :func:`bemore.raster.stick_animation`)."""
    from bemore.raster import stick_animation

    if not profiles.points:
        raise DataError(f"{path}: no point trajectories to animate")
    names = list(profiles.points)
    stacked = np.stack([profiles.points[name] for name in names], axis=1)  # (F, P, 2)
    step = max(1, round(1.0 / (fps * (profiles.t_s[1] - profiles.t_s[0]))))
    frames = list(range(0, len(profiles.t_s), step))
    if frames[-1] != len(profiles.t_s) - 1:
        frames.append(len(profiles.t_s) - 1)
    return stick_animation(path, profiles.t_s, stacked, np.rad2deg(profiles.angle_rad), frames,
                           duration_ms=round(1000 / fps))
