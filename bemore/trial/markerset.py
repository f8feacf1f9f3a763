"""Marker set, label mapping and joint-centre recipes (``configs/markerset.toml``), and the
trial preparation settings (``configs/trial.toml``).

A joint centre is the mean, in 3D, of the markers its recipe lists (left and right averaged);
the plane projection comes afterwards (:mod:`bemore.trial.plane`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, PositiveFloat, field_validator, model_validator

from bemore.config import Section, load_toml_model
from bemore.errors import DataError
from bemore.paths import default_config
from bemore.trial.forces import ForceSettings
from bemore.trial.markers import Markers

# The model's named points (docs/model.md), in the engine's order.
POINT_NAMES = ("bar", "wrist", "elbow", "shoulder", "neck", "hip", "knee", "ankle", "toe",
               "head_top")
# The seven joint centres of the identification cost, in the order Trial.joint_centres uses.
JOINT_CENTRE_NAMES = ("bar", "wrist", "elbow", "neck", "hip", "knee", "ankle")
#: Where each point sits in POINT_NAMES' order (the last axis of a trial's point arrays).
POINT_INDEX = {name: index for index, name in enumerate(POINT_NAMES)}
#: The joint centres' positions among the points, in JOINT_CENTRE_NAMES' order.
JOINT_CENTRE_INDEX = [POINT_INDEX[name] for name in JOINT_CENTRE_NAMES]


class PlaneMarkers(Section):
    """Markers that define the study plane."""

    bar_markers: list[str] = Field(min_length=2, description="along the bar's axis")
    vertical_axis: Literal["X", "Y", "Z"] = "Z"
    back_marker: str = Field(description="e.g. C7: the chest faces away from it")
    front_marker: str = Field(description="e.g. STERNUM: the chest faces +x at the first frame")


class ScoreMarkers(Section):
    """Markers of the functional shoulder centre's calibration (``bemore trial score``,
    :mod:`bemore.trial.score`): a thorax cluster that bar trials also carry, and an upper-arm
    cluster per side (calibration only)."""

    thorax: list[str] = Field(min_length=3, description="rigid with the model's trunk")
    upper_arm_right: list[str] = Field(min_length=3)
    upper_arm_left: list[str] = Field(min_length=3)
    acromion_right: str = "R_ACROMION"
    acromion_left: str = "L_ACROMION"
    min_spread_rad: PositiveFloat = Field(
        0.05, description="weakest-direction rotation spread below which it is refused")


class Conventions(Section):
    """Where markers sit relative to the model's joints (docs/trials.md, "Acromion side").

    ``acromion_side``: the acromion markers (the ``shoulder`` recipe) ride on the ARM's end of
    the shoulder spring-dampers ("arm", the humeral head) or on the TRUNK's side ("trunk", the
    shoulder girdle). For the trunk side the arm's end comes from ``arm_markers``, markers fixed
    on the upper arm (:mod:`bemore.trial.acromion`); without any in the file the shoulder
    springs are unobservable and the fit holds them at their seed values.
    """

    acromion_side: Literal["arm", "trunk"] = "arm"
    arm_markers: list[str] = Field(
        default_factory=list, description="markers fixed on the upper arm (both sides averaged)")


class MarkerSet(Section):
    """``configs/markerset.toml``: label renames, plane markers, joint-centre recipes,
    conventions."""

    labels: dict[str, str] = Field(default_factory=dict)
    plane: PlaneMarkers
    joint_centres: dict[str, list[str]]
    score: ScoreMarkers | None = None
    conventions: Conventions = Conventions()

    @field_validator("joint_centres")
    @classmethod
    def _every_point(cls, recipes: dict[str, list[str]]) -> dict[str, list[str]]:
        missing = [name for name in POINT_NAMES if name not in recipes]
        unknown = [name for name in recipes if name not in POINT_NAMES]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        if unknown:
            raise ValueError(f"unknown {', '.join(unknown)} (allowed: {', '.join(POINT_NAMES)})")
        empty = [name for name, recipe in recipes.items() if not recipe]
        if empty:
            raise ValueError(f"{', '.join(empty)} lists no marker")
        return recipes

    def label(self, canonical: str) -> str:
        """The label a file uses for the canonical marker name."""
        return self.labels.get(canonical, canonical)

    def required_markers(self) -> list[str]:
        """Every canonical marker a joint centre or the plane needs, each once, in order."""
        names = [*self.plane.bar_markers, self.plane.back_marker, self.plane.front_marker]
        for recipe in self.joint_centres.values():
            names.extend(recipe)
        return list(dict.fromkeys(names))


class Trim(Section):
    """Part of the recording kept (s from its first frame)."""

    start_s: float = Field(0.0, ge=0.0)
    end_s: float = Field(0.0, ge=0.0, description="0 keeps to the end")

    @model_validator(mode="after")
    def _ordered(self) -> Trim:
        if self.end_s and self.end_s <= self.start_s:
            raise ValueError(f"end_s ({self.end_s}) must be 0 or above start_s ({self.start_s})")
        return self


class Gaps(Section):
    """Gap filling."""

    max_gap_s: float = Field(0.1, ge=0.0, le=1.0, description="longest gap filled (s)")


class DrivenCutoffs(Section):
    """Cutoff (Hz) of each driven coordinate's low-pass.

    Slow relative angles on short segments can take lower cutoffs: the 75 mm hand turns the
    0.5 mm noise of the wrist joint centre into 0.57° per frame (docs/trials.md, "Accuracy").
    """

    wrist: PositiveFloat = 3.0
    forearm_length: PositiveFloat = 4.0
    elbow: PositiveFloat = 6.0
    upper_arm_length: PositiveFloat = 4.0
    shoulder_flexion: PositiveFloat = 6.0
    neck: PositiveFloat = 6.0
    hip: PositiveFloat = 6.0
    knee: PositiveFloat = 6.0
    ankle: PositiveFloat = 6.0


class LowPass(Section):
    """Zero-lag Butterworth low-pass of the marker trajectories (the joint centres)."""

    cutoff_hz: PositiveFloat = 6.0
    order: int = Field(4, ge=1, le=8, description="design order, applied forward and backward")
    edge_cycles: float = Field(0.9, ge=0.3, le=3.0,
                               description="quadratic end fits over edge_cycles / cutoff_hz s")


class DrivenFilter(Section):
    """On (default): the driven coordinates computed from the UNFILTERED joint centres and
    low-passed each at its own cutoff (order of ``[filter]``). Off: they are computed from the
    filtered markers (one filter for the whole chain)."""

    enabled: bool = True
    edge_cycles: float = Field(1.2, ge=0.3, le=3.0,
                               description="quadratic end fits over edge_cycles / cutoff_hz s")
    cutoff_hz: DrivenCutoffs = DrivenCutoffs()


class Resample(Section):
    """Rate of the prepared trial."""

    rate_hz: float = Field(1000.0, ge=10.0, le=10_000.0)


class PlaneSettings(Section):
    """What the markers cannot tell about the plane's origin."""

    initial_bar_displacement_m: tuple[float, float] = (0.0, 0.0)


