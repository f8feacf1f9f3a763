"""Which side of the shoulder spring-dampers the acromion markers ride on, and the arm's end
when they ride on the trunk's (docs/trials.md, "Acromion side").

The model's shoulder has two spring-dampers (``shoulder_ap``, ``shoulder_pd``) between the
upper arm's end A (the humeral head) and the trunk's shoulder joint S. Acromion markers on
the ARM side see A; on the TRUNK side they see S = A + the springs' deflection, which reaches
several centimetres in a clear hip circle. The trial chain needs A: the upper arm runs elbow → A
and the deflection is the model's to simulate (counting it in the driven arm as well counts it
twice).

**Arm-end recipe (trunk side).** Markers fixed on the upper arm (``[conventions] arm_markers``,
e.g. R/L_TRICEPS, their centre T) and the elbow centre E give the upper arm's line in the plane:
u = (T − E)/|T − E|, v = u turned by +90°. A is fixed in that frame, at ``along``·(T − E) +
``across``·v from the elbow: the along-the-arm part scales with the projected E–T distance
(the upper arm's apparent length changes as it turns out of the plane, and a marker on it shows
the same relative change), the across part does not. The two numbers are calibrated on the
trial itself: the acromions' median position in that frame, i.e. A where the springs sit at
their median deflection. That median (a few mm) is the recipe's bias; the identification fits
it as the shoulder springs' rest offsets (``shoulder.rest_offset_ap/pd``, docs/identify.md).
Without a marker fixed on the arm nothing separates A from S: the springs are unobservable.

**Side check.** If the acromions ride on the trunk, their position in the trunk's frame (origin
the neck centre, x towards the hip) is constant; if they ride on the arm, their position against
the arm-end recipe (calibrated on them) is. Each spread is the RMS distance from that constant
(mm); a side is supported when its spread is within ``SPREAD_LIMIT`` × the marker noise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from bemore.trial.noise import NOISE_CEILING_M

SPREAD_LIMIT = 4.0  # spread / marker noise up to which the acromions are fixed on a side
NOISE_FLOOR_M = 1e-4  # marker noise used at least (m)


@dataclass(frozen=True)
class ArmEnd:
    """Where the arm's end sits on the line elbow → arm markers (see the module docstring).

    ``along``: the arm end's distance along the line in units of the elbow–arm-marker distance;
    ``across_m``: its distance from the line, towards +v (m); ``length_m``: ``along`` × the
    median elbow–arm-marker distance (the upper arm's median apparent length, m);
    ``markers``: the labels averaged.
    """

    along: float
    across_m: float
    length_m: float
    markers: tuple[str, ...]

    def place(self, elbow: np.ndarray, arm: np.ndarray) -> np.ndarray:
        """(F, 2) arm end (m) from the elbow centre and the arm markers' centre ((F, 2) m)."""
        return place_arm_end(elbow, arm, self.along, self.across_m)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (m)."""
        return {**asdict(self), "markers": list(self.markers)}


def calibrate_arm_end(elbow: np.ndarray, arm: np.ndarray, acromion: np.ndarray,
                      markers: tuple[str, ...] = ()) -> ArmEnd:
    """The arm-end recipe from the elbow centre, the arm markers' centre and the acromions'
    centre ((F, 2) m each, frames with NaN ignored): their median position in the arm's frame.

    >>> elbow = np.zeros((3, 2)); arm = np.array([[0.15, 0.0], [0.0, 0.15], [0.12, 0.09]])
    >>> acromion = 2.0 * arm + 0.01 * np.stack([-arm[:, 1], arm[:, 0]], -1) / 0.15
    >>> recipe = calibrate_arm_end(elbow, arm, acromion)
    >>> round(recipe.along, 6), round(recipe.across_m, 6), round(recipe.length_m, 6)
    (2.0, 0.01, 0.3)
    >>> bool(np.allclose(recipe.place(elbow, arm), acromion))
    True
    """
    along, across, length = arm_end_recipe(elbow, arm, acromion)
    return ArmEnd(along=float(along), across_m=float(across), length_m=float(length),
                  markers=tuple(markers))


def arm_end_recipe(elbow: np.ndarray, arm: np.ndarray, acromion: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The recipe's numbers ``along``, ``across_m`` (m) and ``length_m`` (m) of
    :func:`calibrate_arm_end` from (F, …, 2) points (m): medians over the frames (axis 0), so
    shape (…) each (several realisations of one trial at once)."""
    d = arm - elbow
    r = np.hypot(d[..., 0], d[..., 1])
    s = acromion - elbow
    along = (s[..., 0] * d[..., 0] + s[..., 1] * d[..., 1]) / r**2
    across = (-s[..., 0] * d[..., 1] + s[..., 1] * d[..., 0]) / r
    median_along = np.nanmedian(along, axis=0)
    return median_along, np.nanmedian(across, axis=0), median_along * np.nanmedian(r, axis=0)


def place_arm_end(elbow: np.ndarray, arm: np.ndarray, along: float | np.ndarray,
                  across_m: float | np.ndarray) -> np.ndarray:
    """(F, …, 2) arm end (m) from the elbow centre and the arm markers' centre ((F, …, 2) m)
    by the recipe ``along`` and ``across_m`` (m): scalars, or (…) arrays, one per column."""
    d = arm - elbow
    r = np.hypot(d[..., 0], d[..., 1])[..., None]
    v = np.stack([-d[..., 1], d[..., 0]], axis=-1) / r
    return elbow + np.asarray(along)[..., None] * d + np.asarray(across_m)[..., None] * v


def scaled_across_recipe(elbow: np.ndarray, arm: np.ndarray, acromion: np.ndarray
                         ) -> np.ndarray:
    """The recipe's ALTERNATIVE form's across part from (F, …, 2) points (m): the arm end's
    distance from the line in units of the elbow–arm-marker distance (the across part scaling
    with the apparent length too, as the along part does), calibrated as
    :func:`arm_end_recipe` does: the median over the frames (axis 0), shape (…). Not the chain's
    recipe: the second form of it whose difference the identification counts as the recipe's
    systematic uncertainty (docs/identify.md, "Standard errors")."""
    d = arm - elbow
    s = acromion - elbow
    return np.nanmedian((-s[..., 0] * d[..., 1] + s[..., 1] * d[..., 0])
                        / (d[..., 0] ** 2 + d[..., 1] ** 2), axis=0)


def place_arm_end_scaled(elbow: np.ndarray, arm: np.ndarray, along: float | np.ndarray,
                         across: float | np.ndarray) -> np.ndarray:
    """(F, …, 2) arm end (m) by the recipe's alternative form: ``along`` and ``across``
    (:func:`scaled_across_recipe`) both in units of the elbow–arm-marker distance.

    >>> elbow = np.zeros((2, 2)); arm = np.array([[0.15, 0.0], [0.0, 0.3]])
    >>> place_arm_end_scaled(elbow, arm, 2.0, 0.1).round(3).tolist()
    [[0.3, 0.015], [-0.03, 0.6]]
    """
    d = arm - elbow
    v = np.stack([-d[..., 1], d[..., 0]], axis=-1)
    return elbow + np.asarray(along)[..., None] * d + np.asarray(across)[..., None] * v


def _spread(positions: np.ndarray) -> float:
    """RMS distance (m) of (F, 2) positions from their median position."""
    centre = np.nanmedian(positions, axis=0)
    return float(np.sqrt(np.nanmean(np.sum((positions - centre) ** 2, axis=-1))))


def trunk_frame_positions(neck: np.ndarray, hip: np.ndarray, point: np.ndarray) -> np.ndarray:
    """(F, 2) position (m) of ``point`` in the trunk's frame: origin the neck centre, x towards
    the hip, y turned by +90° (all (F, 2) m)."""
    d = hip - neck
    u = d / np.hypot(d[:, 0], d[:, 1])[:, None]
    s = point - neck
    return np.stack([s[:, 0] * u[:, 0] + s[:, 1] * u[:, 1],
                     -s[:, 0] * u[:, 1] + s[:, 1] * u[:, 0]], axis=-1)


@dataclass
class AcromionCheck:
    """Which side the trial's acromion markers ride on, as the markers show it (mm)."""

    declared: str  # the marker set's [conventions] acromion_side
    trunk_spread_mm: float  # acromions in the trunk's frame: RMS distance from their median
    arm_spread_mm: float | None  # acromions against the arm-end recipe (None: no arm marker)
    limit_mm: float  # SPREAD_LIMIT × the marker noise (floored)
    supported: str  # "arm", "trunk", "either" (deflection within the noise) or "neither"
    contradicts: bool  # the markers support one side and the other is declared
    message: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (a NaN is null)."""
        return {key: None if isinstance(value, float) and not np.isfinite(value) else value
                for key, value in asdict(self).items()}


def check_acromion_side(declared: str, elbow: np.ndarray, neck: np.ndarray, hip: np.ndarray,
                        acromion: np.ndarray, arm: np.ndarray | None,
                        marker_noise_m: float, noise_lower_bound: bool = False
                        ) -> AcromionCheck:
    """Which side of the shoulder springs the acromions ride on (see the module docstring).

    Joint centres (F, 2) m in the model plane (filtered); ``arm`` the arm markers' centre (None:
    no marker fixed on the arm); ``marker_noise_m`` the trial's marker noise (m; NaN: the
    floor is used); ``noise_lower_bound``: that noise is only a lower bound (markers low-passed
    before export, :class:`bemore.trial.noise.NoiseEstimate`), and the limit is taken at the
    stated ceiling ``NOISE_CEILING_M`` instead (a side within it may be fixed; the wrong side
    is tens of millimetres off). Without an arm marker the arm side cannot be tested on its own:
    a trunk spread beyond the limit then supports "arm".
    """
    noise = max(marker_noise_m, NOISE_FLOOR_M) if np.isfinite(marker_noise_m) else NOISE_FLOOR_M
    if noise_lower_bound:
        noise = max(noise, NOISE_CEILING_M)
    limit = SPREAD_LIMIT * noise
    trunk = _spread(trunk_frame_positions(neck, hip, acromion))
    arm_spread = None
    if arm is not None:
        recipe = calibrate_arm_end(elbow, arm, acromion)
        arm_spread = float(np.sqrt(np.nanmean(
            np.sum((acromion - recipe.place(elbow, arm)) ** 2, axis=-1))))
    trunk_fixed = trunk <= limit
    arm_fixed = (not trunk_fixed) if arm_spread is None else arm_spread <= limit
    supported = {(True, True): "either", (True, False): "trunk", (False, True): "arm",
                 (False, False): "neither"}[(trunk_fixed, arm_fixed)]
    contradicts = supported in ("arm", "trunk") and supported != declared
    arm_text = (f"{arm_spread * 1e3:.2f} mm against the arm-end recipe" if arm_spread is not None
                else "no marker fixed on the arm")
    message = (f"acromion side: the markers support {supported} "
               f"(spread {trunk * 1e3:.2f} mm in the trunk's frame, {arm_text}; "
               f"limit {limit * 1e3:.2f} mm = {SPREAD_LIMIT:g} × the marker noise"
               + (f"'s stated ceiling, the trial's {marker_noise_m * 1e3:.2g} mm being a lower "
                  "bound" if noise_lower_bound else "")
               + f"); declared {declared}")
    if contradicts:
        message += (f": CONTRADICTED, the markers ride on the {supported}'s side "
                    f"(set [conventions] acromion_side = \"{supported}\" in the marker set)")
    return AcromionCheck(declared=declared, trunk_spread_mm=trunk * 1e3,
                         arm_spread_mm=None if arm_spread is None else arm_spread * 1e3,
                         limit_mm=limit * 1e3, supported=supported, contradicts=contradicts,
                         message=message)
