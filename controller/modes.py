"""Training modes: turn a gesture into the exact stream of setpoints the host will send.

A :class:`Plan` holds every setpoint of a session, already quantised to the wire units
(µrad, µrad/s, mN·m), so that what the pre-flight checks is exactly what is sent:

* **guided** — the bench moves the arms through the gesture (position mode, no torque
  feed-forward: the position loop does the work).
* **assistive** / **resistive** — the bench still follows the gesture, and adds (assistive) or
  opposes (resistive) ``load_pct`` % of the gesture's shoulder torque as a feed-forward: to stay
  on the gesture the athlete must produce (1 − load) or (1 + load) times the gesture's torque.
* **slow motion** — ``speed`` in [0.25, 1] plays the gesture at that fraction of its pace
  (gesture time τ = speed · t; velocities scale by ``speed``; the torque profile is replayed at τ,
  not rescaled).
* **repetitions** — ``reps`` times, with ``rest_s`` between them: during a rest the setpoint
  blends smoothly (smoothstep) from the gesture's last sample to its first.

Every plan ends with a ramp-down (:func:`stop_ramp`): velocity to zero, torque feed-forward
linearly to zero over ``ramp_down_s``; the same ramp ends an interrupted session.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bemore.errors import ConfigError
from controller.setpoints import Gesture

MODES = ("guided", "assistive", "resistive")
MIN_SPEED, MAX_SPEED = 0.25, 1.0
MAX_RATE_HZ = 1000.0
# Wire units (protocol.toml scales): SI value = wire integer × scale.
POSITION_SCALE = 1e-6  # rad per µrad
VELOCITY_SCALE = 1e-6  # rad/s per µrad/s
TORQUE_SCALE = 1e-3  # N·m per mN·m
POSITION_MODE_CODE = 0  # protocol.toml [modes] POSITION


@dataclass(frozen=True)
class ModeSettings:
    """How a gesture is played: mode, load (%), speed (time scale), repetitions, rest (s)."""

    mode: str = "guided"
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
        if self.mode == "guided" and self.load_pct != 0.0:
            raise ConfigError("load: only the assistive and resistive modes take a load")
        if not MIN_SPEED <= self.speed <= MAX_SPEED:
            raise ConfigError(f"speed {self.speed:g}: must be within {MIN_SPEED}..{MAX_SPEED}")
        if not 1 <= self.reps <= 1000:
            raise ConfigError(f"reps {self.reps}: must be within 1..1000")
        if not 0.0 <= self.rest_s <= 3600.0:
            raise ConfigError(f"rest {self.rest_s:g} s: must be within 0..3600 s")
        if not 0.0 < self.rate_hz <= MAX_RATE_HZ:
            raise ConfigError(f"rate {self.rate_hz:g} Hz: must be within 0..{MAX_RATE_HZ:g} Hz")
        if not 0.0 < self.ramp_down_s <= 5.0:
            raise ConfigError(f"ramp_down {self.ramp_down_s:g} s: must be within 0..5 s")

    @property
    def torque_gain(self) -> float:
        """Gesture torque factor: 0 (guided), +load (assistive), −load (resistive)."""
        sign = {"guided": 0.0, "assistive": 1.0, "resistive": -1.0}[self.mode]
        return sign * self.load_pct / 100.0


@dataclass
class Plan:
    """Every setpoint of a session, in wire units, with where each one comes from.

    ``time_ms`` is the stream time of each setpoint (its deadline, ms from the first one);
    ``gesture_t_s`` the gesture time it plays (NaN in rests and ramps); ``rep`` the repetition
    (1..N; 0 in a rest or the final ramp).
    """

    rate_hz: float
    time_ms: np.ndarray
    position_urad: np.ndarray
    velocity_urad_s: np.ndarray
    torque_mNm: np.ndarray  # noqa: N815 (the protocol's field name)
    gesture_t_s: np.ndarray
    rep: np.ndarray

    def __len__(self) -> int:
        return len(self.time_ms)

    @property
    def t_s(self) -> np.ndarray:
        """Stream time of each setpoint (s)."""
        return self.time_ms * 1e-3

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
        return float(self.time_ms[-1]) * 1e-3


def quantise(values: np.ndarray, scale: float) -> np.ndarray:
    """SI values → wire integers, truncated towards zero.

    Truncation never increases a magnitude, so a value within a range that contains zero stays
    within it after quantisation (rounding could step 0.5 unit past a limit).
    """
    return np.trunc(np.asarray(values, dtype=float) / scale).astype(np.int64)


def build_plan(gesture: Gesture, settings: ModeSettings) -> Plan:
    """All setpoints of ``settings.reps`` repetitions of ``gesture``, rests and final ramp."""
    period_s = 1.0 / settings.rate_hz
    steps = math.floor(gesture.duration_s / settings.speed / period_s + 1e-9)
    tau = np.minimum(np.arange(steps + 1) * period_s * settings.speed, gesture.duration_s)
    if tau[-1] < gesture.duration_s:
        tau = np.append(tau, gesture.duration_s)  # always end on the gesture's last sample
    angle = np.interp(tau, gesture.t_s, gesture.angle_rad)
    velocity = np.interp(tau, gesture.t_s, gesture.velocity_rad_s) * settings.speed
    torque = np.interp(tau, gesture.t_s, gesture.torque_nm) * settings.torque_gain
    rest = _rest_blend(angle, torque, settings)
    parts: list[tuple[np.ndarray, ...]] = []
    for rep in range(1, settings.reps + 1):
        parts.append((angle, velocity, torque, tau, np.full(tau.size, rep)))
        if rep < settings.reps and rest is not None:
            parts.append(rest)
    position = np.concatenate([part[0] for part in parts])
    ramp = stop_ramp(position[-1], 0.0, float(parts[-1][2][-1]), settings)
    parts.append((*ramp, np.full(ramp[0].size, np.nan), np.zeros(ramp[0].size, dtype=int)))
    columns = [np.concatenate([part[i] for part in parts]) for i in range(5)]
    count = columns[0].size
    return Plan(
        rate_hz=settings.rate_hz,
        time_ms=np.round(np.arange(count) * period_s * 1000.0).astype(np.int64),
        position_urad=quantise(columns[0], POSITION_SCALE),
        velocity_urad_s=quantise(columns[1], VELOCITY_SCALE),
        torque_mNm=quantise(columns[2], TORQUE_SCALE),
        gesture_t_s=columns[3],
        rep=columns[4].astype(np.int64),
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
    period_ms = 1000.0 / settings.rate_hz
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
