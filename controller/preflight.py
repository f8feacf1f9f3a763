"""Pre-flight: check a whole session against every limit before the bench is armed.

Three sets of limits apply (each violation names its source):

* the athlete's (her athlete profile, ``bemore.profile``; the documented default when none is
  given) — shoulder-flexion range on the gesture file and on the stream, and the torque she must
  produce: her share of the torque the gesture needs at the played pace
  (:func:`controller.modes.shares`: 0 passive, 1 guided, 1 − load assistive, 1 + load
  resistive) against her peak shoulder torque;
* the bench's (``controller/configs/bench.toml`` ``[limits]``) — checked on the plan, i.e. on
  exactly the setpoints that would be sent, in every mode, rest and ramp, and on the controlled
  stop that could start from any of them (its torque ramp's rate, ``stop torque rate``);
* the firmware's own absolute limits (from its HELLO_REPLY) — checked on the plan too.

Nothing is clipped: a violation refuses the session with a table of every violation (where,
which quantity, worst value, limit). Consecutive offending samples form one row.
"""

from __future__ import annotations

import functools
import math
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import repeat
from operator import truediv

from controller.errors import DataError
from controller.modes import POSITION_SCALE, TIME_SCALE, VELOCITY_SCALE, Plan
from controller.profile import DEFAULT_PROFILE, AthleteProfile
from controller.series import REMEMBERED_SAMPLES, differences, ints, scaled
from controller.setpoints import Gesture
from controller.settings import Bench

# quantity → (display unit, factor from SI to the display unit)
DISPLAY = {
    "angle": ("deg", math.degrees(1.0)),
    "velocity": ("deg/s", math.degrees(1.0)),
    "angle rate": ("deg/s", math.degrees(1.0)),  # finite difference of the angle stream
    "torque": ("N·m", 1.0),
    "athlete torque": ("N·m", 1.0),  # what the athlete must produce in this mode
    "torque rate": ("N·m/s", 1.0),
    "stop torque rate": ("N·m/s", 1.0),  # a controlled stop from that setpoint (its ramp)
}


@dataclass(frozen=True)
class Limit:
    """An allowed interval [low, high] of one quantity (SI units), and where it comes from."""

    quantity: str
    low: float
    high: float
    source: str


@dataclass(frozen=True)
class FirmwareLimits:
    """The firmware's absolute limits, as reported in its HELLO_REPLY (SI units)."""

    torque_max_nm: float
    velocity_max_rad_s: float
    position_min_rad: float
    position_max_rad: float
    slew_max_nm_s: float


def compiled_firmware_limits() -> FirmwareLimits:
    """The limits compiled into this repository's firmware (``controller/protocol.toml``), SI.

    What a bench running this firmware will report in its HELLO_REPLY: the feasible window is
    computed with them before any bench is connected.
    """
    from controller.protocol import load_spec

    spec = load_spec()

    def si(key: str) -> float:
        # the HELLO_REPLY field of the same name carries this limit: its scale converts it
        return spec.limits[key] * spec.scale("HELLO_REPLY", key)

    return FirmwareLimits(
        torque_max_nm=si("torque_max_mNm"),
        velocity_max_rad_s=si("velocity_max_urad_s"),
        position_min_rad=si("position_min_urad"),
        position_max_rad=si("position_max_urad"),
        slew_max_nm_s=si("slew_max_mNm_per_tick") * spec.tick_hz,
    )


@dataclass(frozen=True)
class Violation:
    """One run of consecutive samples beyond one limit (display units: deg, deg/s, N·m)."""

    where: str
    start_s: float
    end_s: float
    quantity: str
    value: float
    limit: float
    unit: str
    source: str

    def row(self) -> str:
        """One line of the violation table."""
        when = f"{self.start_s:.3f}–{self.end_s:.3f}"
        return (
            f"{self.where:<8} {when:<17} {self.quantity:<16} {self.value:>10.2f} "
            f"{self.limit:>10.2f} {self.unit:<6} {self.source}"
        )


