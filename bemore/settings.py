"""Schemas of the bundled configuration files and typed accessors to their defaults.

One definition of each fact: the segment table lives in ``configs/gymnast.toml``, the identified
parameters and their bounds in ``configs/identification.toml``, the gesture bounds and constraints
in ``configs/synthesis.toml``; the bench's limits in the bench side's ``bench.toml``
(:class:`Bench`, defined by ``controller.settings``, re-exported here through ``controller.cli``;
the athlete's limits are in her profile, ``bemore.profile``). Everything
else reads them through these schemas (loaded by :func:`bemore.config.load_toml_model`).
Units are in the key names where they are not SI; degrees appear only here, at the edge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from bemore.config import Section, load_toml_model
from bemore.paths import default_config
from controller.cli import Bench
from controller.cli import load_bench as load_bench

# --------------------------------------------------------------------------- gymnast.toml


class Segment(Section):
    """One row of the segment table; for paired segments, ``mass_kg`` is one side's mass."""

    mass_kg: PositiveFloat
    inertia_kgm2: PositiveFloat = Field(description="about the CoM, for the whole pair if count=2")
    length_m: PositiveFloat
    com_from_proximal_m: float = Field(ge=0.0, description="from the bar-side joint")
    count: Literal[1, 2] = 1

    @model_validator(mode="after")
    def _com_on_segment(self) -> Segment:
        if self.com_from_proximal_m > self.length_m:
            raise ValueError(
                f"com_from_proximal_m ({self.com_from_proximal_m}) must not exceed "
                f"length_m ({self.length_m})"
            )
        return self

    @property
    def total_mass_kg(self) -> float:
        """Mass of the segment, both sides together for a pair (kg)."""
        return self.mass_kg * self.count


SEGMENT_NAMES = ("head", "trunk", "upper_arm", "forearm", "hand", "thigh", "shank", "foot")


class Gymnast(Section):
    """The segment table of one gymnast (configs/gymnast.toml, docs/model.md §2)."""

    name: str
    sex: Literal["female", "male"]
    source: str
    inertia_of_pairs: Literal["pair"] = Field(
        description="the printed inertia of a paired segment is for both sides together"
    )
    segments: dict[str, Segment]

    @model_validator(mode="after")
    def _all_segments(self) -> Gymnast:
        missing = [name for name in SEGMENT_NAMES if name not in self.segments]
        unknown = [name for name in self.segments if name not in SEGMENT_NAMES]
        if missing:
            raise ValueError(f"segments: missing {', '.join(missing)}")
        if unknown:
            raise ValueError(
                f"segments: unknown {', '.join(unknown)} (allowed: {', '.join(SEGMENT_NAMES)})"
            )
        return self

    @property
    def total_mass_kg(self) -> float:
        """Whole-body mass (kg)."""
        return sum(segment.total_mass_kg for segment in self.segments.values())


# --------------------------------------------------------------------------- identification.toml


class Bounded(Section):
    """A parameter the identification estimates, with its search box and the seed's result."""

    name: str = Field(description="model parameter name, e.g. bar.stiffness_x")
    description: str
    unit: str
    lower: float
    upper: float
    seed_value: float = Field(description="the seed study's identified value (Table 7)")

    @model_validator(mode="after")
    def _ordered(self) -> Bounded:
        if not self.lower < self.upper:
            raise ValueError(
                f"parameter {self.name}: lower ({self.lower}) must be below upper ({self.upper})"
            )
        return self


class Optimiser(Section):
    """Which metaheuristic runs and how long (defaults: the seed protocol)."""

    algorithm: Literal["gwo", "pso", "de", "cmaes"] = "gwo"
    pack: int = Field(200, ge=2, le=100_000, description="population size (wolves, particles)")
    iterations: PositiveInt = 50
    seed: int = Field(0, ge=0)
    polish: bool = True
    polish_starts: int = Field(
        5, ge=1, le=50, description="distinct points of the global run the polish starts from"
    )
    polish_jacobian: Literal["exact", "finite-difference"] = Field(
        "exact", description="the polish's Jacobian: sensitivities computed with the simulation "
        "(exact) or central finite differences"
    )
    polish_coarse_first: bool = Field(
        True, description="with polish_coarse_samples_per_step > 1: the polish converges on "
        "that coarser cost first (less CPU per Jacobian), then on the exact cost from there"
    )
    workers: int = Field(0, ge=0, description="0 = all local cores")
    dask: str | None = Field(None, description="Dask scheduler address; absent = in-process")
    search_samples_per_step: PositiveInt = Field(
        1, description="samples per integrator step of the global search's cost (1: exact); "
        "must divide the trial's sample intervals, else it is halved until it does (down to 1)"
    )
    polish_coarse_samples_per_step: PositiveInt = Field(
        1, description="samples per integrator step of the polish's first (coarse) stage "
        "(1: no coarse stage); same rule as search_samples_per_step"
    )


