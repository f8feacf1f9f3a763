"""``bemore simulate``: simulate a model along a driven motion; CSV trajectories + stick figure."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import click
import numpy as np

from bemore.config import parse_assignments
from bemore.errors import DataError
from bemore.model import dynamics as dyn
from bemore.model.core import Model
from bemore.model.gymnasts import exemplary_parameters, load_model
from bemore.model.profiles import (
    clear_hip_circle_profile,
    shoulder_flexion_profile,
)
from bemore.model.simulate import DrivenMotion, Simulation, simulate
from bemore.paths import check_output_folder, output_folder, write_file

SIMULATION_FILES = ("trajectories.csv", "stick.png", "summary.json")
"""What ``bemore simulate`` writes in ``--out``: the trajectories, the stick figure, the
summary."""


def read_parameters(path: Path | None, settings: tuple[str, ...]) -> dict[str, float]:
    """Parameters from a JSON file ({name: value} or {"parameters": {...}}) and NAME=VALUE."""
    values: dict[str, float] = {}
    if path is not None:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise DataError(f"{path}: cannot read parameters: {error}") from None
        data = data.get("parameters", data) if isinstance(data, dict) else None
        if not isinstance(data, dict):
            raise DataError(f"{path}: expected a JSON object of parameter name → value")
        for name, value in data.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                values[name] = float(value)
    values.update(parse_assignments(settings, "--set"))
    return values


def read_driven_csv(path: Path, model: Model) -> DrivenMotion:
    """Driven coordinates from CSV: column t_s then one column per driven coordinate (SI).

    Optional columns ``<name>_d`` and ``<name>_dd`` give velocities and accelerations; without
    them they are finite differences of the positions.
    """
    try:
        with Path(path).open(newline="") as stream:
            rows = list(csv.DictReader(row for row in stream if not row.startswith("#")))
    except OSError as error:
        raise DataError(f"{path}: {error}") from None
    if not rows:
        raise DataError(f"{path}: no data rows")
    missing = [c for c in ("t_s", *model.driven_coordinates) if c not in rows[0]]
    if missing:
        raise DataError(f"{path}: missing column {missing[0]!r} (model {model.name} drives "
                        f"{', '.join(model.driven_coordinates)})")
    try:
        t = np.array([float(r["t_s"]) for r in rows])
        q = np.array([[float(r[c]) for c in model.driven_coordinates] for r in rows])
    except ValueError as error:
        raise DataError(f"{path}: not a number: {error}") from None
    if len(t) < 3:
        raise DataError(f"{path}: at least 3 samples are needed")
    has_rates = all(f"{c}_d" in rows[0] and f"{c}_dd" in rows[0] for c in model.driven_coordinates)
    if has_rates:
        qd = np.array([[float(r[f"{c}_d"]) for c in model.driven_coordinates] for r in rows])
        qdd = np.array([[float(r[f"{c}_dd"]) for c in model.driven_coordinates] for r in rows])
    else:
        qd = np.gradient(q, t, axis=0)
        qdd = np.gradient(qd, t, axis=0)
    return DrivenMotion(t, q, qd, qdd)


def write_csv(path: Path, model: Model, motion: DrivenMotion, sim: Simulation) -> None:
    """One row per frame: t_s, free q and q̇, driven q, efforts, point x/y (SI)."""
    header = ["t_s", *list(model.free_coordinates)]
    header += [f"{c}_d" for c in model.free_coordinates] + list(model.driven_coordinates)
    header += [f"effort_{c}" for c in model.driven_coordinates]
    header += [f"{p}_{axis}_m" for p in model.point_names for axis in ("x", "y")]
    table = np.concatenate([motion.t[:, None], sim.free_q[0], sim.free_qd[0], motion.q,
                            sim.efforts[0], sim.points[0].reshape(len(motion.t), -1)], axis=1)
    stream = io.StringIO(newline="")
    stream.write("# bemore simulate: SI units (m, rad, N, N·m); efforts are the generalised "
                 "forces of the driven coordinates\n")
    writer = csv.writer(stream)
    writer.writerow(header)
    writer.writerows([f"{x:.9g}" for x in row] for row in table)
    write_file(path, stream.getvalue())


def plot_stick(path: Path, model: Model, P: np.ndarray, motion: DrivenMotion, sim: Simulation,
               n_frames: int = 9) -> None:
    """Stick figure at evenly spaced key frames (bodies joined origin to origin, plus points)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    V, _ = model.fields(P)
    V = V[0]
    tree = model.tree
    ws = dyn.workspace(tree)
    names = [b.name for b in model.description.bodies]
    parent = {b.name: b.parent for b in model.description.bodies}
    fig, ax = plt.subplots(figsize=(7, 7))
    keys = np.linspace(0, len(motion.t) - 1, n_frames).round().astype(int)
    colours = plt.cm.viridis(np.linspace(0, 1, n_frames))
    for colour, f in zip(colours, keys, strict=True):
        qf, vf = sim.free_q[0, f], sim.free_qd[0, f]
        dyn.prepare(model._T, V, qf, vf, motion.q[f], motion.qd[f], motion.qdd[f], ws)
        origin = {n: (ws[dyn.OX, tree.body_frame[i]], ws[dyn.OY, tree.body_frame[i]])
                  for i, n in enumerate(names)}
        for name in names:
            if parent[name] != "world":
                (x0, y0), (x1, y1) = origin[parent[name]], origin[name]
                ax.plot([x0, x1], [y0, y1], color=colour, lw=2)
        for point, (x, y) in zip(model.description.points, sim.points[0, f], strict=True):
            bx, by = origin[point.body]
            ax.plot([bx, x], [by, y], color=colour, lw=2)
        ax.annotate(f"{motion.t[f]:.2f} s", sim.points[0, f, -1], fontsize=7, color=colour)
    ax.plot(0, 0, "ko", ms=8)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title(f"{model.name}: stick figure at {n_frames} key frames")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_file(path, buffer.getvalue())


