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
