"""Training modes: turn a gesture into the exact stream of setpoints the host will send.

A :class:`Plan` holds every setpoint of a session, already quantised to the wire units
(µrad, µrad/s, mN·m), so that what the pre-flight checks is exactly what is sent.

The gesture needs a shoulder torque τ(t) (``setpoints.csv``: the exemplary model's inverse
dynamics along the optimal gesture, per shoulder). Every mode splits it between the athlete and
the bench; the bench sends its share as a torque feed-forward while its position loop keeps the
arms on the gesture (:data:`SHARES`, one definition; docs/drive.md prints the same table):

=================  ===============  ====================  =====================================
mode               athlete's share  bench's share (ff)    for
=================  ===============  ====================  =====================================
passive (default)  0 %              100 %                 learning the timing: she relaxes
guided             100 %            0 %                   the bench only holds the path
assistive P        100 − P %        P %                   a gesture she cannot do alone yet
resistive P        100 + P %        −P %                  strength: the bench pushes against her
=================  ===============  ====================  =====================================

* **slow motion** — ``speed`` X in [0.25, 1] plays the gesture at that fraction of its pace
  (gesture time τ = X·t; velocities scale by X). The torque is the exemplary model's inverse
  dynamics at the slowed pace: gravity unchanged, inertial terms (accelerations and velocity
  products) scaled by X², i.e. τ_X = τ_g + X²·(τ − τ_g) with τ_g the static (gravity) torque
  along the gesture, which ``bemore synthesize`` writes beside τ (``shoulder_static_torque_nm``).
  A setpoint file without that column is played at full pace only.
* **repetitions** — ``reps`` times, with ``rest_s`` between them: during a rest the setpoint
  blends smoothly (smoothstep) from the gesture's last sample to its first.

Every plan ends with a ramp-down (:func:`stop_ramp`): velocity to zero, torque feed-forward
linearly to zero over ``ramp_down_s``; the same ramp ends an interrupted session.
"""

from __future__ import annotations

import functools
import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import truediv

from controller.errors import ConfigError
from controller.protocol import load_spec
from controller.series import REMEMBERED_SAMPLES, floats, interp, ints, scaled
from controller.setpoints import Gesture

MODES = ("passive", "guided", "assistive", "resistive")
DEFAULT_MODE = "passive"
LOADED_MODES = ("assistive", "resistive")  # the modes that take a load in %
DEFAULT_LOAD_PCT = 50.0  # load of a loaded mode when none is given


def shares(mode: str, load_pct: float = 0.0) -> tuple[float, float]:
    """(athlete's share, bench's share) of the gesture's torque in ``mode`` (fractions, sum 1)."""
    load = load_pct / 100.0
    bench = {"passive": 1.0, "guided": 0.0, "assistive": load, "resistive": -load}[mode]
    return 1.0 - bench, bench

MIN_SPEED, MAX_SPEED = 0.25, 1.0
MAX_RATE_HZ = 1000.0
# Wire units, from the protocol definition (SI value = wire integer × scale); telemetry carries
# the same units as the setpoints it tracks.
_SPEC = load_spec()
POSITION_SCALE = _SPEC.scale("SETPOINT", "position_urad")  # rad per µrad
VELOCITY_SCALE = _SPEC.scale("SETPOINT", "velocity_urad_s")  # rad/s per µrad/s
TORQUE_SCALE = _SPEC.scale("SETPOINT", "torque_mNm")  # N·m per mN·m
TIME_SCALE = _SPEC.scale("SETPOINT", "time_ms")  # s per ms
POSITION_MODE_CODE = _SPEC.modes["POSITION"]


