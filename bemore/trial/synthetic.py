"""Synthetic trials: simulate the 14-coordinate gymnast through a clear hip circle, place the
full marker set, add noise and gaps, write a C3D (100 Hz, mm) and a ground-truth JSON.

The simulation is the engine's (``bemore.model``): the driven coordinates follow
``clear_hip_circle_profile``; the free state starts from the engine's equilibrium at the
handstand (springs carrying the starting motion's load), with the initial rotation rate about the
bar chosen by bisection so that the gymnast is back at the handstand (one full turn) at the end.
"""

from __future__ import annotations

import functools
import json
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bemore import __version__
from bemore.errors import DataError
from bemore.paths import write_file
from bemore.trial.c3d import write_c3d
from bemore.trial.coordinates import DRIVEN_NAMES, FREE_NAMES, arm_end, driven_from_points
from bemore.trial.gaps import find_runs
from bemore.trial.markerplacement import model_marker_positions, model_to_lab
from bemore.trial.markers import Markers
from bemore.trial.markerset import POINT_NAMES

SIM_RATE_HZ = 1000.0  # the engine integrates at 1 ms steps


@dataclass
class SyntheticSpec:
    """What to synthesise.

    Attributes:
        duration_s: handstand to handstand (1.5 to 2.5 s).
        parameters: model parameters overriding the engine's defaults (SI, docs/model.md names).
        amplitudes: mid-trial excursions of driven coordinates overriding the profile's (SI).
        starts: start (and end) values of driven coordinates overriding the profile's (SI;
            e.g. the arm lengths of another body).
        noise_mm: standard deviation of the Gaussian noise added to every marker coordinate (mm).
        gaps: number of gaps inserted; gap_frames: (shortest, longest) gap, frames.
        seed: seed of the noise and gap generator.
        rate_hz: marker rate written to the C3D (Hz); bar_height_m: bar above the lab floor (m).
        prefix: subject prefix of every label ("" for none).
        acromion_side: where the acromion markers ride: "arm" (the arm's end of the shoulder
            spring-dampers, the marker set's default convention) or "trunk" (the trunk's side,
            the shoulder joint centre). The upper-arm markers (TRICEPS) ride on the arm either
            way (bemore.trial.markerplacement).
        bar_forces: also write the bar's spring-damper force (``Model.spring_forces``) as
            analog channels ``BarFX`` (lab X = model x) and ``BarFZ`` (lab Z = model y), N, at
            ``analog_per_frame`` samples per marker frame (the analog rate must divide 1 kHz:
            the samples are the simulation's own), with Gaussian noise of ``force_noise_pct``
            % of each channel's RMS force; the samples past the simulation's last one (the
            last frame's block) repeat its value.
    """

    duration_s: float = 1.8
    parameters: dict[str, float] = field(default_factory=dict)
    amplitudes: dict[str, float] = field(default_factory=dict)
    starts: dict[str, float] = field(default_factory=dict)
    noise_mm: float = 1.0
    gaps: int = 3
    gap_frames: tuple[int, int] = (2, 6)
    seed: int = 0
    rate_hz: float = 100.0
    bar_height_m: float = 2.5
    prefix: str = "Gymnast:"
    acromion_side: str = "arm"
    bar_forces: bool = False
    force_noise_pct: float = 2.0
    analog_per_frame: int = 10

# Analog channels of the synthetic bar force (laboratory axes: model x → X, model y → Z).
BAR_FORCE_CHANNELS = ("BarFX", "BarFZ")
BAR_AXES = ("bar_x", "bar_y")  # the bar spring-dampers' coordinates (model x, y)


@dataclass
class Truth:
    """What the synthetic trial really is (ground truth), JSON-ready except the arrays.

    Arrays at the C3D frames: t (F,) s, points (F, 10, 2) m as the markers show them (the
    ``shoulder`` is where the acromions ride: the arm's end of the shoulder springs, or with
    ``acromion_side = "trunk"`` the engine's shoulder joint),
    driven_q (F, 9) the profile's driven coordinates, driven_seen (F, 9) the docs/model.md
    definitions evaluated on those noise-free points (what a perfect pipeline returns),
    free_q (F, 5).
    """

    spec: SyntheticSpec
    parameters: dict[str, float]
    free_q0: np.ndarray
    free_qd0: np.ndarray
    t: np.ndarray
    points: np.ndarray
    driven_q: np.ndarray
    driven_seen: np.ndarray
    free_q: np.ndarray
    gaps: list[dict[str, Any]]
    bar_force: np.ndarray | None = None
    analogs: dict[str, Any] | None = field(default=None, repr=False)  # write_c3d's, with noise

    def to_dict(self) -> dict[str, Any]:
        """Everything, as plain JSON types (arrays as nested lists, m / rad / s)."""
        return {
            "synthetic": True,
            "generator": f"bemore {__version__} (bemore.trial.synthetic), Python "
                         f"{platform.python_version()}, numpy {np.__version__}",
            "spec": asdict(self.spec),
            "parameters": self.parameters,
            "initial_bar_displacement_m": [float(v) for v in self.free_q0[:2]],
            "free_names": list(FREE_NAMES),
            "free_q0": self.free_q0.tolist(),
            "free_qd0": self.free_qd0.tolist(),
            "gaps": self.gaps,
            "point_names": list(POINT_NAMES),
            "driven_names": list(DRIVEN_NAMES),
            "t_s": np.round(self.t, 6).tolist(),
            "points_m": np.round(self.points, 7).tolist(),
            "driven_q": np.round(self.driven_q, 8).tolist(),
            "driven_seen": np.round(self.driven_seen, 8).tolist(),
            "free_q": np.round(self.free_q, 8).tolist(),
            "bar_force_n": (None if self.bar_force is None
                            else np.round(self.bar_force, 5).tolist()),
        }


