"""Streaming on a busy machine: consecutive dry runs of the sample gesture with two CPU-bound
processes running beside them (target: 100 of 100 end without a fault).

The sample gesture is the default synthesis (`bemore synthesize`, the seed's athlete); each dry
run is `bemore drive` in its default mode (passive) on a fresh simulated bench with its gesture
load and simulated athlete, as `controller.drive.drive` runs it. Two processes spin on the CPU
the whole time (`while True: pass`, one per core of the 2-core machine the figures come from).
Reported: how many runs completed, and for every other one its end and, from its log, the
replay's attribution (e.g. how long the host was silent before a WATCHDOG fault). Not a timed
test: a figure for docs/drive.md, with the load average before and after.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Measurement

RUNS = 100
HOGS = 2


def sample_gesture(folder: Path) -> Path:
    """Write the default synthesis' setpoints.csv into ``folder`` (as `bemore synthesize`)."""
    from click.testing import CliRunner

    from bemore.cli import cli

    result = CliRunner().invoke(cli, ["synthesize", "--no-animation", "--out", str(folder)])
    if result.exit_code != 0:
        raise RuntimeError(result.output)
    return folder / "setpoints.csv"


def start_hogs(count: int) -> list[subprocess.Popen]:
    """``count`` CPU-bound processes (pure spinning Python), to be stopped by the caller."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def run(smoke: bool) -> list[Measurement]:
    """RUNS dry runs (smoke: 2) with HOGS spinning processes beside; the count that completed."""
    from controller.drive import drive
    from controller.replay import summarise_file

    runs = 2 if smoke else RUNS
    ends: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory() as folder:
        setpoints = sample_gesture(Path(folder) / "g")
        before = os.getloadavg()[0]
        hogs = start_hogs(HOGS)
        try:
            time.sleep(1.0)  # let the hogs take their cores
            started = time.monotonic()
            for index in range(runs):
                log = Path(folder) / f"run{index}.jsonl"
                result = drive(setpoints, log)
                ends[result.reason] += 1
                if not result.ok:
                    cause = summarise_file(log).fault_cause()
                    print(f"  run {index + 1}: {result.reason}: {result.message}{cause}")
                log.unlink()
            elapsed = time.monotonic() - started
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        after = os.getloadavg()[0]
    completed = ends["completed"]
    print(f"  {completed} of {runs} dry runs completed with {HOGS} CPU-bound processes beside "
          f"({dict(ends)}); {elapsed:.0f} s; load average {before:.1f} before, {after:.1f} at "
          "the end")
    return [Measurement(f"dry runs completed of {runs}, {HOGS} CPU hogs beside (load "
                        f"{before:.1f} → {after:.1f})", "runs", completed,
                        target=f"{runs} of {runs}")]
