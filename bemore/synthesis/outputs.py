"""Files written by ``bemore synthesize``: gesture.json, profiles.csv, setpoints.csv, plots, GIF.

The setpoint format is the contract with ``bemore drive`` (``docs/formats.md``,
``bemore-setpoints 1``); everything else is for people. Radians inside, degrees labelled on plots.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from bemore.errors import DataError
from bemore.synthesis.results import Profiles, SynthesisResult

SETPOINT_FORMAT = "bemore-setpoints 1"
SETPOINT_COLUMNS = ("t_s", "shoulder_angle_rad", "shoulder_velocity_rad_s", "shoulder_torque_nm")
PROFILE_COLUMNS = (
    "t_s",
    "shoulder_angle_rad",
    "shoulder_velocity_rad_s",
    "shoulder_acceleration_rad_s2",
    "shoulder_jerk_rad_s3",
    "torque_total_nm",
    "torque_per_shoulder_nm",
    "rotation_about_bar_rad",
    "bar_x_m",
    "bar_y_m",
)


def _ensure_dir(folder: Path) -> Path:
    """Create ``folder`` (and parents); a path that exists as a file is a DataError."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise DataError(f"{folder}: output folder exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


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
    per-shoulder angle (rad), velocity (rad/s) and torque (N·m, half the total). The header holds
    the per-shoulder absolute peak values in degrees and N·m. Returns the path written.
    """
    t = np.asarray(profiles.t_s, float)
    _check_uniform(t, rate_hz)
    torque = profiles.torque_per_shoulder_nm
    metadata: dict[str, Any] = {
        "format": SETPOINT_FORMAT,
        "rate_hz": f"{rate_hz:g}",
        "peak_angle_deg": f"{np.rad2deg(np.abs(profiles.angle_rad).max()):.4f}",
        "peak_velocity_deg_s": f"{np.rad2deg(np.abs(profiles.velocity_rad_s).max()):.4f}",
        "peak_torque_nm": f"{np.abs(torque).max():.4f}",
        "athlete": athlete,
        "gesture": gesture,
    }
    metadata.update(extra or {})
    table = np.column_stack([t, profiles.angle_rad, profiles.velocity_rad_s, torque])
    rows = [f"{row[0]:.6f},{row[1]:.10g},{row[2]:.10g},{row[3]:.10g}" for row in table.tolist()]
    body = "\n".join([",".join(SETPOINT_COLUMNS), *rows]) + "\n"
    # completeness, checked by the reader (controller/setpoints.py): row count, time of the last
    # row, SHA-256 of the body's UTF-8 bytes (CSV header line to the end, final newline included)
    metadata.update({"rows": str(len(rows)), "duration_s": f"{t[-1]:.6f}",
                     "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest()})
    head = "".join(f"# {key}: {value}\n" for key, value in metadata.items())
    path = Path(path)
    path.write_text(head + body, encoding="utf-8")
    return path


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
        "Shoulder flexion torque (both shoulders; one takes half)",
        "torque (N·m)",
        lambda p: p.torque_total_nm,
    ),
    (
        "rotation_about_bar.png",
        "Rotation about the bar since the start",
        "rotation (deg)",
        lambda p: np.rad2deg(p.rotation_rad),
    ),
)


def write_plots(folder: Path, profiles: Profiles, flexion_end_time_s: float) -> list[Path]:
    """One PNG per profile (the seed's Figures 35–40) plus the bar displacement; returns paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = _ensure_dir(folder)
    written = []
    for name, title, label, values in PLOTS:
        figure, axes = plt.subplots(figsize=(6.4, 3.6))
        axes.plot(profiles.t_s, values(profiles), color="tab:blue")
        axes.axvline(flexion_end_time_s, color="grey", linestyle=":", label="t_flexmax")
        axes.set(title=title, xlabel="time (s)", ylabel=label)
        axes.grid(alpha=0.3)
        axes.legend(loc="best")
        figure.tight_layout()
        figure.savefig(folder / name, dpi=100)
        plt.close(figure)
        written.append(folder / name)
    figure, axes = plt.subplots(figsize=(6.4, 3.6))
    axes.plot(profiles.t_s, 1e3 * profiles.bar_x_m, label="horizontal")
    axes.plot(profiles.t_s, 1e3 * profiles.bar_y_m, label="vertical")
    axes.set(title="Bar displacement", xlabel="time (s)", ylabel="displacement (mm)")
    axes.grid(alpha=0.3)
    axes.legend(loc="best")
    figure.tight_layout()
    figure.savefig(folder / "bar_displacement.png", dpi=100)
    plt.close(figure)
    written.append(folder / "bar_displacement.png")
    return written


def write_animation(path: Path, profiles: Profiles, fps: int = 25) -> Path:
    """Animated stick figure (GIF) of the gesture: the named points joined in order, bar at 0.

    The axes are drawn once; each frame restores that background and draws only the stick
    figure and its caption (matplotlib's blitting). ``FuncAnimation.save`` redrew the whole
    figure — ticks and text layout — twice per frame: 16 s for a 3 s gesture, now ≈ 1 s.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    if not profiles.points:
        raise DataError(f"{path}: no point trajectories to animate")
    names = list(profiles.points)
    stacked = np.stack([profiles.points[name] for name in names], axis=1)  # (F, P, 2)
    step = max(1, round(1.0 / (fps * (profiles.t_s[1] - profiles.t_s[0]))))
    frames = list(range(0, len(profiles.t_s), step))
    if frames[-1] != len(profiles.t_s) - 1:
        frames.append(len(profiles.t_s) - 1)
    reach = float(np.abs(stacked).max()) * 1.1
    figure, axes = plt.subplots(figsize=(4, 4))
    axes.set(
        xlim=(-reach, reach), ylim=(-reach, reach), aspect="equal", xlabel="x (m)", ylabel="y (m)"
    )
    axes.plot([0.0], [0.0], "ko", markersize=6)
    (line,) = axes.plot([], [], "o-", color="tab:red", linewidth=3, animated=True)
    caption = axes.set_title("t = 0.00 s, shoulder 000°", animated=True)  # room for it
    figure.tight_layout()
    canvas = figure.canvas
    canvas.draw()  # everything but the animated artists
    background = canvas.copy_from_bbox(figure.bbox)
    images = []
    for index in frames:
        canvas.restore_region(background)
        line.set_data(stacked[index, :, 0], stacked[index, :, 1])
        angle_deg = np.rad2deg(profiles.angle_rad[index])
        caption.set_text(f"t = {profiles.t_s[index]:.2f} s, shoulder {angle_deg:.0f}°")
        axes.draw_artist(line)
        axes.draw_artist(caption)
        width, height = canvas.get_width_height()
        frame = Image.frombuffer("RGBA", (width, height), bytes(canvas.buffer_rgba()),
                                 "raw", "RGBA", 0, 1).convert("RGB")
        # One palette for every frame (the figure's few colours), fitted on the first: a
        # median cut per frame was most of the time left.
        images.append(frame.quantize(palette=images[0]) if images else frame.quantize())
    plt.close(figure)
    images[0].save(path, save_all=True, append_images=images[1:],
                   duration=round(1000 / fps), loop=0)
    return Path(path)
