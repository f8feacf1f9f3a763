"""Shared fixtures of the controller tests: a plausible gesture, the bench configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from bemore.settings import load_bench
from controller.setpoints import Gesture, write_setpoints
from tests.controller.gestures import make_gesture


@pytest.fixture
def gesture() -> Gesture:
    """The default 2.4 s, 160° test gesture."""
    return make_gesture()


@pytest.fixture
def setpoint_file(tmp_path: Path) -> Path:
    """The default test gesture written as a setpoint file."""
    path = tmp_path / "setpoints.csv"
    write_setpoints(path, make_gesture())
    return path


@pytest.fixture
def bench():
    """The bundled bench configuration."""
    return load_bench()


@pytest.fixture
def loaded_machine_bench():
    """The bundled bench with streaming slack for a loaded machine, for the tests whose claim is
    not the stream's timing: 250 Hz, each setpoint sent 100 ms before it is due (the most the
    firmware takes), a 500 ms watchdog. A stall of the host or of the simulated bench shorter
    than the lead then costs nothing; with the defaults (1 kHz, 20 ms, 50 ms), a test process
    without real-time priority at load 3 ends its session on late setpoints or a WATCHDOG fault
    (3 runs in 3). The default stream's timing is the benchmarks' business (bench/)."""
    bench = load_bench()
    return bench.model_copy(update={"streaming": bench.streaming.model_copy(
        update={"rate_hz": 250.0, "lead_ms": 100, "watchdog_ms": 500.0})})
