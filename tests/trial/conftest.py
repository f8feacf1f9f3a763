"""Fixtures of the trial tests: the real laboratory files and small synthetic bar trials."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from docs_kinematics import circle_coordinates, points_from_coordinates

from bemore.trial.c3d import write_c3d
from bemore.trial.markerplacement import model_marker_positions, model_to_lab
from bemore.trial.markers import Markers

REALDATA = Path(__file__).resolve().parents[1] / "data"  # tests/data (see its README.md)
REAL_C3D = REALDATA / "pyomeca_markers_analogs.c3d"
REAL_TRC = REALDATA / "pyomeca_markers.trc"


@pytest.fixture(scope="session")
def real_c3d() -> Path:
    assert REAL_C3D.is_file(), f"real laboratory file missing: {REAL_C3D}"
    return REAL_C3D


@pytest.fixture(scope="session")
def real_trc() -> Path:
    assert REAL_TRC.is_file(), f"real laboratory file missing: {REAL_TRC}"
    return REAL_TRC


def kinematic_trial(duration_s: float = 2.0, rate_hz: float = 100.0, noise_m: float = 0.0,
                    seed: int = 0, prefix: str = "Gymnast:"):
    """Markers of the docs-kinematics circle: (Markers, t, free, driven, points)."""
    t = np.arange(round(duration_s * rate_hz) + 1) / rate_hz
    free, driven = circle_coordinates(t)
    points = points_from_coordinates(free, driven)
    labels, model_positions = model_marker_positions(points)
    lab = model_to_lab(model_positions, 2.5)
    lab = lab + np.random.default_rng(seed).normal(0.0, noise_m, lab.shape)
    markers = Markers(t, lab, tuple(prefix + label for label in labels), rate_hz, "synthetic")
    return markers, t, free, driven, points


@pytest.fixture()
def write_trial(tmp_path):
    """Write a kinematic trial as C3D in tmp_path; returns (path, t, free, driven, points)."""

    def write(name: str = "trial.c3d", edit=None, **options):
        markers, t, free, driven, points = kinematic_trial(**options)
        if edit is not None:
            markers = edit(markers)
        path = tmp_path / name
        write_c3d(path, markers, "synthetic test trial")
        return path, t, free, driven, points

    return write