@dataclass(frozen=True)
class ModeSettings:
    """How a gesture is played: mode, load (%), speed (time scale), repetitions, rest (s)."""

    mode: str = DEFAULT_MODE
    load_pct: float = 0.0
    speed: float = 1.0
    reps: int = 1
    rest_s: float = 5.0
    rate_hz: float = 1000.0
    ramp_down_s: float = 0.3

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode {self.mode!r}: must be one of {', '.join(MODES)}")
        if not 0.0 <= self.load_pct <= 100.0:
            raise ConfigError(f"load {self.load_pct:g} %: must be within 0..100 %")
        if self.mode not in LOADED_MODES and self.load_pct != 0.0:
            raise ConfigError("load: only the assistive and resistive modes take a load")
        if not MIN_SPEED <= self.speed <= MAX_SPEED:
            raise ConfigError(f"speed {self.speed:g}: must be within {MIN_SPEED}..{MAX_SPEED}")
        if not 1 <= self.reps <= 1000:
            raise ConfigError(f"reps {self.reps}: must be within 1..1000")
        if not 0.0 <= self.rest_s <= 3600.0:
            raise ConfigError(f"rest {self.rest_s:g} s: must be within 0..3600 s")
        if not 0.0 < self.rate_hz <= MAX_RATE_HZ:
            raise ConfigError(
                f"rate {self.rate_hz:g} Hz: must be above 0 and at most {MAX_RATE_HZ:g} Hz")
        if not 0.0 < self.ramp_down_s <= 5.0:
            raise ConfigError(f"ramp_down {self.ramp_down_s:g} s: must be above 0 and at most 5 s")

    @property
    def torque_gain(self) -> float:
        """The bench's share of the gesture's torque: its feed-forward is this × τ (fraction)."""
        return shares(self.mode, self.load_pct)[1]

    @property
    def athlete_share(self) -> float:
        """The athlete's share of the gesture's torque (fraction): 1 − :attr:`torque_gain`."""
        return shares(self.mode, self.load_pct)[0]

    def describe(self) -> str:
        """'passive', 'assistive 60 %', with ', speed 0.5' when slowed."""
        text = self.mode + (f" {self.load_pct:g} %" if self.mode in LOADED_MODES else "")
        return text + (f", speed {self.speed:g}" if self.speed != 1.0 else "")


@dataclass
class Plan:
    """Every setpoint of a session, in wire units, with where each one comes from.

    ``time_ms`` is the stream time of each setpoint (its deadline, ms from the first one);
    ``gesture_t_s`` the gesture time it plays (NaN in rests and ramps); ``rep`` the repetition
    (1..N; 0 in a rest or the final ramp); ``need_nm`` the torque the gesture needs at each
    setpoint (N·m, per shoulder, at the played pace; blended in rests, ramped to 0 at the end),
    of which the athlete gives her share and the bench sends its share (``torque_mNm``); None
    when unknown (a replayed stream whose bench share was 0).
    """

    rate_hz: float
    time_ms: array  # of int
    position_urad: array  # of int
    velocity_urad_s: array  # of int
    torque_mNm: array  # of int  # noqa: N815 (the protocol's field name)
    gesture_t_s: array  # of float
    rep: array  # of int
    need_nm: array | None = None  # of float
    ramp_down_s: float = 0.3  # of a controlled stop from any setpoint (stop_ramp)

    def __post_init__(self) -> None:
        # any sequences given (lists, numpy arrays) are stored as the arrays documented above
        for name in ("time_ms", "position_urad", "velocity_urad_s", "torque_mNm", "rep"):
            setattr(self, name, ints(getattr(self, name)))
        self.gesture_t_s = floats(self.gesture_t_s)
        if self.need_nm is not None:
            self.need_nm = floats(self.need_nm)

    def __len__(self) -> int:
        return len(self.time_ms)

    @property
    def t_s(self) -> array:
        """Stream time of each setpoint (s)."""
        return scaled(self.time_ms, TIME_SCALE)

    @property
    def position_rad(self) -> array:
        """Commanded position (rad)."""
        return scaled(self.position_urad, POSITION_SCALE)

    @property
    def velocity_rad_s(self) -> array:
        """Commanded velocity (rad/s)."""
        return scaled(self.velocity_urad_s, VELOCITY_SCALE)

    @property
    def torque_nm(self) -> array:
        """Commanded torque feed-forward (N·m)."""
        return scaled(self.torque_mNm, TORQUE_SCALE)

    @property
    def duration_s(self) -> float:
        """Stream time of the last setpoint (s)."""
        return float(self.time_ms[-1]) * TIME_SCALE

    @property
    def stop_duration_s(self) -> float:
        """Duration of a controlled stop from any setpoint (s): :func:`stop_ramp`'s
        ``round(ramp_down_s · rate_hz)`` periods (at least one)."""
        return max(1, round(self.ramp_down_s * self.rate_hz)) / self.rate_hz

    @property
    def stop_torque_rate_nm_s(self) -> array:
        """Torque rate (N·m/s) of a controlled stop from each setpoint: its feed-forward to zero
        over :attr:`stop_duration_s`."""
        return array("d", list(map(truediv, self.torque_nm, repeat(self.stop_duration_s))))


