#!/usr/bin/env python3
"""Fault matrix: every fault of issue 23 injected into dry runs of `bemore drive`, N runs each.

Each run starts a fresh simulated bench (``--trace``: state, fault and motor torque every tick,
on the monotonic clock), drives a 1.5 s gesture (assistive 50 %: a torque feed-forward is in
force) in a forked child process, injects one fault, and reads back:

* how it ended: the session's end reason (or "no end record" when the host was killed) and the
  bench's final state from its trace;
* the time from the fault to zero torque for good (the last non-zero torque in the trace);
* the peak |torque| commanded after the fault;
* whether the log is complete: readable, and its last records say what happened (an ``end``
  record, or for a killed host the stream up to the kill with no ``end``).

Usage: ``.venv/bin/python tools/fault_matrix.py [--runs 10] [-k SUBSTRING] [--json FILE]``.
Prints a Markdown table (the one in docs/drive.md). Takes ≈ 3 s per run.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bemore.errors import BemoreError
from controller.log import read_log
from controller.modes import ModeSettings
from controller.protocol import load_spec
from controller.setpoints import Gesture, write_setpoints
from controller.simbench import SimFaults, start_simulated_bench

SPEC = load_spec()
RUN_TIMEOUT_S = 20.0
SETTLE_S = 0.4  # after the host ended: watchdog (50 ms) + fault ramp (≤ 150 ms) with margin


@dataclass(frozen=True)
class Scenario:
    """One row: a fault, where it is injected, how."""

    name: str
    at: str = "mid"  # "arm" (the log shows ARMED), "start" (20 ms into the stream), "mid" (0.5 s)
    command: str | None = None  # run-time injection on the simulated bench
    faults: str = ""  # start-up faults of the simulated bench (SimFaults.parse)
    host_signal: int | None = None
    kill_bench: bool = False


SCENARIOS = [
    Scenario("SIGKILL of the host", host_signal=signal.SIGKILL),
    Scenario("SIGKILL of the simulated bench", kill_bench=True),
    Scenario("cable cut (both directions)", command="drop 1", faults="direction=both"),
    Scenario("corruption host→bench (0.5 % of bytes)", command="corrupt 0.005"),
    Scenario("corruption bench→host (0.5 % of bytes)", command="corrupt 0.005",
             faults="direction=tx"),
    Scenario("drops host→bench (0.5 % of bytes)", command="drop 0.005"),
    Scenario("drops bench→host (0.5 % of bytes)", command="drop 0.005", faults="direction=tx"),
    Scenario("delay 10 ms host→bench", command="delay 10"),
    Scenario("delay 30 ms host→bench", command="delay 30"),
    Scenario("delay 60 ms host→bench", command="delay 60"),
    Scenario("firmware stall 80 ms", command="stall 80"),
    Scenario("firmware stall 200 ms (hardware watchdog reset)", command="stall 200"),
    Scenario("firmware reset", command="reset"),
    Scenario("e-stop input", command="estop on"),
    Scenario("driver fault", command="driver on"),
    Scenario("Ctrl-C at ARM", at="arm", host_signal=signal.SIGINT),
    Scenario("SIGTERM at ARM", at="arm", host_signal=signal.SIGTERM),
    Scenario("Ctrl-C at the start", at="start", host_signal=signal.SIGINT),
    Scenario("SIGTERM at the start", at="start", host_signal=signal.SIGTERM),
    Scenario("Ctrl-C mid-stream", host_signal=signal.SIGINT),
    Scenario("SIGTERM mid-stream", host_signal=signal.SIGTERM),
]


def write_gesture(path: Path) -> None:
    """A 1.5 s rest-to-rest 0 → 90° → 0 gesture (sin²) with a gravity-like torque, 1 kHz."""
    duration, peak = 1.5, math.radians(90.0)
    t = np.arange(round(duration * 1000) + 1) / 1000
    angle = peak * np.sin(np.pi * t / duration) ** 2
    velocity = peak * np.pi / duration * np.sin(2 * np.pi * t / duration)
    torque = 25.0 * np.sin(angle) + 2.0 * peak * 2 * np.pi**2 / duration**2 * np.cos(
        2 * np.pi * t / duration)
    write_setpoints(path, Gesture(str(path), 1000.0, t, angle, velocity, torque,
                                  metadata={"athlete": "default", "gesture": "fault matrix"}))


def _child(gesture: Path, log: Path, port: str) -> None:
    """The host: one drive, its exit code as the process's (os._exit: no parent's atexit)."""
    from controller.drive import drive

    code = 1
    try:
        settings = ModeSettings(mode="assistive", load_pct=50.0)
        code = drive(gesture, log, settings, port=port).exit_code
    except BemoreError as error:
        code = error.exit_code
    except BaseException:  # any other way out is a crash of the host
        code = 99
    os._exit(code)


def _wait_for(log: Path, needle: str, timeout_s: float) -> bool:
    """Poll the log (incrementally) until it contains ``needle``."""
    deadline, offset, tail = time.monotonic() + timeout_s, 0, ""
    while time.monotonic() < deadline:
        if log.exists():
            with log.open("r", encoding="utf-8", errors="replace") as handle:
                handle.seek(offset)
                chunk = handle.read()
                offset = handle.tell()
            tail = tail[-200:] + chunk
            if needle in tail:
                return True
        time.sleep(0.001)
    return False


def run_once(scenario: Scenario, gesture: Path, folder: Path, seed: int) -> dict:
    """One run of ``scenario``; the measurements of the table."""
    trace, log = folder / "trace.txt", folder / "session.jsonl"
    for path in (trace, log):
        path.unlink(missing_ok=True)
    base = SimFaults.parse(scenario.faults) if scenario.faults else SimFaults()
    faults = SimFaults(**{**base.__dict__, "seed": seed, "trace": str(trace)})
    fork = multiprocessing.get_context("fork")
    fault_ns = None
    with start_simulated_bench(faults=faults) as simulated:
        host = fork.Process(target=_child, args=(gesture, log, simulated.port))
        host.start()
        needle = '"kind": "armed"' if scenario.at == "arm" else '"kind": "streaming"'
        if _wait_for(log, needle, 30.0):
            time.sleep({"arm": 0.0, "start": 0.02, "mid": 0.5}[scenario.at])
            fault_ns = time.monotonic_ns()
            if scenario.host_signal is not None:
                os.kill(host.pid, scenario.host_signal)
            elif scenario.kill_bench:
                simulated.process.kill()
            else:
                simulated.command(scenario.command)
        host.join(RUN_TIMEOUT_S)
        if host.is_alive():
            host.kill()
            host.join()
        time.sleep(SETTLE_S)
    result = {"exit": host.exitcode, **_read_trace(trace, fault_ns), **_read_log(log)}
    if scenario.kill_bench:  # the motor's command went with the process
        result["final"] = "bench process gone"
    return result


def _read_trace(trace: Path, fault_ns: int | None) -> dict:
    """Final state, time from the fault to zero torque for good, peak |torque| after it."""
    if fault_ns is None or not trace.exists():
        return {"final": "no trace", "zero_ms": None, "peak_nm": None}
    rows = np.loadtxt(trace, dtype=np.int64, ndmin=2)
    after = rows[rows[:, 0] >= fault_ns]
    last = rows[-1]
    state = SPEC.name_of("states", int(last[1]))
    fault = SPEC.name_of("faults", int(last[2]))
    final = state + (f" {fault}" if fault != "NONE" else "")
    final += "" if last[3] == 0 else f", {abs(last[3]) / 1000:.1f} N·m at its end"
    if after.size == 0:
        return {"final": final, "zero_ms": None, "peak_nm": None}
    moving = np.flatnonzero(after[:, 3] != 0)
    zero_ms = 0.0 if moving.size == 0 else (
        (after[moving[-1] + 1, 0] - fault_ns) / 1e6 if moving[-1] + 1 < len(after) else None)
    return {"final": final, "zero_ms": zero_ms, "peak_nm": float(np.abs(after[:, 3]).max()) / 1e3}


def _read_log(log: Path) -> dict:
    """How the log ends: the end record's reason, or what its last records are."""
    try:
        session = read_log(log)
    except (BemoreError, OSError) as error:
        return {"ended": f"log unreadable: {error}", "log_ok": False}
    if session.end is not None:
        return {"ended": session.end["reason"], "log_ok": True}
    # no end record: only a killed host may leave one so; its stream must be there up to it
    kinds = [event["kind"] for event in session.events]
    return {"ended": "no end record (host killed)",
            "log_ok": "armed" in kinds and session.setpoints["k"].size > 0}


