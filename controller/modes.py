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

import math
from dataclasses import dataclass

import numpy as np

from controller.errors import ConfigError
from controller.protocol import load_spec
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
    time_ms: np.ndarray
    position_urad: np.ndarray
    velocity_urad_s: np.ndarray
    torque_mNm: np.ndarray  # noqa: N815 (the protocol's field name)
    gesture_t_s: np.ndarray
    rep: np.ndarray
    need_nm: np.ndarray | None = None
    ramp_down_s: float = 0.3  # of a controlled stop from any setpoint (stop_ramp)

    def __len__(self) -> int:
        return len(self.time_ms)

    @property
    def t_s(self) -> np.ndarray:
        """Stream time of each setpoint (s)."""
        return self.time_ms * TIME_SCALE

    @property
    def position_rad(self) -> np.ndarray:
        """Commanded position (rad)."""
        return self.position_urad * POSITION_SCALE

    @property
    def velocity_rad_s(self) -> np.ndarray:
        """Commanded velocity (rad/s)."""
        return self.velocity_urad_s * VELOCITY_SCALE

    @property
    def torque_nm(self) -> np.ndarray:
        """Commanded torque feed-forward (N·m)."""
        return self.torque_mNm * TORQUE_SCALE

    @property
    def duration_s(self) -> float:
        """Stream time of the last setpoint (s)."""
        return float(self.time_ms[-1]) * TIME_SCALE

    @property
    def stop_torque_rate_nm_s(self) -> np.ndarray:
        """Torque rate (N·m/s) of a controlled stop from each setpoint: its feed-forward to zero
        over the stop ramp (:func:`stop_ramp`: ``round(ramp_down_s · rate_hz)`` periods)."""
        duration_s = max(1, round(self.ramp_down_s * self.rate_hz)) / self.rate_hz
        return self.torque_nm / duration_s


def quantise(values: np.ndarray, scale: float) -> np.ndarray:
    """SI values → wire integers, truncated towards zero.

    Truncation never increases a magnitude, so a value within a range that contains zero stays
    within it after quantisation (rounding could step 0.5 unit past a limit).
    """
    return np.trunc(np.asarray(values, dtype=float) / scale).astype(np.int64)


def paced_torque(gesture: Gesture, speed: float) -> np.ndarray:
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
    static = gesture.static_torque_nm
    return static + speed**2 * (gesture.torque_nm - static)


def build_plan(gesture: Gesture, settings: ModeSettings) -> Plan:
    """All setpoints of ``settings.reps`` repetitions of ``gesture``, rests and final ramp."""
    period_s = 1.0 / settings.rate_hz
    steps = math.floor(gesture.duration_s / settings.speed / period_s + 1e-9)
    tau = np.minimum(np.arange(steps + 1) * period_s * settings.speed, gesture.duration_s)
    if tau[-1] < gesture.duration_s:
        tau = np.append(tau, gesture.duration_s)  # always end on the gesture's last sample
    angle = np.interp(tau, gesture.t_s, gesture.angle_rad)
    velocity = np.interp(tau, gesture.t_s, gesture.velocity_rad_s) * settings.speed
    need = np.interp(tau, gesture.t_s, paced_torque(gesture, settings.speed))
    torque = need * settings.torque_gain
    rest = _rest_blend(angle, torque, settings)
    rest_need = _rest_blend(angle, need, settings)
    parts: list[tuple[np.ndarray, ...]] = []
    needs: list[np.ndarray] = []
    for rep in range(1, settings.reps + 1):
        parts.append((angle, velocity, torque, tau, np.full(tau.size, rep)))
        needs.append(need)
        if rep < settings.reps and rest is not None:
            parts.append(rest)
            needs.append(rest_need[2])
    position = np.concatenate([part[0] for part in parts])
    ramp = stop_ramp(position[-1], 0.0, float(parts[-1][2][-1]), settings)
    needs.append(stop_ramp(position[-1], 0.0, float(need[-1]), settings)[2])
    parts.append((*ramp, np.full(ramp[0].size, np.nan), np.zeros(ramp[0].size, dtype=int)))
    columns = [np.concatenate([part[i] for part in parts]) for i in range(5)]
    count = columns[0].size
    return Plan(
        rate_hz=settings.rate_hz,
        time_ms=np.round(np.arange(count) * period_s / TIME_SCALE).astype(np.int64),
        position_urad=quantise(columns[0], POSITION_SCALE),
        velocity_urad_s=quantise(columns[1], VELOCITY_SCALE),
        torque_mNm=quantise(columns[2], TORQUE_SCALE),
        gesture_t_s=columns[3],
        rep=columns[4].astype(np.int64),
        need_nm=np.concatenate(needs),
        ramp_down_s=settings.ramp_down_s,
    )


def _rest_blend(
    angle: np.ndarray, torque: np.ndarray, settings: ModeSettings
) -> tuple[np.ndarray, ...] | None:
    """One rest: smoothstep from the last sample back to the first (rad, rad/s, N·m)."""
    count = round(settings.rest_s * settings.rate_hz)
    if settings.reps == 1 or count == 0:
        return None
    s = np.arange(1, count + 1) / (count + 1)
    blend = 3 * s**2 - 2 * s**3
    slope = 6 * s * (1 - s) / settings.rest_s  # d(blend)/dt, 1/s
    position = angle[-1] + (angle[0] - angle[-1]) * blend
    velocity = (angle[0] - angle[-1]) * slope
    torque_ff = torque[-1] + (torque[0] - torque[-1]) * blend
    return position, velocity, torque_ff, np.full(count, np.nan), np.zeros(count, dtype=int)


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
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Controlled stop from a state: velocity and torque linearly to zero over ``ramp_down_s``.

    The position follows the decelerating velocity (p0 + v0·(t − t²/2T)) and is held within
    [min_position_rad, max_position_rad]. Returns (position rad, velocity rad/s, torque N·m),
    one sample per stream period, ending at zero velocity and zero torque.
    """
    count = max(1, round(settings.ramp_down_s * settings.rate_hz))
    duration = count / settings.rate_hz
    t = np.arange(1, count + 1) / settings.rate_hz
    fraction = 1.0 - t / duration
    position = position_rad + velocity_rad_s * (t - t**2 / (2 * duration))
    position = np.clip(position, min_position_rad, max_position_rad)
    return position, velocity_rad_s * fraction, torque_nm * fraction
