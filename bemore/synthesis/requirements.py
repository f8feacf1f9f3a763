"""What the gesture asks of the bench and of the athlete (``gesture.json`` ``bench_requirements``).

The seed study's purpose: the optimal gesture and the efforts it needs are what the bench must
support. :func:`gesture_needs` measures them on the written gesture (per shoulder: peak and RMS
torque, peak torque rate, peak angular velocity, peak mechanical power |τ·ω|, flexion range);
:func:`bench_requirements` sets them against the bench configuration and the athlete's profile,
with the feasible window (modes, loads, speeds) computed by the bench side's own pre-flight
(``controller.cli.plan_window``), so that synthesis and ``bemore drive`` never disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bemore.profile import AthleteProfile
from bemore.settings import Bench
from bemore.synthesis.results import Profiles


def gesture_needs(profiles: Profiles) -> dict[str, float]:
    """Per-shoulder needs of a gesture sampled on ``profiles.t_s`` (SI; degrees labelled)."""
    torque = profiles.torque_per_shoulder_nm
    velocity = profiles.velocity_rad_s
    rate = np.diff(torque) / np.diff(profiles.t_s)
    angle = np.rad2deg(profiles.angle_rad)
    return {
        "peak_torque_nm": float(np.abs(torque).max()),
        "rms_torque_nm": float(np.sqrt(np.mean(torque**2))),
        "peak_torque_rate_nm_s": float(np.abs(rate).max()),
        "peak_velocity_deg_s": float(np.rad2deg(np.abs(velocity).max())),
        "peak_power_w": float(np.abs(torque * velocity).max()),
        "min_angle_deg": float(angle.min()),
        "max_angle_deg": float(angle.max()),
    }


def bench_requirements(profiles: Profiles, setpoints: Path, bench: Bench, bench_source: str,
                       athlete: AthleteProfile, text: str | None = None) -> dict[str, Any]:
    """``bench_requirements`` of gesture.json: the needs, the bench's and the athlete's limits,
    the share of each limit used, and the feasible window of ``setpoints`` (whose content is
    ``text`` when given, the file not written yet)."""
    from controller.cli import plan_window

    needs = gesture_needs(profiles)
    limits = bench.limits
    cells, table = plan_window(setpoints, bench, athlete, bench_source, text=text)
    return {
        "per_shoulder": needs,
        "bench": {
            "config": bench_source,
            "max_torque_nm": limits.max_torque_nm,
            "max_torque_rate_nm_s": limits.max_torque_rate_nm_s,
            "max_velocity_deg_s": limits.max_velocity_deg_s,
            "angle_range_deg": [limits.min_angle_deg, limits.max_angle_deg],
            "torque_used": needs["peak_torque_nm"] / limits.max_torque_nm,
            "torque_rate_used": needs["peak_torque_rate_nm_s"] / limits.max_torque_rate_nm_s,
            "velocity_used": needs["peak_velocity_deg_s"] / limits.max_velocity_deg_s,
        },
        "athlete": {
            **athlete.to_dict(),
            "torque_used_alone": needs["peak_torque_nm"] / athlete.shoulder_torque_limit_Nm,
        },
        "window": [
            {"mode": cell.mode, "speed": cell.speed,
             "loads_pct": list(cell.loads) if cell.loads is not None else None,
             "reason": cell.reason}
            for cell in cells
        ],
        "window_text": table,
    }


def requirement_lines(requirements: dict[str, Any]) -> list[str]:
    """Console lines: the needs against the bench and the athlete, then the window table."""
    needs, bench = requirements["per_shoulder"], requirements["bench"]
    athlete = requirements["athlete"]
    return [
        f"bench requirements (per shoulder): peak torque {needs['peak_torque_nm']:.1f} N·m "
        f"(RMS {needs['rms_torque_nm']:.1f}), torque rate {needs['peak_torque_rate_nm_s']:.0f} "
        f"N·m/s, velocity {needs['peak_velocity_deg_s']:.1f} deg/s, power "
        f"{needs['peak_power_w']:.0f} W, flexion {needs['min_angle_deg']:.0f}.."
        f"{needs['max_angle_deg']:.0f} deg",
        f"bench {bench['config']}: torque {bench['max_torque_nm']:g} N·m "
        f"({bench['torque_used']:.0%} used by the whole gesture), torque rate "
        f"{bench['max_torque_rate_nm_s']:g} N·m/s ({bench['torque_rate_used']:.0%}), velocity "
        f"{bench['max_velocity_deg_s']:g} deg/s ({bench['velocity_used']:.0%}); athlete "
        f"{athlete['name']}: {athlete['shoulder_torque_limit_Nm']:g} N·m "
        f"(the whole gesture is {athlete['torque_used_alone']:.0%} of it)",
        *requirements["window_text"].splitlines(),
    ]