class PreflightError(DataError):
    """The session was refused before arming; ``violations`` lists every reason."""

    def __init__(self, message: str, violations: list[Violation]):
        super().__init__(message)
        self.violations = violations

    def table(self) -> str:
        """The violation table, one row per violation, with a header line."""
        return format_table(self.violations)


def athlete_limits(athlete: AthleteProfile = DEFAULT_PROFILE) -> list[Limit]:
    """The athlete's limits (SI) from her profile: shoulder-flexion range and peak torque."""
    source = "athlete profile"
    low, high = athlete.shoulder_flexion_range_deg
    torque = athlete.shoulder_torque_limit_Nm
    return [
        Limit("angle", math.radians(low), math.radians(high), source),
        Limit("athlete torque", -torque, torque, source),
    ]


def bench_limits(bench: Bench, firmware: FirmwareLimits | None = None) -> list[Limit]:
    """The bench's limits (SI) from the configuration and, when known, from the firmware."""
    config = bench.limits
    limits = [
        Limit("angle", math.radians(config.min_angle_deg), math.radians(config.max_angle_deg),
              "bench.toml [limits]"),
        Limit("velocity", -math.radians(config.max_velocity_deg_s),
              math.radians(config.max_velocity_deg_s), "bench.toml [limits]"),
        Limit("angle rate", -math.radians(config.max_velocity_deg_s),
              math.radians(config.max_velocity_deg_s), "bench.toml [limits]"),
        Limit("torque", -config.max_torque_nm, config.max_torque_nm, "bench.toml [limits]"),
        Limit("torque rate", -config.max_torque_rate_nm_s, config.max_torque_rate_nm_s,
              "bench.toml [limits]"),
        Limit("stop torque rate", -config.max_torque_rate_nm_s, config.max_torque_rate_nm_s,
              "bench.toml [limits]"),
    ]
    if firmware is not None:
        limits += [
            Limit("angle", firmware.position_min_rad, firmware.position_max_rad, "firmware"),
            Limit("velocity", -firmware.velocity_max_rad_s, firmware.velocity_max_rad_s,
                  "firmware"),
            Limit("angle rate", -firmware.velocity_max_rad_s, firmware.velocity_max_rad_s,
                  "firmware"),
            Limit("torque", -firmware.torque_max_nm, firmware.torque_max_nm, "firmware"),
            Limit("torque rate", -firmware.slew_max_nm_s, firmware.slew_max_nm_s, "firmware"),
            Limit("stop torque rate", -firmware.slew_max_nm_s, firmware.slew_max_nm_s,
                  "firmware"),
        ]
    return limits


def envelope(limits: list[Limit]) -> dict[str, tuple[float, float]]:
    """The tightest interval of each quantity over all ``limits`` (SI)."""
    result: dict[str, tuple[float, float]] = {}
    for limit in limits:
        low, high = result.get(limit.quantity, (-math.inf, math.inf))
        result[limit.quantity] = (max(low, limit.low), min(high, limit.high))
    return result


def safe_angle_range(bench: Bench, firmware: FirmwareLimits | None = None,
                     athlete: AthleteProfile = DEFAULT_PROFILE) -> tuple[float, float]:
    """The angle interval allowed by the athlete, the bench and the firmware together (rad)."""
    return envelope(athlete_limits(athlete) + bench_limits(bench, firmware))["angle"]


def rate_of_change(t_s: Sequence[float], values: Sequence[float]) -> array:
    """Change rate between consecutive samples (units of ``values`` per s), 0 for the first."""
    return _rates(differences(t_s), values)


def _rates(dt_s: Sequence[float], values: Sequence[float]) -> array:
    """:func:`rate_of_change` with the time steps ``dt_s`` (s) already taken."""
    rate = array("d", [0.0] if len(values) else [])
    rate.extend(list(map(truediv, differences(values), dt_s)))
    return rate


