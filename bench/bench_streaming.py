"""Streaming timing: setpoints to the simulated bench at 1 kHz for 10 s (target: period error
p99 ≤ 0.5 ms and no missed deadline).

bemore: :class:`controller.session.Session` streaming a 10 s gesture with its absolute-time
scheduler (frame encoded before the deadline; sleep until 0.3 ms before ``t0 + k·period``, then
spin; only the write after), telemetry read concurrently and every record logged. Baseline, same
run, same bench, same session code: a naive loop that sends and then calls
``time.sleep(period)``. Each run streams both, alternately, on a fresh simulated bench each, and
prints the load average of the machine, so that the figures can be read against the conditions.

Period error = |interval between consecutive sends − period|. Each setpoint is sent ``lead``
(``configs/bench.toml [streaming] lead_ms``, 20 ms) before it is due; the firmware queues it and
applies it at its due tick. A *deadline miss* = a setpoint that reached the firmware after its due
tick: counted by the firmware (``late_setpoints``) and by the host (sends later than lead −
1 ms, see ``controller.scheduler``); both are printed. A *late send* = a send more than one
period after its send deadline (jitter the firmware's queue absorbs). Printed next to them: the
simulated bench's own tick lateness — a C process at real-time priority in the same run, i.e.
what this machine lets any program achieve.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bemore.settings import load_bench
from bench.common import Measurement
from controller.drive import bench_port
from controller.log import LogWriter, read_log
from controller.modes import ModeSettings, build_plan
from controller.replay import summarise
from controller.scheduler import Scheduler, miss_threshold_ns
from controller.session import Session
from controller.setpoints import Gesture

RUNS = 3  # full mode: runs of (bemore, naive), medians reported


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


def stream_once(duration_s: float, naive: bool, folder: Path) -> dict:
    """One session on a fresh simulated bench; its timing, firmware and bench-tick figures."""
    bench = load_bench()
    settings = ModeSettings(rate_hz=1000.0, ramp_down_s=0.3)
    plan = build_plan(slow_gesture(duration_s), settings)
    name = "naive" if naive else "bemore"
    load = os.getloadavg()[0]
    log_path = folder / f"{name}.jsonl"
    with bench_port(None) as (port, simulated), LogWriter(log_path, {"benchmark": name}) as log:
        session = Session(port, bench, log, settings)
        try:
            session.connect(clear_fault=True)
            with session.realtime():  # from before ARM, as Session.run does
                session.arm()
                threshold = miss_threshold_ns(int(bench.streaming.lead_ms) * 1_000_000)
                scheduler = (SleepLoop(1_000_000, threshold, capacity=len(plan) + 400)
                             if naive else None)
                result = session.stream(plan, scheduler)
        finally:
            session.close()
    simulated.stop()
    firmware_late = summarise(read_log(log_path)).firmware_counters.get("late_setpoints", -1)
    return result.timing | {"reason": result.reason, "load": load,
                            "firmware_late": firmware_late, **simulated.tick_timing()}


def report_lines(label: str, t: dict) -> list[str]:
    """The jitter percentiles and histogram of one stream, and its misses."""
    histogram = ", ".join(f"{bin_ms} {count}" for bin_ms, count in t["histogram"].items())
    return [
        f"  {label:<8} load {t['load']:.1f}: period error p50 {t['period_error_p50_ms']:.3f}, "
        f"p90 {t['period_error_p90_ms']:.3f}, p99 {t['period_error_p99_ms']:.3f}, p99.9 "
        f"{t['period_error_p999_ms']:.3f}, max {t['period_error_max_ms']:.3f} ms; lateness p50 "
        f"{t['lateness_p50_ms']:.3f}, p99 {t['lateness_p99_ms']:.3f}, max "
        f"{t['lateness_max_ms']:.1f} ms",
        f"           deadline misses: firmware {t['firmware_late']}, host {t['deadline_misses']} "
        f"(sends > {t['miss_threshold_ms']:g} ms late); {t['late_sends']} late sends "
        f"(> 1 period), in {t['sends']} sends ({t['reason']}); simulated bench "
        f"(C, real-time): {t.get('late_ticks_1ms', '?')} ticks > 1 ms late, max tick lag "
        f"{t.get('max_tick_lag_ms', math.nan):.2f} ms",
        f"           period error histogram (ms): {histogram}",
    ]


def run(smoke: bool) -> list[Measurement]:
    """Stream 10 s (smoke: 1 s, one run) with bemore's scheduler, then with the naive loop."""
    duration_s, runs = (1.0, 1) if smoke else (10.0, RUNS)
    ours, naive = [], []
    with tempfile.TemporaryDirectory() as folder:
        for index in range(runs):
            ours.append(stream_once(duration_s, naive=False, folder=Path(folder)))
            naive.append(stream_once(duration_s, naive=True, folder=Path(folder)))
            print(f"  run {index + 1}/{runs}, {duration_s:g} s at 1 kHz each")
            for line in report_lines("bemore", ours[-1]) + report_lines("naive", naive[-1]):
                print(line)

    def median(runs_: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in runs_)

    target = "p99 ≤ 0.5 ms, no missed deadline"
    figures = [("period error p50 at 1 kHz", "ms", "period_error_p50_ms", ""),
               ("period error p99 at 1 kHz", "ms", "period_error_p99_ms", target),
               ("period error p99.9 at 1 kHz", "ms", "period_error_p999_ms", ""),
               ("period error max at 1 kHz", "ms", "period_error_max_ms", "")]
    out = [Measurement(f"{name} (median of {runs})", unit, max(median(ours, key), 1e-6),
                       median(naive, key), "time.sleep loop", goal)
           for name, unit, key, goal in figures]
    out.append(Measurement(f"deadline misses (firmware count), +1 so the ratio exists (median "
                           f"of {runs}; max {max(r['firmware_late'] for r in ours)})", "count",
                           median(ours, "firmware_late") + 1,
                           median(naive, "firmware_late") + 1, "time.sleep loop",
                           "0 misses (i.e. 1)"))
    out.append(Measurement(f"deadline misses (host count), +1 (median of {runs}; max "
                           f"{max(r['deadline_misses'] for r in ours)})", "count",
                           median(ours, "deadline_misses") + 1,
                           median(naive, "deadline_misses") + 1, "time.sleep loop",
                           "0 misses (i.e. 1)"))
    out.append(Measurement(f"late sends > 1 period, +1 (median of {runs})", "count",
                           median(ours, "late_sends") + 1, median(naive, "late_sends") + 1,
                           "time.sleep loop"))
    return out