def quantise(values: Iterable[float], scale: float) -> array:
    """SI values → wire integers, truncated towards zero (an ``array('q')``).

    Truncation never increases a magnitude, so a value within a range that contains zero stays
    within it after quantisation (rounding could step 0.5 unit past a limit).
    """
    return array("q", list(map(math.trunc, map(truediv, values, repeat(scale)))))


def paced_torque(gesture: Gesture, speed: float) -> Sequence[float]:
    """The torque the gesture needs at ``speed`` times its pace, at the gesture's samples (N·m).

    Inverse dynamics along the same path played slower: the static (gravity) part τ_g is
    unchanged, every inertial term (M·q̈ and the velocity products) scales with speed², so
    τ_X = τ_g + X²·(τ − τ_g). Raises ConfigError when slowed and the file has no τ_g column.
    """
    if speed == 1.0:
        return gesture.torque_nm
    if gesture.static_torque_nm is None:
        raise ConfigError(
            f"{gesture.path}: --speed {speed:g} needs the gesture's static torque column "
            "shoulder_static_torque_nm (written by bemore synthesize) to recompute the torque "
            "at the slowed pace; this file has none"
        )
    factor = speed**2
    return array("d", [static + factor * (torque - static) for static, torque
                       in zip(gesture.static_torque_nm, gesture.torque_nm, strict=True)])


@dataclass(frozen=True)
class Pace:
    """A gesture played at one speed and stream rate, before any mode splits its torque: per
    setpoint the gesture time ``tau_s`` (s), the angle (rad), the velocity (rad/s, at the
    played pace), the torque the gesture needs (N·m, :func:`paced_torque`), and the angle and
    velocity in wire units. What every mode and load at that speed share (:func:`pace`)."""

    speed: float
    rate_hz: float
    tau_s: array
    angle_rad: array
    velocity_rad_s: array
    need_nm: array
    position_urad: array
    velocity_urad_s: array


def pace(gesture: Gesture, settings: ModeSettings) -> Pace:
    """``gesture`` played at ``settings.speed`` and sampled at ``settings.rate_hz``: gesture
    time τ = k · period · speed, up to and always ending on the gesture's last sample."""
    period_s = 1.0 / settings.rate_hz
    speed, duration_s = settings.speed, gesture.duration_s
    steps = math.floor(duration_s / speed / period_s + 1e-9)
    tau = scaled(scaled(range(steps + 1), period_s), speed)  # (k · period) · speed
    for k in range(len(tau) - 1, -1, -1):  # rounding may step the last ones past the end
        if tau[k] <= duration_s:
            break
        tau[k] = duration_s
    if tau[-1] < duration_s:
        tau.append(duration_s)  # always end on the gesture's last sample
    angle = interp(tau, gesture.t_s, gesture.angle_rad)
    velocity = scaled(interp(tau, gesture.t_s, gesture.velocity_rad_s), speed)
    need = interp(tau, gesture.t_s, paced_torque(gesture, speed))
    return Pace(speed, settings.rate_hz, tau, angle, velocity, need,
                quantise(angle, POSITION_SCALE), quantise(velocity, VELOCITY_SCALE))