def _simulate(spec: SyntheticSpec):
    """Engine simulation at 1 kHz: (model, parameters, motion, q0, qd0, sim)."""
    if not 1.5 <= spec.duration_s <= 2.5:
        raise DataError(f"synthetic trial: duration {spec.duration_s:g} s outside 1.5–2.5 s")
    return _simulate_cached(spec.duration_s, tuple(sorted(spec.parameters.items())),
                            tuple(sorted(spec.amplitudes.items())),
                            tuple(sorted(spec.starts.items())))


@functools.lru_cache(maxsize=4)
def _simulate_cached(duration_s: float, parameters: tuple, amplitudes: tuple, starts: tuple):
    """The simulation of :func:`_simulate`, kept for specs differing only in noise or gaps."""
    from bemore.model import load_model, simulate
    from bemore.model.profiles import HANDSTAND_HAND_ROTATION, clear_hip_circle_profile

    model = load_model("real_gymnast")
    P = model.parameter_matrix([dict(parameters)])
    motion = clear_hip_circle_profile(duration_s, SIM_RATE_HZ, dict(amplitudes), dict(starts))
    start = np.zeros(model.n_free)
    start[FREE_NAMES.index("hand_rotation")] = HANDSTAND_HAND_ROTATION
    q0 = model.equilibrium(P, motion.q[0], free_q=start, driven_qd0=motion.qd[0],
                           driven_qdd0=motion.qdd[0])[0]
    k = FREE_NAMES.index("hand_rotation")

    def turns(rate: float):
        qd0 = np.zeros(model.n_free)
        qd0[k] = rate
        sim = simulate(model, P, motion, q0, qd0)
        if not sim.valid[0]:
            raise DataError(
                f"synthetic trial: the simulation failed (parameters {dict(parameters)})"
            )
        return (sim.free_q[0, -1, k] - q0[k]) / (2 * np.pi), qd0, sim

    low, high = 0.0, 6.0  # rad/s: initial rotation rates about the bar bracketing one turn
    if turns(high)[0] < 1.0 or turns(low)[0] > 1.0:
        raise DataError(
            "synthetic trial: no initial rotation rate in 0–6 rad/s completes one circle in "
            f"{duration_s:g} s with these parameters"
        )
    for _ in range(20):  # brackets the rate to 6·2⁻²⁰ rad/s
        middle = 0.5 * (low + high)
        low, high = (middle, high) if turns(middle)[0] < 1.0 else (low, middle)
    _, qd0, sim = turns(high)
    return model, P, motion, q0, qd0, sim


