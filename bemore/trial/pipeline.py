"""``prepare_trial(path) -> Trial``: a motion-capture file made ready for the model.

Steps (settings in ``configs/trial.toml``, marker set in ``configs/markerset.toml``):
read → trim → required markers present → short gaps filled (cubic spline), long ones refused →
zero-lag Butterworth low-pass → joint centres in 3D → study plane from the bar markers →
projection → the acromion side's check and, for the trunk side, the arm's end from the arm
markers (:mod:`bemore.trial.acromion`) → driven coordinates (from the filtered joint centres,
or with ``[driven_filter] enabled`` from the unfiltered ones, each filtered at its own cutoff)
and seen free coordinates at the file's rate → quintic spline resampling to 1 kHz with
velocities and accelerations → initial free state. A C3D's bar force channels (``[forces]``,
:mod:`bemore.trial.forces`) are trimmed with the markers, projected onto the study plane and
resampled with them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from bemore.errors import DataError
from bemore.trial.acromion import AcromionCheck, ArmEnd, calibrate_arm_end, check_acromion_side
from bemore.trial.c3d import C3DFile, load_c3d, read_c3d
from bemore.trial.coordinates import (
    DRIVEN_NAMES,
    FREE_NAMES,
    driven_from_points,
    free_from_points,
    segment_angles,
    wrap,
)
from bemore.trial.filtering import (
    low_pass,
    spline_derivatives,
    start_value_and_rate,
    uniform_times,
)
from bemore.trial.forces import BarForces, bar_forces, read_analogs
from bemore.trial.gaps import fill_gaps
from bemore.trial.markers import Markers
from bemore.trial.markerset import (
    JOINT_CENTRE_INDEX,
    JOINT_CENTRE_NAMES,
    POINT_INDEX,
    POINT_NAMES,
    MarkerSet,
    TrialSettings,
    arm_marker_indices,
    check_required,
    joint_centres_3d,
    load_markerset,
    load_trial_settings,
    present_arm_markers,
)
from bemore.trial.noise import NoiseEstimate, marker_noise
from bemore.trial.plane import Plane, bar_axis, study_plane
from bemore.trial.readers import read_markers

_COST_INDEX = JOINT_CENTRE_INDEX
_SHOULDER, _ELBOW = POINT_INDEX["shoulder"], POINT_INDEX["elbow"]
_NECK, _HIP = POINT_INDEX["neck"], POINT_INDEX["hip"]

# Each segment's length as the joint centres show it: the two points it runs between.
# ``trunk.neck_to_hip`` is the model parameter of the same name (configs/models/real_gymnast.toml).
SEGMENT_ENDS = {
    "hand": ("bar", "wrist"),
    "forearm": ("wrist", "elbow"),
    "upper_arm": ("elbow", "shoulder"),
    "trunk.neck_to_hip": ("neck", "hip"),
    "head": ("neck", "head_top"),
    "thigh": ("hip", "knee"),
    "shank": ("knee", "ankle"),
    "foot": ("ankle", "toe"),
}


def segment_lengths(points: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
    """Median length (m) and spread (half the interquartile range, m) of each segment of
    :data:`SEGMENT_ENDS` over the frames of ``points`` (F, 10, 2) in POINT_NAMES order.

    >>> points = np.zeros((3, len(POINT_NAMES), 2))
    >>> points[:, POINT_NAMES.index("hip"), 0] = [0.47, 0.48, 0.49]
    >>> lengths, spread = segment_lengths(points)
    >>> round(lengths["trunk.neck_to_hip"], 3), round(spread["trunk.neck_to_hip"], 3)
    (0.48, 0.005)
    """
    lengths, spread = {}, {}
    for name, (start, end) in SEGMENT_ENDS.items():
        d = points[:, POINT_NAMES.index(end)] - points[:, POINT_NAMES.index(start)]
        distance = np.hypot(d[:, 0], d[:, 1])
        q1, median, q3 = np.percentile(distance, [25.0, 50.0, 75.0])
        lengths[name], spread[name] = float(median), float(q3 - q1) / 2.0
    return lengths, spread


@dataclass
class Trial:
    """A prepared trial, sampled at ``rate_hz`` (1 kHz by default) from t = 0.

    Attributes:
        t: (N,) s.
        joint_centres: (N, 7, 2) m in the model plane, order ``joint_centre_names``
            (bar, wrist, elbow, neck, hip, knee, ankle: the identification cost's points).
        points: (N, 10, 2) m, every named point of the model, order ``point_names``.
        driven: ``bemore.model.DrivenMotion`` of the 9 driven coordinates (engine order; the
            arrays below hold the same numbers).
        driven_q, driven_qd, driven_qdd: (N, 9) rad or m, per s, per s² (``driven_names``).
        free_q0, free_qd0: (5,) initial free state (``free_names``: bar_x m, bar_y m,
            hand_rotation rad, shoulder_ap m, shoulder_pd m) and its rates.
        free_seen: (N, 5) the free coordinates as the markers show them (shoulder ones:
            ``neck − shoulder`` in the upper arm's frame, see coordinates.py).
        source: the file read; rate_hz_original: its rate (Hz); notes: what was filled/trimmed.
        plane_origin, plane_axes: lab position (3,) m of the model origin and (3, 3) rows e_x,
            e_y, e_z of the model frame in lab coordinates.
        marker_noise_m: the markers' noise (m, one coordinate's standard deviation) estimated
            from the recording (:mod:`bemore.trial.noise`); NaN if it could not be;
            marker_noise_high_to_low: its spectrum's high-to-low density ratio (≈ 1 white;
            below ``FALL_OFF_LIMIT`` the noise is not white and marker_noise_m only a lower
            bound: :attr:`marker_noise`; NaN: not checked).
        segment_lengths_m, segment_length_spread_m: each segment's length as the joint centres
            show it (:data:`SEGMENT_ENDS`; median over the frames, m) and its spread (half the
            interquartile range, m): a rigid segment's length is constant, a spread well above
            the marker noise says the markers are not where the recipe assumes.
        bar_force: (N, 2) N, the force the bar's spring-dampers exert on its moving mass in
            the model plane (x, y) from the file's force channels, or None without them;
            bar_force_noise_n: (2,) N, each axis' noise (standard deviation of one raw analog
            sample); bar_force_rate_hz: the analog rate the noise is at (Hz);
            bar_force_sample_noise_n: (2,) N, each axis' noise per prepared sample (after the
            force's low-pass; the noise a model that follows the force leaves it).
        shoulder_centre_difference_mm: with a functional shoulder centre (the athlete profile's
            ``[shoulder_centre]``, :mod:`bemore.trial.score`), the RMS distance (mm, study
            plane) between it and the acromion-based shoulder it replaces; NaN without one.
        markerset, settings, shoulder_centre: what prepared the trial (the centre only when
            used); ``markers`` are its filtered markers, ``unfiltered`` the gap-filled,
            unfiltered positions of the markers the chain uses (required ones, then the arm
            markers present): what :mod:`bemore.trial.realisations` runs the chain on again.
    """

    t: np.ndarray
    joint_centres: np.ndarray
    points: np.ndarray
    driven: Any
    driven_q: np.ndarray
    driven_qd: np.ndarray
    driven_qdd: np.ndarray
    free_q0: np.ndarray
    free_qd0: np.ndarray
    free_seen: np.ndarray
    source: str
    rate_hz_original: float
    notes: tuple[str, ...]
    plane_origin: np.ndarray
    plane_axes: np.ndarray
    rate_hz: float = 1000.0
    marker_noise_m: float = float("nan")
    marker_noise_high_to_low: float = float("nan")
    segment_lengths_m: dict[str, float] = field(default_factory=dict)
    segment_length_spread_m: dict[str, float] = field(default_factory=dict)
    acromion_side: str = "arm"
    arm_end: ArmEnd | None = None
    shoulder_springs_observable: bool = True
    acromion_check: AcromionCheck | None = None
    joint_centre_names: tuple[str, ...] = JOINT_CENTRE_NAMES
    point_names: tuple[str, ...] = POINT_NAMES
    driven_names: tuple[str, ...] = DRIVEN_NAMES
    free_names: tuple[str, ...] = FREE_NAMES
    markers: Markers | None = field(default=None, repr=False)
    bar_force: np.ndarray | None = field(default=None, repr=False)
    bar_force_noise_n: np.ndarray | None = None
    bar_force_rate_hz: float = float("nan")
    bar_force_sample_noise_n: np.ndarray | None = None
    shoulder_centre_difference_mm: float = float("nan")
    # What prepared the trial (the marker set, the settings and the profile's functional
    # shoulder centre), so that the chain can be run again on noisy copies of its markers
    # (bemore.trial.realisations).
    markerset: MarkerSet | None = field(default=None, repr=False)
    settings: TrialSettings | None = field(default=None, repr=False)
    shoulder_centre: dict[str, Any] | None = field(default=None, repr=False)
    unfiltered: np.ndarray | None = field(default=None, repr=False)  # (F, M, 3) m, see above

    @property
    def marker_noise(self) -> NoiseEstimate:
        """The markers' noise as estimated (σ and whether it is only a lower bound)."""
        return NoiseEstimate(self.marker_noise_m, self.marker_noise_high_to_low)

    @property
    def duration_s(self) -> float:
        """Duration of the prepared trial (s)."""
        return float(self.t[-1])

    def with_initial_bar_displacement(self, displacement_m: tuple[float, float]) -> Trial:
        """The same trial with the origin moved so that the bar starts at ``displacement_m``
        (x, y in m) from it, e.g. the static deflection a candidate's bar springs give
        (``model.equilibrium``): points, joint centres, seen bar positions and free_q0 shift.
        """
        shift = np.asarray(displacement_m, dtype=float) - self.free_q0[:2]
        free_seen = self.free_seen.copy()
        free_seen[:, :2] += shift
        free_q0 = self.free_q0.copy()
        free_q0[:2] += shift
        origin = self.plane_origin - shift[0] * self.plane_axes[0] - shift[1] * self.plane_axes[1]
        note = f"origin moved: bar starts at ({displacement_m[0]:.4f}, {displacement_m[1]:.4f}) m"
        return replace(self, joint_centres=self.joint_centres + shift, points=self.points + shift,
                       free_seen=free_seen, free_q0=free_q0, plane_origin=origin,
                       notes=(*self.notes, note))

    def summary(self) -> dict[str, Any]:
        """JSON-ready description (no time series): source, rates, duration, initial state."""
        return {
            "source": self.source,
            "rate_hz_original": self.rate_hz_original,
            "rate_hz": self.rate_hz,
            "frames": int(self.t.size),
            "duration_s": self.duration_s,
            "free_q0": dict(zip(self.free_names, map(float, self.free_q0), strict=True)),
            "free_qd0": dict(zip(self.free_names, map(float, self.free_qd0), strict=True)),
            "plane_origin_m": self.plane_origin.tolist(),
            "plane_axes": self.plane_axes.tolist(),
            "marker_noise_mm": self.marker_noise_m * 1e3,
            "marker_noise_high_to_low": (self.marker_noise_high_to_low
                                         if np.isfinite(self.marker_noise_high_to_low) else None),
            "marker_noise_lower_bound": self.marker_noise.lower_bound,
            "marker_noise_note": self.marker_noise.note(),
            "segment_lengths_m": self.segment_lengths_m,
            "segment_length_spread_mm": {name: spread * 1e3 for name, spread
                                         in self.segment_length_spread_m.items()},
            "bar_force": None if self.bar_force is None else {
                "noise_n": self.bar_force_noise_n.tolist(),
                "analog_rate_hz": self.bar_force_rate_hz,
                "sample_noise_n": self.bar_force_sample_noise_n.tolist(),
                "peak_n": np.max(np.abs(self.bar_force), axis=0).tolist(),
            },
            "shoulder_centre_difference_mm": self.shoulder_centre_difference_mm,
            "conventions": self.conventions(),
            "notes": list(self.notes),
        }

    def conventions(self) -> dict[str, Any]:
        """JSON-ready record of the acromion convention: side declared, arm-end recipe,
        whether the shoulder springs are observable, the markers' side check."""
        return {
            "acromion_side": self.acromion_side,
            "arm_end": self.arm_end.to_dict() if self.arm_end is not None else None,
            "shoulder_springs_observable": self.shoulder_springs_observable,
            "acromion_check": (self.acromion_check.to_dict() if self.acromion_check is not None
                               else None),
        }

    def summary_json(self) -> str:
        """:meth:`summary` as indented JSON text."""
        return json.dumps(self.summary(), indent=2)