def summarise(name: str, runs: list[dict]) -> dict:
    """One row of the table."""
    ended = Counter(f"{run['ended']} → {run['final'].split(' (last traced')[0]}" for run in runs)
    zeros = [run["zero_ms"] for run in runs if run["zero_ms"] is not None]
    peaks = [run["peak_nm"] for run in runs if run["peak_nm"] is not None]
    return {
        "scenario": name, "runs": len(runs),
        "ended": "; ".join(f"{count}× {what}" for what, count in ended.most_common()),
        "exit": "/".join(str(code) for code in sorted({run["exit"] for run in runs})),
        "zero_ms_median": statistics.median(zeros) if zeros else None,
        "zero_ms_max": max(zeros) if zeros else None,
        "zero_unknown": len(runs) - len(zeros),
        "peak_nm_max": max(peaks) if peaks else None,
        "log_ok": sum(run["log_ok"] for run in runs),
    }


def table(rows: list[dict]) -> str:
    """The Markdown table."""
    lines = ["| fault | how it ended (session end → bench's final state) | exit | time to zero "
             "torque, median / max (ms) | peak torque after the fault (N·m) | log complete |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        zero = ("—" if row["zero_ms_median"] is None else
                f"{row['zero_ms_median']:.0f} / {row['zero_ms_max']:.0f}")
        if row["zero_unknown"]:
            zero += f" ({row['zero_unknown']} without)"
        peak = "—" if row["peak_nm_max"] is None else f"{row['peak_nm_max']:.1f}"
        lines.append(f"| {row['scenario']} | {row['ended']} | {row['exit']} | {zero} | {peak} | "
                     f"{row['log_ok']}/{row['runs']} |")
    return "\n".join(lines)


def main() -> None:
    """Run the matrix and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("-k", dest="only", default="", help="only scenarios containing this")
    parser.add_argument("--json", type=Path, default=None, help="also write every run here")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="print the table of the runs written by an earlier --json")
    args = parser.parse_args()
    if args.from_json is not None:
        raw = json.loads(args.from_json.read_text())
        print(table([summarise(name, runs) for name, runs in raw.items()]))
        return
    rows, raw = [], {}
    with tempfile.TemporaryDirectory(prefix="fault-matrix-") as tmp:
        folder = Path(tmp)
        gesture = folder / "gesture.csv"
        write_gesture(gesture)
        for scenario in SCENARIOS:
            if args.only not in scenario.name:
                continue
            runs = [run_once(scenario, gesture, folder, seed) for seed in range(args.runs)]
            raw[scenario.name] = runs
            rows.append(summarise(scenario.name, runs))
            print(f"{scenario.name}: {rows[-1]['ended']}", file=sys.stderr, flush=True)
    load = os.getloadavg()
    print(table(rows))
    print(f"\n{args.runs} runs per fault; load average at the end {load[0]:.1f}")
    if args.json is not None:
        args.json.write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
