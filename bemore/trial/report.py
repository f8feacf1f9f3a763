"""What ``bemore trial inspect`` shows and writes: a text summary, CSV exports, a stick figure."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from bemore import filekinds
from bemore.paths import write_file
from bemore.trial.gaps import find_gaps
from bemore.trial.markers import Markers
from bemore.trial.markerset import MarkerSet
from bemore.trial.pipeline import Trial

# Segments drawn in the stick figure, as pairs of point names.
STICKS = (("bar", "wrist"), ("wrist", "elbow"), ("elbow", "shoulder"), ("shoulder", "hip"),
          ("hip", "knee"), ("knee", "ankle"), ("ankle", "toe"), ("neck", "head_top"))


def marker_summary(markers: Markers, markerset: MarkerSet) -> list[str]:
    """Lines: file, rate, duration, markers found / missing, gaps of the file as read."""
    required = [markerset.label(name) for name in markerset.required_markers()]
    missing = [name for name in required if markers.find(name) is None]
    gaps = find_gaps(markers.t, markers.positions, markers.labels)
    nan_share = float(np.isnan(markers.positions).any(axis=2).mean()) * 100
    lines = [
        f"file: {markers.source}",
        f"rate: {markers.rate_hz:g} Hz, {markers.n_frames} frames, {markers.duration_s:.3f} s, "
        f"lengths in {markers.unit_in_file} (converted to m)",
        f"markers: {len(markers.labels)} in the file, {len(required) - len(missing)} of the "
        f"{len(required)} the joint centres need",
    ]
    if missing:
        lines.append(f"missing: {', '.join(missing)}")
    lines.append(f"gaps: {len(gaps)} ({nan_share:.2f} % of marker samples missing)")
    for gap in sorted(gaps, key=lambda gap: -gap.frames)[:10]:
        lines.append(f"  {gap.describe()}")
    if len(gaps) > 10:
        lines.append(f"  … and {len(gaps) - 10} more")
    lines.extend(f"note: {note}" for note in markers.notes)
    return lines


def trial_summary(trial: Trial) -> list[str]:
    """Lines: prepared rate and duration, initial state, range of each driven coordinate."""
    lines = [
        f"prepared: {trial.t.size} frames at {trial.rate_hz:g} Hz, {trial.duration_s:.3f} s",
        "initial free state: " + ", ".join(
            f"{name} {value:.4f} {'rad' if name == 'hand_rotation' else 'm'}"
            for name, value in zip(trial.free_names, trial.free_q0, strict=True)),
        "initial rates: " + ", ".join(
            f"{name} {value:.4f} {'rad/s' if name == 'hand_rotation' else 'm/s'}"
            for name, value in zip(trial.free_names[:3], trial.free_qd0[:3], strict=True)),
        "rotation about the bar: "
        f"{np.degrees(trial.free_seen[-1, 2] - trial.free_seen[0, 2]):.1f}°",
        trial.marker_noise.note()
        or f"marker noise (estimated from the recording): {trial.marker_noise_m * 1e3:.2f} mm",
        "segment lengths (median ± half the interquartile range): " + ", ".join(
            f"{name} {length * 1e3:.1f} ± {trial.segment_length_spread_m[name] * 1e3:.1f} mm"
            for name, length in trial.segment_lengths_m.items()),
    ]
    if trial.acromion_check is not None:
        lines.append(trial.acromion_check.message)
    if not trial.shoulder_springs_observable:
        lines.append("shoulder springs: UNOBSERVABLE (acromions on the trunk's side, no marker "
                     "fixed on the arm): identify holds them at their seed values")
    lines += [
        "driven coordinates (min … max):",
    ]
    if trial.bar_force is not None:
        lines.insert(-1, "bar force (model x, y): " + ", ".join(
            f"{axis} {low:.0f} … {high:.0f} N (noise {noise:.3g} N at {trial.bar_force_rate_hz:g}"
            f" Hz)" for axis, low, high, noise in zip(
                "xy", trial.bar_force.min(axis=0), trial.bar_force.max(axis=0),
                trial.bar_force_noise_n, strict=True)))
    for j, name in enumerate(trial.driven_names):
        q = trial.driven_q[:, j]
        if name.endswith("_length"):
            lines.append(f"  {name:18s} {q.min() * 1000:8.1f} … {q.max() * 1000:8.1f} mm")
        else:
            lines.append(f"  {name:18s} {np.degrees(q.min()):8.1f} … {np.degrees(q.max()):8.1f}°")
    lines.extend(f"note: {note}" for note in trial.notes)
    return lines


def _csv_text(table: np.ndarray, header: list[str]) -> str:
    """``table`` as CSV text under ``header`` (7 significant digits)."""
    buffer = io.StringIO()
    np.savetxt(buffer, table, delimiter=",", header=",".join(header), comments="", fmt="%.7g")
    return buffer.getvalue()


def joint_centres_csv(trial: Trial) -> str:
    """joint_centres.csv: t_s then <point>_x_m, <point>_y_m for every named point (model
    plane)."""
    header = filekinds.joint_centres_header(list(trial.point_names))
    table = np.column_stack([trial.t, trial.points.reshape(len(trial.t), -1)])
    return _csv_text(table, header)


def driven_csv(trial: Trial) -> str:
    """driven.csv: t_s then each driven coordinate, its rate and acceleration (rad or m, per
    s, s²)."""
    header = filekinds.driven_header(list(trial.driven_names))
    columns = [trial.t]
    for j in range(len(trial.driven_names)):
        columns += [trial.driven_q[:, j], trial.driven_qd[:, j], trial.driven_qdd[:, j]]
    return _csv_text(np.column_stack(columns), header)


def plot_stick_figure(trial: Trial, path: Path, key_frames: int = 8) -> None:
    """PNG of the joint centres as a stick figure at ``key_frames`` evenly spaced instants,
    written atomically (:func:`bemore.paths.write_file`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frames = np.linspace(0, len(trial.t) - 1, key_frames).round().astype(int)
    figure, axes = plt.subplots(figsize=(6.5, 6.5))
    colours = plt.cm.viridis(np.linspace(0, 1, key_frames))
    index = {name: k for k, name in enumerate(trial.point_names)}
    for colour, frame in zip(colours, frames, strict=True):
        points = trial.points[frame]
        for start, end in STICKS:
            segment = points[[index[start], index[end]]]
            axes.plot(segment[:, 0], segment[:, 1], "-", color=colour, lw=2)
        axes.plot(points[:, 0], points[:, 1], "o", color=colour, ms=3,
                  label=f"t = {trial.t[frame]:.2f} s")
    axes.plot(0, 0, "k+", ms=12)
    axes.set_aspect("equal")
    axes.set_xlabel("x (m, horizontal)")
    axes.set_ylabel("y (m, vertical)")
    axes.set_title(f"Joint centres: {Path(trial.source).name}")
    axes.legend(fontsize=7, loc="upper right")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    write_file(path, buffer.getvalue())