def _driven_motion(t: np.ndarray, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> Any:
    """The engine's DrivenMotion for these arrays (imported here: the engine is heavier)."""
    from bemore.model import DrivenMotion

    return DrivenMotion(t=t, q=q, qd=qd, qdd=qdd)


def trim_mask(t: np.ndarray, start_s: float, end_s: float) -> np.ndarray:
    """(F,) True for the frames with ``start_s ≤ t − t[0] ≤ end_s`` (s; ``end_s`` 0: to the
    end)."""
    relative = t - t[0]
    keep = relative >= start_s - 1e-9
    if end_s:
        keep &= relative <= end_s + 1e-9
    return keep


def trim(markers: Markers, start_s: float, end_s: float) -> Markers:
    """Keep the frames with ``start_s ≤ t − t[0] ≤ end_s`` (``end_s`` 0: to the end), t from 0."""
    relative = markers.t - markers.t[0]
    keep = trim_mask(markers.t, start_s, end_s)
    if keep.sum() < 2:
        raise DataError(
            f"{markers.source}: trimming to {start_s:g}–{end_s or relative[-1]:g} s leaves "
            f"{int(keep.sum())} frame(s) of a {relative[-1]:.3f} s recording ([trim] in trial.toml)"
        )
    note = None
    if not keep.all():
        note = f"trimmed to {relative[keep][0]:.3f}–{relative[keep][-1]:.3f} s of the recording"
    t = relative[keep] - relative[keep][0]
    return Markers(t, markers.positions[keep], markers.labels, markers.rate_hz, markers.source,
                   markers.unit_in_file, (*markers.notes, note) if note else markers.notes)


def fill_markers(
    markers: Markers, markerset: MarkerSet, settings: TrialSettings
) -> tuple[Markers, list[int]]:
    """Trim, check the required markers and fill their short gaps (and those of the arm
    markers present, ``[conventions]``); also their indices (required ones first)."""
    markers = trim(markers, settings.trim.start_s, settings.trim.end_s)
    indices = check_required(markers, markerset)
    indices += [index for index in arm_marker_indices(markers, markerset)
                if index not in indices]
    positions = markers.positions.copy()
    notes = list(markers.notes)
    for index in indices:
        filled, gaps = fill_gaps(markers.t, positions[:, index], markers.labels[index],
                                 settings.gaps.max_gap_s, markers.source)
        positions[:, index] = filled
        notes.extend(f"filled {gap.describe()}" for gap in gaps)
    return Markers(markers.t, positions, markers.labels, markers.rate_hz, markers.source,
                   markers.unit_in_file, tuple(notes)), indices


def low_pass_markers(markers: Markers, indices: list[int], settings: TrialSettings) -> Markers:
    """The markers at ``indices`` low-passed (zero-lag Butterworth of ``[filter]``)."""
    positions = markers.positions.copy()
    positions[:, indices] = low_pass(positions[:, indices], markers.rate_hz,
                                     settings.filter.cutoff_hz, settings.filter.order,
                                     markers.source, settings.filter.edge_cycles)
    note = (f"low-pass Butterworth {settings.filter.cutoff_hz:g} Hz, order "
            f"{settings.filter.order} forward-backward")
    return markers.with_positions(positions, note)


def low_pass_driven(q: np.ndarray, rate_hz: float, settings: TrialSettings,
                    source: str = "trial") -> np.ndarray:
    """(F, 9) driven coordinates (rad, m) low-passed column by column, each with its
    ``[driven_filter.cutoff_hz]`` cutoff (zero-lag Butterworth of ``[filter]`` order); (F, …, 9)
    gives (F, …, 9)."""
    cutoffs = settings.driven_filter.cutoff_hz.model_dump()
    out = np.empty_like(q)
    for cutoff in sorted(set(cutoffs.values())):
        columns = [DRIVEN_NAMES.index(name) for name, value in cutoffs.items() if value == cutoff]
        names = ", ".join(DRIVEN_NAMES[c] for c in columns)
        out[..., columns] = low_pass(q[..., columns], rate_hz, cutoff, settings.filter.order,
                                   source, settings.driven_filter.edge_cycles,
                                   f"[driven_filter.cutoff_hz] {names}")
    return out


def _driven_note(settings: TrialSettings) -> tuple[str, ...]:
    """The note saying how the driven coordinates were filtered, if on their own."""
    if not settings.driven_filter.enabled:
        return ()
    cutoffs = settings.driven_filter.cutoff_hz.model_dump()
    return ("driven coordinates from unfiltered joint centres, low-passed at "
            + ", ".join(f"{name} {value:g}" for name, value in cutoffs.items()) + " Hz",)


def clean_markers(markers: Markers, markerset: MarkerSet, settings: TrialSettings) -> Markers:
    """Trim, check the required markers, fill their short gaps and low-pass them (m)."""
    filled, indices = fill_markers(markers, markerset, settings)
    return low_pass_markers(filled, indices, settings)


def find_plane(markers: Markers, markerset: MarkerSet, settings: TrialSettings) -> Plane:
    """The model frame of a cleaned trial (bar axis, vertical, chest towards +x at the start)."""
    label = markerset.label
    bar = np.stack([markers.marker(label(name)) for name in markerset.plane.bar_markers], axis=1)
    return study_plane(
        bar_axis(bar),
        markerset.plane.vertical_axis,
        markers.marker(label(markerset.plane.back_marker))[0],
        markers.marker(label(markerset.plane.front_marker))[0],
        bar[0].mean(axis=0),
        settings.plane.initial_bar_displacement_m,
    )


def initial_free_rates(
    filled: Markers, plane: Plane, markerset: MarkerSet, settings: TrialSettings
) -> np.ndarray:
    """(5,) initial rates of the free coordinates from the gap-filled, unfiltered markers
    (m/s, rad/s; FREE_NAMES order).

    Bar velocity: a least-squares quadratic over the first ``[initial_state] fit_window_s``.
    Rotation rate about the bar (the hand's): with ``rotation_from = "forearm"`` (default) the
    rate of the absolute forearm angle (240 mm wrist–elbow segment, half the hand's noise) by
    the same quadratic, minus the wrist angle's rate from a cubic over ``wrist_window_s`` (a
    slow angle: a long fit averages its noise); ``"hand"``: the hand angle's quadratic. On 120
    synthetic circles (1.5, 1.6, 2.0 s; 1 mm noise): 0.056 rad/s RMS instead of 0.079
    (docs/trials.md). The shoulder translations' rates are 0 (not seen).
    """
    return free_rates_from_points(filled.t, plane.project(joint_centres_3d(filled, markerset)),
                                  settings)


def free_rates_from_points(t: np.ndarray, points: np.ndarray, settings: TrialSettings
                           ) -> np.ndarray:
    """(5,) initial free rates (:func:`initial_free_rates`) from the unfiltered joint centres
    (F, 10, 2) m in the plane at times ``t`` (F,) s; (F, …, 10, 2) points give (…, 5)."""
    seen = free_from_points(points)
    window = settings.initial_state.fit_window_s
    _, rates = start_value_and_rate(t, seen, window)
    if settings.initial_state.rotation_from == "forearm":
        wrist = driven_from_points(points)[..., DRIVEN_NAMES.index("wrist")]
        hand = FREE_NAMES.index("hand_rotation")
        _, forearm_rate = start_value_and_rate(t, seen[..., hand] + wrist, window)
        _, wrist_rate = start_value_and_rate(t, wrist, settings.initial_state.wrist_window_s,
                                             degree=3)
        rates[..., hand] = forearm_rate - wrist_rate
    rates[..., 3:] = 0.0
    return rates


def _initial_positions(seen: np.ndarray, points: np.ndarray, wrist_rad: float,
                       settings: TrialSettings) -> np.ndarray:
    """(5,) initial free positions (m, rad): the seen bar, the rotation about the bar, the
    shoulder springs at rest.

    ``seen``: (5,) free coordinates seen at the first frame; ``points``: (10, 2) the filtered
    joint centres there (m); ``wrist_rad``: the prepared wrist angle there.
    Rotation about the bar: with ``rotation_from = "forearm"`` the forearm's absolute angle
    (240 mm segment) minus the prepared wrist angle, so that the simulated chain starts with the
    body where the joint centres see it whatever filtered the wrist angle (the hand's own 75 mm
    angle is a one-sided end fit with 0.3° of noise: with the wrist filtered on its own it
    turned the whole body by that much, and a near-critical circle then fitted trunk.mass 37 %
    off; docs/trials.md). With the wrist computed from the same points (driven filter off) it
    is the seen hand angle. ``"hand"``: the seen hand angle.
    The seen shoulder translations (``neck − shoulder``) are exact on synthetic data but carry
    the C7/STERNUM neck's offset from the shoulder joint on real data (docs/trials.md), and the
    default origin starts the bar springs at rest too: both springs start unloaded.
    """
    initial = seen.copy()
    if settings.initial_state.rotation_from == "forearm":
        forearm = segment_angles(points[None])["forearm"][0]
        hand = FREE_NAMES.index("hand_rotation")
        initial[hand] = seen[hand] + wrap(forearm - wrist_rad - seen[hand])
    initial[3:] = 0.0
    return initial


def _joint_centres(markers: Markers, markerset: MarkerSet,
                   shoulder_centre: dict[str, Any] | None) -> np.ndarray:
    """(F, 10, 3) joint centres (lab, m), the shoulder from the functional centre if given."""
    centres = joint_centres_3d(markers, markerset)
    if shoulder_centre is not None:
        from bemore.trial.score import acromion_correction

        centres[:, POINT_NAMES.index("shoulder")] += acromion_correction(markers,
                                                                         shoulder_centre)
    return centres


def prepare_markers(
    markers: Markers, markerset: MarkerSet | None = None, settings: TrialSettings | None = None,
    forces: BarForces | None = None, shoulder_centre: dict[str, Any] | None = None,
) -> Trial:
    """Prepare already-read markers (see the module docstring); returns a :class:`Trial`.

    ``forces``: the bar's force at the markers' frames (:func:`bemore.trial.forces.bar_forces`),
    or None. ``shoulder_centre``: the athlete profile's functional gleno-humeral centre
    (``[shoulder_centre]`` table, ``bemore trial score``): the shoulder point is the acromions
    moved by its acromion → centre offset (turned with the thorax) instead of the acromions
    alone, and the trial says how far the two are apart."""
    markerset = markerset or load_markerset()
    settings = settings or load_trial_settings()
    if forces is not None:
        if forces.force_lab.shape[0] != markers.n_frames:
            raise DataError(f"{markers.source}: bar forces at {forces.force_lab.shape[0]} "
                            f"frames, markers at {markers.n_frames}")
        forces = forces.trimmed(trim_mask(markers.t, settings.trim.start_s,
                                          settings.trim.end_s))
    filled, indices = fill_markers(markers, markerset, settings)
    clean = low_pass_markers(filled, indices, settings)
    required = indices[: len(markerset.required_markers())]
    estimate = marker_noise(filled.positions[:, required], clean.positions[:, required],
                            filled.rate_hz, settings.filter.cutoff_hz, settings.filter.order,
                            round(settings.filter.edge_cycles * filled.rate_hz
                                  / settings.filter.cutoff_hz))
    noise = estimate.sigma_m
    plane = find_plane(clean, markerset, settings)
    free_qd0 = initial_free_rates(filled, plane, markerset, settings)
    points = plane.project(joint_centres_3d(clean, markerset))
    arm = _arm_centre(clean, markerset, plane)
    check = check_acromion_side(markerset.conventions.acromion_side, points[:, _ELBOW],
                                points[:, _NECK], points[:, _HIP], points[:, _SHOULDER], arm,
                                noise, estimate.lower_bound)
    side = markerset.conventions.acromion_side
    # The profile's functional centre moves the acromion-based shoulder (acromions on the arm's
    # side); with the acromions on the trunk's side the arm markers place the arm's end.
    centre = shoulder_centre if side == "arm" else None
    difference = float("nan")
    if centre is not None:
        acromions = points[:, _SHOULDER].copy()
        points = plane.project(_joint_centres(clean, markerset, centre))
        if np.isnan(points[:, _SHOULDER]).any():
            raise DataError(f"{markers.source}: the shoulder centre's thorax markers are not "
                            "all seen at every frame")
        apart = np.linalg.norm(points[:, _SHOULDER] - acromions, axis=1)
        difference = float(np.sqrt(np.mean(apart**2))) * 1e3
    arm_end = None
    if side == "trunk" and arm is not None:
        # The shoulder point is the arm's end, placed from the elbow and the arm markers
        # (bemore.trial.acromion); the acromions only calibrate where it sits.
        arm_end = calibrate_arm_end(points[:, _ELBOW], arm, points[:, _SHOULDER],
                                    tuple(present_arm_markers(clean, markerset)))
        points[:, _SHOULDER] = arm_end.place(points[:, _ELBOW], arm)
    if settings.driven_filter.enabled:
        # Slow relative angles of fast-turning segments, each filtered at its own cutoff
        # (docs/trials.md, "Accuracy").
        raw_points = plane.project(_joint_centres(filled, markerset, centre))
        if arm_end is not None:
            raw_points[:, _SHOULDER] = arm_end.place(raw_points[:, _ELBOW],
                                                     _arm_centre(filled, markerset, plane))
        q = low_pass_driven(driven_from_points(raw_points), filled.rate_hz, settings,
                            markers.source)
    else:
        q = driven_from_points(points)
    free = free_from_points(points)
    t_new = uniform_times(clean.duration_s, settings.resample.rate_hz)
    stacked = np.concatenate([q, free, points.reshape(len(clean.t), -1)], axis=1)
    force_columns = 0
    if forces is not None:
        axes = np.stack([plane.e_x, plane.e_y])  # (2, 3): lab → model plane
        stacked = np.concatenate([stacked, forces.force_lab @ axes.T], axis=1)
        force_columns = 2
    values, rates, accelerations = spline_derivatives(clean.t, stacked, t_new)
    bar_force, force_noise = None, None
    if force_columns:
        bar_force = values[:, -force_columns:]
        values = values[:, :-force_columns]
        # Each model axis' noise: the channels along each lab axis, projected.
        variance = np.nan_to_num(forces.noise_n) ** 2
        force_noise = np.sqrt((axes**2) @ variance)
    n_driven, n_free = len(DRIVEN_NAMES), len(FREE_NAMES)
    driven_q = values[:, :n_driven]
    driven_qd = rates[:, :n_driven]
    driven_qdd = accelerations[:, :n_driven]
    free_seen = values[:, n_driven : n_driven + n_free]
    all_points = values[:, n_driven + n_free :].reshape(len(t_new), len(POINT_NAMES), 2)
    lengths, spread = segment_lengths(all_points)
    observable = side == "arm" or arm_end is not None
    centre_note = () if centre is None else (
        f"shoulder: functional centre ({centre.get('method', 'SCoRE')}, "
        f"{centre.get('side', '')} side, profile) instead of the acromions alone: "
        f"{difference:.1f} mm RMS apart in the plane",)
    if shoulder_centre is not None and centre is None:
        centre_note = ("shoulder: the profile's functional centre is not used (acromions on "
                       "the trunk's side: the arm markers place the arm's end)",)
    notes = (*clean.notes, *_driven_note(settings), *_acromion_notes(side, arm_end, observable),
             *centre_note,
             f"resampled {clean.rate_hz:g} Hz → {settings.resample.rate_hz:g} Hz (quintic spline)")
    return Trial(
        t=t_new,
        joint_centres=all_points[:, _COST_INDEX],
        points=all_points,
        driven=_driven_motion(t_new, driven_q, driven_qd, driven_qdd),
        driven_q=driven_q,
        driven_qd=driven_qd,
        driven_qdd=driven_qdd,
        free_q0=_initial_positions(free_seen[0], points[0], q[0, DRIVEN_NAMES.index("wrist")],
                                   settings),
        free_qd0=free_qd0,
        free_seen=free_seen,
        source=markers.source,
        rate_hz_original=float(markers.rate_hz),
        notes=notes,
        plane_origin=plane.origin,
        plane_axes=np.stack([plane.e_x, plane.e_y, plane.e_z]),
        rate_hz=settings.resample.rate_hz,
        marker_noise_m=noise,
        marker_noise_high_to_low=estimate.high_to_low,
        segment_lengths_m=lengths,
        segment_length_spread_m=spread,
        acromion_side=side,
        arm_end=arm_end,
        shoulder_springs_observable=observable,
        acromion_check=check,
        markers=clean,
        bar_force=bar_force,
        bar_force_noise_n=force_noise,
        bar_force_rate_hz=forces.analog_rate_hz if forces is not None else float("nan"),
        bar_force_sample_noise_n=(None if force_noise is None
                                  else force_noise * np.sqrt(forces.kept_noise_fraction)),
        shoulder_centre_difference_mm=difference,
        markerset=markerset,
        settings=settings,
        shoulder_centre=centre,
        unfiltered=filled.positions[:, indices],
    )


def _arm_centre(markers: Markers, markerset: MarkerSet, plane: Plane) -> np.ndarray | None:
    """(F, 2) centre of the arm markers present (model plane, m), None without any."""
    indices = arm_marker_indices(markers, markerset)
    if not indices:
        return None
    return plane.project(np.mean(markers.positions[:, indices], axis=1))


def _acromion_notes(side: str, arm_end: ArmEnd | None, observable: bool) -> tuple[str, ...]:
    """The note saying where the shoulder point comes from on the trunk side."""
    if side == "arm":
        return ()
    if not observable:
        return ("acromions on the trunk's side and no marker fixed on the arm in the file: the "
                "shoulder springs are UNOBSERVABLE (the arm runs elbow → acromions)",)
    return (f"arm end from the elbow and {', '.join(arm_end.markers)}: "
            f"{arm_end.along:.3f} × the elbow–arm-marker distance along the arm "
            f"({arm_end.length_m * 1e3:.1f} mm at the median), {arm_end.across_m * 1e3:+.1f} mm "
            "across (calibrated on the acromions, on the trunk's side)",)


def prepare_trial(
    path: str | Path,
    markerset: MarkerSet | str | Path | None = None,
    settings: TrialSettings | str | Path | None = None,
    shoulder_centre: dict[str, Any] | None = None,
) -> Trial:
    """Read and prepare a motion-capture file (C3D, TRC or CSV) for the model.

    ``markerset`` and ``settings`` are schema objects or TOML paths (default: the bundled
    ``configs/markerset.toml`` and ``configs/trial.toml``); ``shoulder_centre``: the athlete
    profile's functional shoulder centre (:func:`prepare_markers`). Any problem raises one
    :class:`~bemore.errors.DataError` or :class:`~bemore.errors.ConfigError` line.
    """
    if not isinstance(markerset, MarkerSet):
        markerset = load_markerset(markerset)
    if not isinstance(settings, TrialSettings):
        settings = load_trial_settings(settings)
    markers, source = read_recording(path)
    return prepare_markers(markers, markerset, settings,
                           read_bar_forces(source, settings, markers.n_frames), shoulder_centre)


def read_recording(path: str | Path) -> tuple[Markers, Path | C3DFile]:
    """The markers of a C3D, TRC or CSV file, and what its force channels are read from
    (:func:`read_bar_forces`): the C3D as read for the markers (one ezc3d read for both), or
    the path."""
    path = Path(path)
    if path.suffix.lower() == ".c3d" and path.is_file() and path.stat().st_size > 0:
        c3d = load_c3d(path)
        return read_c3d(c3d), c3d
    return read_markers(path), path  # its own one-line errors: missing, empty, unknown format


def read_bar_forces(path: str | Path | C3DFile, settings: TrialSettings, n_frames: int
                    ) -> BarForces | None:
    """The bar's force channels of ``path`` (a file, or a C3D already read) at its
    ``n_frames`` marker frames (N, lab frame) per ``settings.forces``; None for a file without
    them (TRC and CSV carry none: with ``use = "required"`` they are refused)."""
    forces = settings.forces
    if forces.use == "off" or not forces.channels:
        return None
    if isinstance(path, C3DFile):
        analogs, path = read_analogs(path), path.path
    else:
        analogs = read_analogs(path) if Path(path).suffix.lower() == ".c3d" else None
    if analogs is None and forces.use == "required":
        raise DataError(f"{path}: no analog channels, and [forces] use = 'required' needs the "
                        f"bar force channels {', '.join(c.label for c in forces.channels)}")
    return bar_forces(analogs, forces, n_frames, settings.filter.order)