def build_plan(gesture: Gesture, settings: ModeSettings, paced: Pace | None = None) -> Plan:
    """All setpoints of ``settings.reps`` repetitions of ``gesture``, rests and final ramp.

    ``paced``: the gesture already played at this speed and rate (:func:`pace`; the feasible
    window builds many plans at one speed), else it is played here.
    """
    if paced is None or (paced.speed, paced.rate_hz) != (settings.speed, settings.rate_hz):
        paced = pace(gesture, settings)
    period_s = 1.0 / settings.rate_hz
    tau, angle, need = paced.tau_s, paced.angle_rad, paced.need_nm
    torque = scaled(need, settings.torque_gain)
    # quantisation is per sample: each part is quantised once, then repeated
    played = (paced.position_urad, paced.velocity_urad_s, quantise(torque, TORQUE_SCALE), tau)
    rest = _rest_blend(angle, torque, settings)
    rest_need = _rest_blend(angle, need, settings)
    rest_part = _wire_part(*rest, _nan(len(rest[0]))) if rest is not None else None
    parts: list[tuple[array, ...]] = []
    needs: list[array] = []
    for rep in range(1, settings.reps + 1):
        parts.append((*played, array("q", [rep]) * len(tau)))
        needs.append(need)
        if rep < settings.reps and rest_part is not None and rest_need is not None:
            parts.append((*rest_part, _zeros(len(rest_part[0]))))
            needs.append(rest_need[2])
    ramp = stop_ramp(angle[-1], 0.0, torque[-1], settings)
    needs.append(stop_ramp(angle[-1], 0.0, need[-1], settings)[2])
    parts.append((*_wire_part(*ramp, _nan(len(ramp[0]))), _zeros(len(ramp[0]))))
    columns = [_concatenate(part[i] for part in parts) for i in range(5)]
    count = len(columns[0])
    return Plan(
        rate_hz=settings.rate_hz,
        time_ms=stream_times_ms(count, period_s),
        position_urad=columns[0],
        velocity_urad_s=columns[1],
        torque_mNm=columns[2],
        gesture_t_s=columns[3],
        rep=columns[4],
        need_nm=_concatenate(needs),
        ramp_down_s=settings.ramp_down_s,
    )


def stream_times_ms(count: int, period_s: float) -> array:
    """Stream times (ms, wire integers) of ``count`` setpoints ``period_s`` apart:
    ``round(k · period_s / TIME_SCALE)`` (a new array)."""
    if count <= REMEMBERED_SAMPLES:
        return array("q", _remembered_times_ms(count, period_s))  # a copy
    return _times_ms(count, period_s)


def _times_ms(count: int, period_s: float) -> array:
    return array("q", list(map(round, map(truediv, scaled(range(count), period_s),
                                          repeat(TIME_SCALE)))))


_remembered_times_ms = functools.lru_cache(maxsize=4)(_times_ms)


def _wire_part(position: array, velocity: array, torque: array, gesture_t_s: array
               ) -> tuple[array, array, array, array]:
    """(position µrad, velocity µrad/s, torque mN·m, gesture time s) of a part of a plan."""
    return (quantise(position, POSITION_SCALE), quantise(velocity, VELOCITY_SCALE),
            quantise(torque, TORQUE_SCALE), gesture_t_s)


def _nan(count: int) -> array:
    return array("d", [math.nan]) * count


def _zeros(count: int) -> array:
    return array("q", [0]) * count


def _concatenate(parts: Iterable[array]) -> array:
    """The arrays of ``parts`` (one type code) end to end."""
    parts = list(parts)
    out = array(parts[0].typecode)
    for part in parts:
        out.extend(part)
    return out