class MassBudget(Section):
    """How the trunk-mass parameter keeps the trunk+thighs total."""

    min_thigh_pair_mass_kg: PositiveFloat = Field(
        description="the trunk-mass upper bound is lowered to (trunk+thighs total) − this"
    )
    body_mass_uncertainty_kg: float = Field(
        0.2, ge=0.0,
        description="the body mass given (--body-mass, her profile) is known to ± this (kg, "
        "1 SD: a scale reading with training clothes and chalk); counted in every standard "
        "error (docs/identify.md, 'The body mass'). Without a body mass the segment table's "
        "total is used, known to ± [inertial] mass_spread of it")


class SegmentTableUncertainty(Section):
    """How far one athlete's segments may be from the segment table the fit scales to her:
    the values it holds fixed (the masses and centres of mass of the hands, forearms, upper
    arms, head, shanks and feet, every radius of gyration), relative standard uncertainties
    counted in every standard error (docs/identify.md, "The segment table"); 0: exact."""

    mass: float = Field(
        0.10, ge=0.0, lt=1.0,
        description="a table segment's mass (its share of the body mass), relative, 1 SD; the "
        "trunk+thighs budget takes the difference (the body mass is counted apart)")
    com: float = Field(
        0.05, ge=0.0, lt=1.0,
        description="a table segment's centre of mass (its distance from the proximal joint), "
        "relative, 1 SD")
    gyration: float = Field(
        0.10, ge=0.0, lt=1.0,
        description="a segment's radius of gyration about its centre of mass, relative, 1 SD")


class SoftTissueUncertainty(Section):
    """How far the markers of each joint centre move on the skin, relative to the bone, as the
    joint they sit over turns (soft-tissue artefact): the standard uncertainty (mm, 1 SD) of
    the slide at the ends of the trial's range of that joint, in any direction of the study
    plane, counted in every standard error (docs/identify.md, "Soft tissue"); 0: the markers
    taken as riding on the bone. Named by the joint centre whose recipe's markers move."""

    wrist_mm: float = Field(2.0, ge=0.0, description="radial and ulnar styloids (bony)")
    elbow_mm: float = Field(4.0, ge=0.0, description="the elbow's epicondyle markers")
    shoulder_mm: float = Field(6.0, ge=0.0, description="the acromions, on the shoulder girdle, "
                               "as the arm rises")
    neck_mm: float = Field(3.0, ge=0.0, description="C7 and the sternum")
    hip_mm: float = Field(8.0, ge=0.0, description="the greater trochanters, on the thigh's "
                          "soft tissue")
    knee_mm: float = Field(5.0, ge=0.0, description="the femoral epicondyles")
    ankle_mm: float = Field(3.0, ge=0.0, description="the malleoli (bony)")

    def by_point(self) -> dict[str, float]:
        """The standard uncertainties keyed by joint centre (mm).

        >>> SoftTissueUncertainty(hip_mm=10.0).by_point()["hip"]
        10.0
        """
        return {name.removesuffix("_mm"): float(value)
                for name, value in self.model_dump().items()}