class InitialState(Section):
    """How the initial rates of the free coordinates are estimated."""

    fit_window_s: float = Field(0.25, ge=0.02, le=1.0,
                                description="least-squares quadratic over the first this-many s")
    rotation_from: Literal["hand", "forearm"] = Field(
        "forearm", description="rate about the bar: of the hand, or forearm minus wrist rates")
    wrist_window_s: float = Field(1.0, ge=0.1, le=3.0,
                                  description="least-squares cubic of the wrist angle (s)")


class TrialSettings(Section):
    """``configs/trial.toml``: how a trial is prepared."""

    trim: Trim = Trim()
    gaps: Gaps = Gaps()
    filter: LowPass = LowPass()
    driven_filter: DrivenFilter = DrivenFilter()
    resample: Resample = Resample()
    plane: PlaneSettings = PlaneSettings()
    initial_state: InitialState = InitialState()
    forces: ForceSettings = ForceSettings()


def load_markerset(path: str | Path | None = None) -> MarkerSet:
    """The marker set (default: ``configs/markerset.toml``)."""
    return load_toml_model(path or default_config("markerset.toml"), MarkerSet)


def load_trial_settings(path: str | Path | None = None) -> TrialSettings:
    """The preparation settings (default: ``configs/trial.toml``)."""
    return load_toml_model(path or default_config("trial.toml"), TrialSettings)


def check_required(markers: Markers, markerset: MarkerSet) -> list[int]:
    """Indices in ``markers`` of every required marker; absent or NaN-only ones raise DataError."""
    indices, absent = [], []
    for name in markerset.required_markers():
        index = markers.find(markerset.label(name))
        if index is None:
            absent.append(markerset.label(name))
        else:
            indices.append(index)
    if absent:
        raise DataError(
            f"{markers.source}: required marker(s) missing from the file: {', '.join(absent)}"
        )
    for index in indices:
        if np.isnan(markers.positions[:, index]).all():
            raise DataError(
                f"{markers.source}: marker {markers.labels[index]} has no valid sample "
                f"({markers.t[0]:.3f}–{markers.t[-1]:.3f} s)"
            )
    return indices


def present_arm_markers(markers: Markers, markerset: MarkerSet) -> dict[str, int]:
    """Canonical name → index in ``markers`` of the ``[conventions] arm_markers`` present in
    the file with at least one valid sample (optional markers: absent ones are left out)."""
    present = {}
    for name in markerset.conventions.arm_markers:
        index = markers.find(markerset.label(name))
        if index is not None and not np.isnan(markers.positions[:, index]).all():
            present[name] = index
    return present


def arm_marker_indices(markers: Markers, markerset: MarkerSet) -> list[int]:
    """Indices in ``markers`` of the arm markers present (:func:`present_arm_markers`)."""
    return list(present_arm_markers(markers, markerset).values())


def joint_centres_3d(markers: Markers, markerset: MarkerSet) -> np.ndarray:
    """(F, 10, 3) joint centres in m, laboratory frame, in :data:`POINT_NAMES` order."""
    centres = np.empty((markers.n_frames, len(POINT_NAMES), 3))
    for k, name in enumerate(POINT_NAMES):
        recipe = markerset.joint_centres[name]
        stack = [markers.marker(markerset.label(label)) for label in recipe]
        centres[:, k] = np.mean(stack, axis=0)
    return centres