def _rest_blend(angle: Sequence[float], torque: Sequence[float], settings: ModeSettings
                ) -> tuple[array, array, array] | None:
    """One rest: smoothstep from the last sample back to the first (rad, rad/s, N·m)."""
    count = round(settings.rest_s * settings.rate_hz)
    if settings.reps == 1 or count == 0:
        return None
    s = [k / (count + 1) for k in range(1, count + 1)]
    blend = [3 * (x * x) - 2 * x**3 for x in s]
    step, torque_step = angle[0] - angle[-1], torque[0] - torque[-1]
    position = array("d", [angle[-1] + step * b for b in blend])
    velocity = array("d", [step * (6 * x * (1 - x) / settings.rest_s) for x in s])  # d/dt, 1/s
    torque_ff = array("d", [torque[-1] + torque_step * b for b in blend])
    return position, velocity, torque_ff


def setpoint_fields(plan: Plan, k: int) -> dict[str, int]:
    """Wire fields of the SETPOINT message for slot ``k`` of ``plan`` (what the host sends)."""
    return {
        "time_ms": int(plan.time_ms[k]),
        "mode": POSITION_MODE_CODE,
        "position_urad": int(plan.position_urad[k]),
        "velocity_urad_s": int(plan.velocity_urad_s[k]),
        "torque_mNm": int(plan.torque_mNm[k]),
    }


def stop_setpoints(
    last: dict[str, int], settings: ModeSettings, min_position_rad: float,
    max_position_rad: float,
) -> list[dict[str, int]]:
    """Wire fields of the controlled-stop ramp that follows the setpoint ``last`` (wire fields).

    The ramp continues the stream's deadlines (``time_ms`` one period apart) and is quantised
    the same way as a plan (see :func:`stop_ramp` for the shape).
    """
    position, velocity, torque = stop_ramp(
        last["position_urad"] * POSITION_SCALE, last["velocity_urad_s"] * VELOCITY_SCALE,
        last["torque_mNm"] * TORQUE_SCALE, settings, min_position_rad, max_position_rad)
    period_ms = 1.0 / settings.rate_hz / TIME_SCALE
    columns = (quantise(position, POSITION_SCALE), quantise(velocity, VELOCITY_SCALE),
               quantise(torque, TORQUE_SCALE))
    return [
        {"time_ms": last["time_ms"] + round((i + 1) * period_ms), "mode": POSITION_MODE_CODE,
         "position_urad": int(columns[0][i]), "velocity_urad_s": int(columns[1][i]),
         "torque_mNm": int(columns[2][i])}
        for i in range(len(position))
    ]


def stop_ramp(
    position_rad: float, velocity_rad_s: float, torque_nm: float, settings: ModeSettings,
    min_position_rad: float = -math.inf, max_position_rad: float = math.inf,
) -> tuple[array, array, array]:
    """Controlled stop from a state: velocity and torque linearly to zero over ``ramp_down_s``.

    The position follows the decelerating velocity (p0 + v0·(t − t²/2T)) and is held within
    [min_position_rad, max_position_rad]. Returns (position rad, velocity rad/s, torque N·m),
    one sample per stream period, ending at zero velocity and zero torque.
    """
    count = max(1, round(settings.ramp_down_s * settings.rate_hz))
    duration = count / settings.rate_hz
    t = [k / settings.rate_hz for k in range(1, count + 1)]
    fraction = [1.0 - x / duration for x in t]
    position = array("d", [position_rad + velocity_rad_s * (x - (x * x) / (2 * duration))
                           for x in t])
    if min_position_rad > -math.inf or max_position_rad < math.inf:
        position = array("d", [min(max(x, min_position_rad), max_position_rad)
                               for x in position])
    return (position, array("d", [velocity_rad_s * f for f in fraction]),
            array("d", [torque_nm * f for f in fraction]))