class InitialState(Section):
    """The trial's initial-state unknowns, fitted with the parameters (docs/identify.md)."""

    rate_margin_rad_per_s: PositiveFloat = Field(
        0.3, description="initial rotation rate searched within prepared rate ± this"
    )
    angle_margin_rad: float = Field(
        0.02, ge=0.0, le=0.2,
        description="initial rotation angle about the bar searched within prepared ± this; 0 = "
        "as prepared"
    )
    bar_rest_margin_m: float = Field(
        0.005, ge=0.0, description="bar rest searched within its equilibrium estimate ± this"
    )
    shoulder_rest_margin_m: float = Field(
        0.015, ge=0.0, le=0.1,
        description="acromions on the trunk's side: the shoulder springs' rest (the arm-end "
        "recipe's bias) searched within ± this; 0 = none"
    )
    shoulder_start: Literal["equilibrium", "seen"] = Field(
        "equilibrium", description="initial shoulder translations: spring equilibrium or seen"
    )


ForceChannelError = Literal["offset", "gain", "crosstalk", "lag"]
"""The force channels' errors the identification can fit (bemore.identify.force_channels)."""


class ForceTerm(Section):
    """The bar-force term of the cost, when the trial has bar forces (docs/identify.md,
    "Bar forces")."""

    use: bool = Field(True, description="add the force term when the trial carries bar forces")
    weight: PositiveFloat = Field(
        0.5, description="multiplies the force term; 1 = each residual normalised by its noise "
        "alone (docs/identify.md, 'Bar forces': the simulated force also carries the driven "
        "motion's error)")
    bar_rate_margin_m_per_s: float = Field(
        0.1, ge=0.0, le=1.0,
        description="with the force term: the bar's start velocity searched within the "
        "prepared one ± this (m/s; 0 = as prepared)")
    chain_noise: bool = Field(
        True, description="with the force term: the polish and the analysis weigh the "
        "residuals with the trial chain's noise in what drives the simulation (errors in "
        "variables, bemore.identify.chain_noise; docs/identify.md); the weight then cancels. "
        "false: least squares with the weight")
    fitted_channel_errors: list[ForceChannelError] = Field(
        default_factory=lambda: list(get_args(ForceChannelError)),
        description="the force channels' errors fitted with the parameters (each channel's "
        "offset, gain and cross-talk from the other axis, the force's lag behind the markers; "
        "bemore.identify.force_channels, "
        "docs/identify.md 'The force channels'); [] takes the channels as they read")
    offset_uncertainty_n: float = Field(
        0.0, ge=0.0, le=100.0,
        description="each force channel's offset known to ± this (N, 1 SD), counted in the "
        "standard errors; 0: taken as exact (docs/identify.md, Known limits: 1 N of vertical "
        "offset moves the bar mass ≈ 15 %)")
    gain_uncertainty: float = Field(
        0.0, ge=0.0, le=0.5,
        description="each force channel's gain known to ± this fraction (1 SD), counted in the "
        "standard errors; 0: taken as exact")
    lag_uncertainty_ms: float = Field(
        0.0, ge=0.0, le=50.0,
        description="the force's timing against the markers known to ± this (ms, 1 SD), "
        "counted in the standard errors; 0: taken as exact (1 ms moves the trunk mass ≈ 13 %)")


class InertialMode(Section):
    """The inertial mode: every segment's mass, centre of mass and inertia from the bar force
    after the kinematic fit (docs/identify.md, "Inertial parameters")."""

    identify: bool = Field(False, description="run the inertial mode (--inertial)")
    cutoff_hz: PositiveFloat = Field(
        6.0, description="both sides of the regressor equation low-passed here (Hz)")
    mass_spread: PositiveFloat = Field(
        0.2, description="the table's masses: relative standard deviation of the prior; also "
        "the uncertainty of the table's total when no body mass is given")
    com_spread_m: PositiveFloat = Field(
        0.03, description="the table's centres of mass: standard deviation of the prior (m)")
    inertia_spread: PositiveFloat = Field(
        0.3, description="the table's inertias: relative standard deviation of the prior")
    determined_share: float = Field(
        0.5, gt=0.0, lt=1.0,
        description="a quantity is determined when its standard error, under a prior 10 "
        "times wider, is below this share of its prior's standard deviation")


