"""Phase timestamps of a command, for the benchmark of the coach's wait (``python -m bench coach``).

When the environment variable ``BEMORE_PHASE_TIMES`` names a file, :func:`mark` appends one JSON
line ``{"command": …, "phase": …, "end_unix_s": …}`` to it: the wall-clock instant (Unix time,
s) at which that phase of the command ended. The benchmark knows when it started the process,
so each phase's duration is the difference between consecutive marks (the first one, the
start-up, from the process's start). Without the variable, :func:`mark` does nothing.
"""

from __future__ import annotations

import json
import os
import time

ENVIRONMENT = "BEMORE_PHASE_TIMES"


def mark(command: str, phase: str) -> None:
    """Record that ``phase`` of ``command`` ends now, with the process's CPU time so far
    (``cpu_s``, s, all its threads) (no-op unless ``BEMORE_PHASE_TIMES`` is set; a file that
    cannot be written is ignored: timing never fails a command)."""
    path = os.environ.get(ENVIRONMENT)
    if not path:
        return
    line = json.dumps({"command": command, "phase": phase, "end_unix_s": time.time(),
                       "cpu_s": time.process_time()})
    try:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(line + "\n")
    except OSError:
        pass


def read(path: str | os.PathLike[str]) -> list[dict[str, object]]:
    """The marks written to ``path``, in order (each a dict of command, phase, end_unix_s)."""
    with open(path, encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def durations(path: str | os.PathLike[str], started_unix_s: float, total_s: float
              ) -> dict[str, float]:
    """Seconds of each phase marked in ``path`` by a process started at ``started_unix_s`` that
    ran ``total_s`` seconds: a phase lasts from the previous mark (or the start) to its own; a
    phase marked twice adds up; "exit" is the teardown after the last mark."""
    seconds: dict[str, float] = {}
    previous = started_unix_s
    for item in read(path):
        phase, end = str(item["phase"]), float(item["end_unix_s"])
        seconds[phase] = seconds.get(phase, 0.0) + end - previous
        previous = end
    seconds["exit"] = started_unix_s + total_s - previous
    return seconds


def cpu_durations(path: str | os.PathLike[str], total_cpu_s: float) -> dict[str, float]:
    """CPU seconds (all threads) of each phase marked in ``path`` by one process whose whole
    CPU time was ``total_cpu_s`` (e.g. from ``wait4``): from the previous mark's ``cpu_s`` (or
    0) to its own; "exit" is what follows the last mark."""
    seconds: dict[str, float] = {}
    previous = 0.0
    for item in read(path):
        phase, end = str(item["phase"]), float(item["cpu_s"])
        seconds[phase] = seconds.get(phase, 0.0) + end - previous
        previous = end
    seconds["exit"] = total_cpu_s - previous
    return seconds
