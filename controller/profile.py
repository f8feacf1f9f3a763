"""The athlete profile: who the gymnast is and what her shoulders can take.

A profile is a small TOML file (example: ``configs/athlete.example.toml``) read through the
project's validated configuration layer (:mod:`controller.config`); a wrong key, type or value
is one ConfigError line naming the file and the key. The athlete's limits — peak shoulder
torque and shoulder-flexion range — belong here, not to the bench: the bench file holds only
what the machine can do.

Without a profile, :data:`DEFAULT_PROFILE` is used (documented below with its source).

A squad's profiles can also live in the coach's records (docs/records.md): ``--athlete NAME``
takes her profile from the database (:meth:`bemore.records.store.AthleteRecord.to_profile`, her
latest body mass), with the same bounds as :class:`ProfileFile`.

The schema is defined once, here on the bench side: the bench enforces her limits and installs
alone, and the scientific side (``bemore.profile``) re-exports it through ``controller.cli``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PositiveFloat, model_validator

from controller import filekinds
from controller.config import Section, load_toml_model


@dataclass(frozen=True)
class AthleteProfile:
    """One athlete: identity, body size, and the limits of her shoulders.

    ``shoulder_torque_limit_Nm`` is the peak torque one shoulder may be asked for (N·m, per
    shoulder); ``shoulder_flexion_range_deg`` is (most extended, most flexed) shoulder-flexion
    angle in degrees (0 = arms along the trunk, positive = flexion, arms overhead ≈ 180).
    ``segment_lengths_m`` (optional) maps segment names of ``configs/gymnast.toml`` to lengths in m.
    """

    name: str
    sex: Literal["F", "M"]
    body_mass_kg: float
    stature_m: float
    shoulder_torque_limit_Nm: float  # noqa: N815 - N·m in the name, as in the TOML key
    shoulder_flexion_range_deg: tuple[float, float]
    segment_lengths_m: dict[str, float] | None = field(default=None)
    shoulder_centre: dict[str, Any] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping of the profile (same keys as the TOML file)."""
        data = asdict(self)
        data["shoulder_flexion_range_deg"] = list(self.shoulder_flexion_range_deg)
        for optional in ("segment_lengths_m", "shoulder_centre"):
            if data[optional] is None:
                data.pop(optional)
        return data


class ShoulderCentre(Section):
    """Her functional gleno-humeral centre (``bemore trial score``, SCoRE): the centre ``centre_m``
    in the frame of her thorax markers' reference shape ``thorax_shape_m`` (m, centred, one row
    per marker of ``thorax_markers``), its offset from the ``acromion`` marker in that frame
    (``acromion_offset_m``, what a trial adds to the acromion-based shoulder), and how well the
    calibration movement determined it."""

    side: Literal["right", "left"]
    method: str
    calibration: str
    thorax_markers: list[str] = Field(min_length=3)
    thorax_shape_m: list[tuple[float, float, float]]
    centre_m: tuple[float, float, float]
    acromion: str
    acromion_offset_m: tuple[float, float, float]
    residual_mm: float = Field(ge=0)
    spread_rad: float = Field(ge=0)
    condition: float = Field(ge=1)

    @model_validator(mode="after")
    def _shape(self) -> ShoulderCentre:
        if len(self.thorax_shape_m) != len(self.thorax_markers):
            raise ValueError("thorax_shape_m needs one row per thorax marker")
        return self


class ProfileFile(Section):
    """Schema of an athlete profile TOML file (keys as in :class:`AthleteProfile`)."""

    name: str = Field(min_length=1)
    sex: Literal["F", "M"]
    body_mass_kg: float = Field(gt=10, le=200)
    stature_m: float = Field(gt=0.8, le=2.5)
    shoulder_torque_limit_Nm: PositiveFloat = Field(le=500)  # noqa: N815 - the TOML key
    shoulder_flexion_range_deg: tuple[float, float]
    segment_lengths_m: dict[str, PositiveFloat] | None = None
    shoulder_centre: ShoulderCentre | None = None

    @model_validator(mode="after")
    def _range(self) -> ProfileFile:
        low, high = self.shoulder_flexion_range_deg
        if not -90.0 <= low < high <= 200.0:
            raise ValueError(
                "shoulder_flexion_range_deg must be [most extended, most flexed] with "
                "-90 <= first < second <= 200"
            )
        return self


PROFILE_WANTED = filekinds.ATHLETE_PROFILE.wanted()  # "an athlete profile (a TOML file like …)"


def load_profile(path: str | Path) -> AthleteProfile:
    """Read and validate an athlete profile TOML file; any problem raises one ConfigError line
    (another command's output given instead is named as such)."""
    data = load_toml_model(path, ProfileFile, PROFILE_WANTED)
    lengths = dict(data.segment_lengths_m) if data.segment_lengths_m is not None else None
    return AthleteProfile(
        name=data.name,
        sex=data.sex,
        body_mass_kg=float(data.body_mass_kg),
        stature_m=float(data.stature_m),
        shoulder_torque_limit_Nm=float(data.shoulder_torque_limit_Nm),
        shoulder_flexion_range_deg=(
            float(data.shoulder_flexion_range_deg[0]),
            float(data.shoulder_flexion_range_deg[1]),
        ),
        segment_lengths_m=lengths,
        shoulder_centre=(data.shoulder_centre.model_dump() if data.shoulder_centre is not None
                         else None),
    )


#: The default athlete: the seed study's recorded gymnast.
#:
#: - body mass 41.1 kg: the sum of the segment masses of ``configs/gymnast.toml`` (de Leva 1996
#:   female table adjusted after Davidson 2008, seed Table 5);
#: - stature 1.48 m: head + trunk + thigh + shank lengths of that table (1.42 m) plus an ankle
#:   height of 0.06 m (an estimate; the seed does not print her stature);
#: - peak shoulder torque 70 N·m per shoulder: untrained young women produce ≈ 45 N·m of static
#:   shoulder-flexion torque at 0° (half of the men's 89.9 N·m, 25 women and 26 men on a KIN-COM,
#:   "Dynamic shoulder flexion strength for use in occupational risk analysis and clinical
#:   assessment"); a trained gymnast is taken at ≈ 1.5 times that — an assumption, to be replaced
#:   by her own measured value in her profile;
#: - shoulder-flexion range −10° … 170°: a training range inside the normal active range of the
#:   shoulder (flexion 180°, extension 60°, AAOS normal values), kept short of the end ranges.
DEFAULT_PROFILE = AthleteProfile(
    name="recorded gymnast (seed study)",
    sex="F",
    body_mass_kg=41.1,
    stature_m=1.48,
    shoulder_torque_limit_Nm=70.0,
    shoulder_flexion_range_deg=(-10.0, 170.0),
)