class Scaled:
    """The samples ``value · factor / divisor`` of ``values`` (``divisor`` > 0), computed only
    when asked: their extremes follow from those of ``values`` (the operation is monotonic in
    floating point too), which is all a check needs while no limit is crossed."""

    def __init__(self, values: Sequence[float], factor: float, divisor: float = 1.0):
        self.values, self.factor, self.divisor = values, factor, divisor

    def extremes(self, raw: tuple[float, float] | None = None) -> tuple[float, float]:
        """(lowest, highest) sample; (inf, -inf) when there is none. ``raw``: the extremes of
        ``values`` when already known (:func:`extremes`)."""
        if not len(self.values):
            return math.inf, -math.inf
        lowest, highest = raw if raw is not None else extremes(self.values)
        ends = [value * self.factor / self.divisor for value in (lowest, highest)]
        return min(ends), max(ends)

    def samples(self) -> Sequence[float]:
        """Every sample (SI)."""
        return array("d", list(map(truediv, scaled(self.values, self.factor),
                                   repeat(self.divisor))))


def extremes(values: Sequence[float]) -> tuple[float, float]:
    """(min, max) of ``values`` ((inf, -inf) when empty), in their own units; remembered by
    content for arrays of at most :data:`~controller.series.REMEMBERED_SAMPLES` samples (the
    feasible window's plans at one speed share their angle, velocity and need columns)."""
    if isinstance(values, array) and 0 < len(values) <= REMEMBERED_SAMPLES:
        return _remembered_extremes(values.typecode, values.tobytes())
    return min(values, default=math.inf), max(values, default=-math.inf)


@functools.lru_cache(maxsize=16)
def _remembered_extremes(typecode: str, data: bytes) -> tuple[float, float]:
    values = array(typecode, data)
    return min(values), max(values)


def check_series(
    where: str, t_s: Sequence[float], series: dict[str, Sequence[float] | Scaled],
    limits: list[Limit],
) -> list[Violation]:
    """Every run of samples of ``series`` (quantity → SI values, or :class:`Scaled` wire
    values) outside one of ``limits``."""
    violations = []
    raw: dict[int, tuple[float, float]] = {}  # by identity: two quantities may share samples

    def raw_extremes(values: Sequence[float]) -> tuple[float, float]:
        if id(values) not in raw:
            raw[id(values)] = extremes(values)
        return raw[id(values)]

    lowest_highest = {quantity: values.extremes(raw_extremes(values.values))
                      if isinstance(values, Scaled) else raw_extremes(values)
                      for quantity, values in series.items()}
    for limit in limits:
        if limit.quantity not in series:
            continue
        lowest, highest = lowest_highest[limit.quantity]
        if not (lowest < limit.low or highest > limit.high):
            continue  # every sample within (the common case: no pass over the samples)
        values = series[limit.quantity]
        if isinstance(values, Scaled):
            values = series[limit.quantity] = values.samples()
        for start, end in _runs([value < limit.low or value > limit.high for value in values]):
            value = _worst(values[start:end], limit)
            bound = limit.high if value > limit.high else limit.low
            unit, factor = DISPLAY[limit.quantity]
            violations.append(Violation(where, float(t_s[start]), float(t_s[end - 1]),
                                        limit.quantity, value * factor, bound * factor, unit,
                                        limit.source))
    return violations


def _worst(chunk: Sequence[float], limit: Limit) -> float:
    """The sample of ``chunk`` furthest beyond ``limit`` (the first one on a tie)."""
    highest, lowest = max(chunk), min(chunk)
    above, below = highest - limit.high, limit.low - lowest
    if above == below:
        return float(highest if list(chunk).index(highest) < list(chunk).index(lowest)
                     else lowest)
    return float(highest if above > below else lowest)


def _runs(mask: Sequence[bool]) -> list[tuple[int, int]]:
    """(start, end) index pairs of the runs of True in ``mask`` (end exclusive)."""
    runs, start = [], None
    for index, flag in enumerate(mask):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            runs.append((start, index))
            start = None
    if start is not None:
        runs.append((start, len(mask)))
    return runs