def _insert_gaps(positions: np.ndarray, labels: tuple[str, ...], t: np.ndarray,
                 spec: SyntheticSpec, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Blank ``spec.gaps`` runs of frames (NaN) in random markers, away from the ends."""
    gaps = []
    frames = positions.shape[0]
    for _ in range(spec.gaps):
        length = int(rng.integers(spec.gap_frames[0], spec.gap_frames[1] + 1))
        first = int(rng.integers(10, frames - 10 - length))
        marker = int(rng.integers(len(labels)))
        positions[first : first + length, marker] = np.nan
    for m, label in enumerate(labels):
        for first, last in find_runs(np.isnan(positions[:, m, 0])):
            gaps.append({"marker": label, "start_s": float(t[first]), "end_s": float(t[last]),
                         "frames": last - first + 1})
    return gaps


def _force_channels(spec: SyntheticSpec, model: Any, P: np.ndarray, sim: Any, n_frames: int,
                    rng: np.random.Generator) -> dict[str, Any]:
    """The analog channels of :attr:`SyntheticSpec.bar_forces` (write_c3d's ``analogs``)."""
    analog_rate = spec.rate_hz * spec.analog_per_frame
    step = round(SIM_RATE_HZ / analog_rate) if analog_rate <= SIM_RATE_HZ else 0
    if spec.analog_per_frame < 1 or step < 1 or abs(step * analog_rate - SIM_RATE_HZ) > 1e-9:
        raise DataError(f"synthetic trial: analog rate {analog_rate:g} Hz "
                        f"({spec.analog_per_frame} per frame) must divide 1000 Hz")
    if spec.force_noise_pct < 0:
        raise DataError("synthetic trial: force noise must not be negative")
    force = model.spring_forces(P[:1], sim.free_q[:1], sim.free_qd[:1], BAR_AXES)[0]  # 1 kHz
    rows = np.minimum(np.arange(n_frames * spec.analog_per_frame) * step, len(force) - 1)
    samples = force[rows].T.copy()  # (2, S): model x → lab X, model y → lab Z
    rms = np.sqrt(np.mean(force**2, axis=0))
    samples += rng.normal(0.0, 1.0, samples.shape) * (spec.force_noise_pct / 100.0 * rms)[:, None]
    return {"labels": list(BAR_FORCE_CHANNELS), "units": ["N", "N"], "samples": samples,
            "per_frame": spec.analog_per_frame}


def synthesize(spec: SyntheticSpec) -> tuple[Markers, Truth]:
    """Simulate, place the markers, add noise and gaps: the markers (lab frame, m) and truth."""
    model, P, motion, q0, qd0, sim = _simulate(spec)
    step = round(SIM_RATE_HZ / spec.rate_hz)
    if abs(step * spec.rate_hz - SIM_RATE_HZ) > 1e-9:
        raise DataError(f"synthetic trial: rate {spec.rate_hz:g} Hz must divide 1000 Hz")
    rows = np.arange(0, len(motion.t), step)
    # The acromion markers ride on the arm side of the shoulder spring (docs/model.md §2): the
    # measured shoulder is the upper arm's end; the engine's shoulder (trunk side) is the neck.
    points = sim.points[0, rows].copy()
    if spec.acromion_side not in ("arm", "trunk"):
        raise DataError(f"synthetic trial: acromion_side {spec.acromion_side!r}: arm or trunk")
    end = arm_end(points, sim.free_q[0, rows], motion.q[rows])
    if spec.acromion_side == "arm":
        points[:, POINT_NAMES.index("shoulder")] = end
    labels, model_positions = model_marker_positions(points, end)
    lab = model_to_lab(model_positions, spec.bar_height_m)
    rng = np.random.default_rng(spec.seed)
    lab = lab + rng.normal(0.0, spec.noise_mm * 1e-3, lab.shape)
    t = motion.t[rows]
    gaps = _insert_gaps(lab, labels, t, spec, rng)
    prefixed = tuple(spec.prefix + label for label in labels)
    for gap in gaps:
        gap["marker"] = spec.prefix + gap["marker"]
    markers = Markers(t, lab, prefixed, spec.rate_hz, "synthetic", "m",
                      ("synthetic trial (bemore trial synth)",))
    defaults = model.default_parameters()
    parameters = {name: float(P[0, j]) for j, name in enumerate(model.parameter_names)
                  if name in defaults}
    bar_force, analogs = None, None
    if spec.bar_forces:
        bar_force = model.spring_forces(P[:1], sim.free_q[:1, rows], sim.free_qd[:1, rows],
                                        BAR_AXES)[0]
        force_rng = np.random.default_rng([spec.seed, 1])  # the markers' draws stay the same
        analogs = _force_channels(spec, model, P, sim, len(rows), force_rng)
    truth = Truth(spec, parameters, q0, qd0, t, points, motion.q[rows],
                  driven_from_points(points), sim.free_q[0, rows], gaps, bar_force, analogs)
    return markers, truth


def write_synthetic_trial(spec: SyntheticSpec, c3d_path: str | Path) -> tuple[Path, Path, Truth]:
    """Write ``c3d_path`` (100 Hz, mm, labelled synthetic) and its :func:`truth_path` beside
    it; returns (the C3D's path, the truth's path, the truth). ``c3d_path`` is written as named
    (any suffix; ``bemore trial synth`` takes .c3d only); its folder is made as every output
    folder (:func:`bemore.paths.output_folder`)."""
    from bemore.paths import output_folder

    c3d_path = Path(c3d_path)
    markers, truth = synthesize(spec)
    output_folder(c3d_path.parent)
    write_c3d(c3d_path, markers, "bemore synthetic trial (not a recording)", truth.analogs)
    truth_file = truth_path(c3d_path)
    write_file(truth_file, json.dumps(truth.to_dict(), indent=1) + "\n")
    return c3d_path, truth_file, truth


def truth_path(c3d_path: str | Path) -> Path:
    """The ground truth's file of a synthetic trial: its stem + ``.truth.json`` beside it
    (``out/circle.c3d`` → ``out/circle.truth.json``)."""
    c3d_path = Path(c3d_path)
    return c3d_path.with_name(c3d_path.stem + ".truth.json")