class Identification(Section):
    """The identified parameters (their one list), their bounds, and the optimiser settings."""

    optimiser: Optimiser = Optimiser()
    initial_state: InitialState = InitialState()
    forces: ForceTerm = ForceTerm()
    inertial: InertialMode = InertialMode()
    mass_budget: MassBudget
    segment_table: SegmentTableUncertainty = SegmentTableUncertainty()
    soft_tissue: SoftTissueUncertainty = SoftTissueUncertainty()
    parameters: list[Bounded] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> Identification:
        names = [parameter.name for parameter in self.parameters]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise ValueError(f"parameters: {', '.join(duplicated)} listed more than once")
        return self

    @property
    def names(self) -> tuple[str, ...]:
        """Names of the identified parameters, in the file's order."""
        return tuple(parameter.name for parameter in self.parameters)

    def parameter(self, name: str) -> Bounded:
        """The parameter called ``name`` (KeyError if absent)."""
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter
        raise KeyError(name)


# --------------------------------------------------------------------------- synthesis.toml


class Interval(Section):
    """A closed interval [lower, upper]."""

    lower: float
    upper: float

    @model_validator(mode="after")
    def _ordered(self) -> Interval:
        if not self.lower < self.upper:
            raise ValueError(f"lower ({self.lower}) must be below upper ({self.upper})")
        return self


class GestureBounds(Section):
    """Bounds of the design variables (seed Table 9)."""

    final_time_s: Interval
    flexion_end_time_s: Interval
    max_flexion_deg: Interval


class GestureConstraints(Section):
    """Linear and nonlinear constraints of the gesture (seed Table 9)."""

    min_extension_duration_s: PositiveFloat = Field(description="t_f − t_flexmax ≥ this")
    final_rotation_deg: Interval = Field(description="rotation about the bar at t_f")


class SeedResult(Section):
    """The seed study's synthesis result, printed next to bemore's for comparison."""

    final_time_s: float
    flexion_end_time_s: float
    max_flexion_deg: float
    evaluations: int
    elapsed_s: float


class Solver(Section):
    """Optimisation settings of the synthesis."""

    method: Literal["slsqp", "trust-constr", "pymoo"] = "slsqp"
    objective: Literal["abs_torque_integral", "peak_torque", "squared_torque_integral"] = (
        "abs_torque_integral"
    )
    starts: int = Field(8, ge=1, le=1000, description="number of SLSQP starting points")
    seed: int = Field(0, ge=0)
    gradients: Literal["finite-difference", "exact"] = Field(
        "finite-difference",
        description="SLSQP's gradients: finite differences of batched designs, or exact "
        "forward-mode derivatives carried through the simulation (docs/synthesis.md, Gradients)")


class Synthesis(Section):
    """Everything the gesture synthesis reads besides the athlete."""

    bounds: GestureBounds
    constraints: GestureConstraints
    solver: Solver = Solver()
    seed_result: SeedResult


# --------------------------------------------------------------------------- loaders


def load_gymnast(path: str | Path | None = None) -> Gymnast:
    """The segment table (default: ``configs/gymnast.toml``)."""
    return load_toml_model(path or default_config("gymnast.toml"), Gymnast)


def load_identification(path: str | Path | None = None) -> Identification:
    """Identification bounds and settings (default: ``configs/identification.toml``)."""
    return load_toml_model(path or default_config("identification.toml"), Identification)


def load_synthesis(path: str | Path | None = None) -> Synthesis:
    """Synthesis bounds and constraints (default: ``configs/synthesis.toml``)."""
    return load_toml_model(path or default_config("synthesis.toml"), Synthesis)


CONFIG_SCHEMAS = {
    "gymnast.toml": Gymnast,
    "identification.toml": Identification,
    "synthesis.toml": Synthesis,
    "bench.toml": Bench,
}


def trunk_mass_upper_bound_kg(identification: Identification, gymnast: Gymnast,
                              mass_scale: float = 1.0) -> float:
    """Upper bound of ``trunk.mass`` actually searched (kg) for an athlete ``mass_scale``
    times as heavy as the segment table (the configured bounds are the table's body's).

    The trunk+thighs total of the segment table is kept, so the thighs get
    ``total − trunk.mass``; the configured upper bound is lowered so that they keep at least
    ``mass_budget.min_thigh_pair_mass_kg``.
    """
    total = gymnast.segments["trunk"].total_mass_kg + gymnast.segments["thigh"].total_mass_kg
    budget_bound = total * mass_scale - identification.mass_budget.min_thigh_pair_mass_kg
    return min(identification.parameter("trunk.mass").upper * mass_scale, budget_bound)