def preflight(
    gesture: Gesture, plan: Plan, bench: Bench, firmware: FirmwareLimits | None = None,
    torque_gain: float = 0.0, athlete: AthleteProfile = DEFAULT_PROFILE,
) -> list[Violation]:
    """Every violation of the gesture (athlete) and of the plan (athlete, bench, firmware).

    ``torque_gain`` is the bench's share of the gesture's torque
    (:attr:`~controller.modes.ModeSettings.torque_gain`): the athlete must produce the rest,
    (1 − torque_gain) times the torque the gesture needs at the played pace (``plan.need_nm``).
    """
    gesture_series = {"angle": gesture.angle_rad}
    t_s, dt_s, angle_rate = _motion(ints(plan.time_ms), ints(plan.position_urad))
    torque_nm = plan.torque_nm
    plan_series: dict[str, Sequence[float] | Scaled] = {
        "angle": Scaled(plan.position_urad, POSITION_SCALE),
        "velocity": Scaled(plan.velocity_urad_s, VELOCITY_SCALE),
        "torque": torque_nm,
        "angle rate": angle_rate,
        "torque rate": _rates(dt_s, torque_nm),
        "stop torque rate": Scaled(torque_nm, 1.0, plan.stop_duration_s),  # as the Plan's
    }
    if plan.need_nm is not None:
        plan_series["athlete torque"] = Scaled(plan.need_nm, 1.0 - torque_gain)
    limits = athlete_limits(athlete)
    return check_series("file", gesture.t_s, gesture_series, limits) + (
        check_series("stream", t_s, plan_series, limits + bench_limits(bench, firmware))
    )


def _motion(time_ms: array, position_urad: array) -> tuple[array, array, array]:
    """(stream times s, their steps s, angle rate rad/s) of a plan's wire columns; remembered
    by content for plans of at most :data:`~controller.series.REMEMBERED_SAMPLES` setpoints
    (every mode and load of the feasible window plays the same motion at one speed)."""
    if len(time_ms) <= REMEMBERED_SAMPLES:
        return _remembered_motion(time_ms.tobytes(), position_urad.tobytes())
    return _computed_motion(time_ms, position_urad)


def _computed_motion(time_ms: array, position_urad: array) -> tuple[array, array, array]:
    t_s = scaled(time_ms, TIME_SCALE)  # as Plan.t_s and Plan.position_rad
    dt_s = differences(t_s)
    return t_s, dt_s, _rates(dt_s, scaled(position_urad, POSITION_SCALE))


@functools.lru_cache(maxsize=4)
def _remembered_motion(time_ms: bytes, position_urad: bytes) -> tuple[array, array, array]:
    return _computed_motion(array("q", time_ms), array("q", position_urad))


def require_clear(gesture: Gesture, plan: Plan, bench: Bench,
                  firmware: FirmwareLimits | None = None, torque_gain: float = 0.0,
                  athlete: AthleteProfile = DEFAULT_PROFILE) -> None:
    """Raise :class:`PreflightError` (naming every violation) unless within limits."""
    violations = preflight(gesture, plan, bench, firmware, torque_gain, athlete)
    if violations:
        quantities = sorted({f"{v.quantity} ({v.source})" for v in violations})
        raise PreflightError(
            f"{gesture.path}: refused before arming: {len(violations)} limit violation(s): "
            f"{', '.join(quantities)}",
            violations,
        )


def format_table(violations: list[Violation]) -> str:
    """Text table of ``violations``; ``where`` is file (gesture time) or stream (stream time)."""
    header = (f"{'where':<8} {'when (s)':<17} {'quantity':<16} {'value':>10} {'limit':>10} "
              f"{'unit':<6} source")
    return "\n".join([header] + [violation.row() for violation in violations])


def violations_json(violations: list[Violation]) -> list[dict]:
    """JSON-ready list of violations."""
    return [asdict(violation) for violation in violations]