@click.command("simulate")
@click.option("--model", "model_name", default="real_gymnast", show_default=True,
              help="real_gymnast, exemplary_gymnast, or a model description TOML file.")
@click.option("--params", "params_path", type=click.Path(path_type=Path),
              help="JSON file of parameters ({name: value} or {\"parameters\": {...}}); "
              "default: the model's own values.")
@click.option("--set", "settings", multiple=True, metavar="NAME=VALUE",
              help="Set one parameter (SI units); repeatable (default: none set).")
@click.option("--driven", "driven_path", type=click.Path(path_type=Path),
              help="CSV of driven coordinates (t_s + one column per coordinate, SI). "
                   "Default: the built-in profile.")
@click.option("--duration", default=1.52, show_default=True, help="Built-in profile length (s).")
@click.option("--start-rotation-deg", default=93.0, show_default=True,
              help="Initial hand rotation about the bar (deg; 90 = handstand).")
@click.option("--substeps", default=1, show_default=True, help="Integrator steps per sample.")
@click.option("--out", "out_dir", default="out/simulate", show_default=True,
              type=click.Path(path_type=Path), help="Output folder.")
def simulate_command(model_name: str, params_path: Path | None, settings: tuple[str, ...],
                     driven_path: Path | None, duration: float, start_rotation_deg: float,
                     substeps: int, out_dir: Path) -> None:
    """Simulate a gymnast model along a driven motion, from spring equilibrium.

    \b
    Reads:  a model (built-in name or TOML description), optional parameters (JSON, --set),
            optional driven-coordinate CSV (default: the built-in clear-hip-circle profile,
            or a shoulder flexion 0 → 150° → 0 for the exemplary model), all SI units.
    Writes: OUT/trajectories.csv (free coordinates, velocities, driven coordinates, efforts,
            named points per frame), OUT/stick.png (stick figure at key frames),
            OUT/summary.json.
    Example:
        bemore simulate --model real_gymnast --set bar.stiffness_x=20000 --out out/sim
    """
    check_output_folder(out_dir, SIMULATION_FILES)  # before the simulation: refused at once
    model = load_model(model_name)
    values = read_parameters(params_path, settings)
    real_only = {"trunk.mass", "trunk.com", "thigh.com"} & set(values)
    if real_only and "trunk.mass" not in model.parameter_names:
        # A real-gymnast parameter set (e.g. an identified athlete) for the exemplary model.
        values = exemplary_parameters({k: v for k, v in values.items()
                                       if k in load_model("real_gymnast").parameter_names})
    P = model.parameter_matrix([values])
    if driven_path is not None:
        motion = read_driven_csv(driven_path, model)
    elif model.n_driven == 9:
        motion = clear_hip_circle_profile(duration)
    else:
        motion = shoulder_flexion_profile(duration, np.radians(150.0))
        if model.n_driven != 1:
            raise DataError(f"model {model.name}: no built-in profile; give --driven")
    free = np.zeros(model.n_free)
    if "hand_rotation" in model.free_coordinates:
        free[model.free_coordinates.index("hand_rotation")] = np.radians(start_rotation_deg)
    q0 = model.equilibrium(P, motion.q[0], free_q=free)
    start = time.perf_counter()
    sim = simulate(model, P, motion, q0, np.zeros(model.n_free), substeps=substeps)
    elapsed = time.perf_counter() - start
    if not sim.valid[0]:
        raise DataError("the simulation diverged or the parameters are invalid (non-positive "
                        "mass or inertia)")
    trajectories, stick, summary_file = (out_dir / name for name in SIMULATION_FILES)
    output_folder(out_dir)
    write_csv(trajectories, model, motion, sim)
    plot_stick(stick, model, P, motion, sim)
    rotation = None
    if "hand_rotation" in model.free_coordinates:
        i = model.free_coordinates.index("hand_rotation")
        rotation = float(np.degrees(sim.free_q[0, -1, i] - q0[0, i]))
    summary = {"model": model.name, "frames": len(motion.t), "duration_s": float(motion.t[-1]),
               "parameters": dict(zip(model.parameter_names, P[0].tolist(), strict=True)),
               "initial_free_state": dict(zip(model.free_coordinates, q0[0].tolist(),
                                              strict=True)),
               "rotation_about_bar_deg": rotation, "elapsed_s": elapsed}
    write_file(summary_file, json.dumps(summary, indent=2))
    click.echo(f"{model.name}: {len(motion.t)} frames, {motion.t[-1]:.3f} s simulated in "
               f"{elapsed * 1000:.0f} ms")
    if rotation is not None:
        click.echo(f"rotation about the bar: {rotation:.1f} deg")
    for j, name in enumerate(model.driven_coordinates):
        peak = np.max(np.abs(sim.efforts[0, :, j]))
        unit = "N" if "length" in name else "N·m"
        click.echo(f"peak effort {name}: {peak:.1f} {unit}")
    click.echo(f"wrote {trajectories}, {stick}, {summary_file}")
