"""Streaming timing: setpoints to the simulated bench at 1 kHz for 10 s (target: period error
p99 ≤ 0.5 ms and no missed deadline).

bemore: :class:`controller.session.Session` streaming a 10 s gesture with its absolute-time
scheduler (sleep until shortly before each deadline ``t0 + k·period``, then spin), telemetry read
concurrently and every record logged. Baseline, same run, same bench, same session code: a naive
loop that sends and then calls ``time.sleep(period)``. Period error = |interval between
consecutive sends − period|; a deadline miss = a send more than one period after ``t0 + k·period``
(or a skipped slot).
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import numpy as np

from bemore.settings import load_bench
from bench.common import Measurement
from controller.drive import bench_port
from controller.log import LogWriter
from controller.modes import ModeSettings, build_plan
from controller.scheduler import Scheduler
from controller.session import Session
from controller.setpoints import Gesture


class SleepLoop(Scheduler):
    """The naive baseline: after each send, ``time.sleep(period)`` (relative timing, no skip)."""

    def upcoming(self) -> int:
        return self.next_k

    def wait_for(self, k: int) -> bool:
        if k > 0:
            time.sleep(self.period_ns * 1e-9)
        self.next_k = k + 1
        return True


def slow_gesture(duration_s: float) -> Gesture:
    """0 → 60° → 0 (sin²) over ``duration_s``, 1 kHz, no torque: well within every limit."""
    t = np.arange(round(duration_s * 1000) + 1) / 1000.0
    amplitude = math.radians(60.0)
    angle = amplitude * np.sin(np.pi * t / duration_s) ** 2
    velocity = amplitude * np.pi / duration_s * np.sin(2 * np.pi * t / duration_s)
    return Gesture("bench", 1000.0, t, angle, velocity, np.zeros_like(t),
                   metadata={"athlete": "bench", "gesture": "sin² 0→60°→0"})


def stream_once(port: str, duration_s: float, naive: bool, folder: Path) -> dict:
    """One session streaming the slow gesture; its timing statistics."""
    bench = load_bench()
    settings = ModeSettings(rate_hz=1000.0, ramp_down_s=0.3)
    plan = build_plan(slow_gesture(duration_s), settings)
    name = "naive" if naive else "bemore"
    with LogWriter(folder / f"{name}.jsonl", {"benchmark": name}) as log:
        session = Session(port, bench, log, settings)
        try:
            session.connect(clear_fault=True)
            session.arm()
            scheduler = SleepLoop(1_000_000) if naive else None
            result = session.stream(plan, scheduler)
        finally:
            session.close()
    return result.timing | {"reason": result.reason}


def percentiles_line(label: str, timing: dict) -> str:
    return (f"  {label:<28} period error p50 {timing['period_error_p50_ms']:.3f} ms, p99 "
            f"{timing['period_error_p99_ms']:.3f} ms, max {timing['period_error_max_ms']:.3f} ms; "
            f"lateness p50 {timing['lateness_p50_ms']:.3f} ms, p99 {timing['lateness_p99_ms']:.3f}"
            f" ms, max {timing['lateness_max_ms']:.3f} ms; {timing['deadline_misses']} deadline "
            f"misses in {timing['sends']} sends ({timing['reason']})")


def run(smoke: bool) -> list[Measurement]:
    """Stream 10 s (smoke: 1 s) with bemore's scheduler, then with the naive loop."""
    duration_s = 1.0 if smoke else 10.0
    with tempfile.TemporaryDirectory() as folder, bench_port(None) as (port, _):
        ours = stream_once(port, duration_s, naive=False, folder=Path(folder))
        naive = stream_once(port, duration_s, naive=True, folder=Path(folder))
    print(percentiles_line("bemore (absolute deadlines)", ours))
    print(percentiles_line("naive time.sleep(period)", naive))
    target = "p99 ≤ 0.5 ms, no missed deadline"
    return [
        Measurement("period error p50 at 1 kHz", "ms", max(ours["period_error_p50_ms"], 1e-6),
                    naive["period_error_p50_ms"], "time.sleep loop"),
        Measurement("period error p99 at 1 kHz", "ms", max(ours["period_error_p99_ms"], 1e-6),
                    naive["period_error_p99_ms"], "time.sleep loop", target),
        Measurement("period error max at 1 kHz", "ms", max(ours["period_error_max_ms"], 1e-6),
                    naive["period_error_max_ms"], "time.sleep loop"),
        Measurement("deadline misses (+1, so the ratio exists)", "count",
                    ours["deadline_misses"] + 1, naive["deadline_misses"] + 1,
                    "time.sleep loop", "0 misses (i.e. 1)"),
    ]
