"""The study plane: bar axis from the bar markers, vertical kept in the plane.

Model plane (docs/model.md): x horizontal, y vertical up, z = x × y along the bar; the chest
faces +x at the start. Projection: ``p_plane = R @ (p_lab − origin)`` keeping the x, y rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bemore.errors import DataError

_AXES = {"X": 0, "Y": 1, "Z": 2}


@dataclass(frozen=True)
class Plane:
    """Orthonormal model frame in the laboratory.

    Attributes:
        origin: (3,) lab position of the model origin (the bar's rest position), m.
        e_x, e_y, e_z: (3,) unit vectors of the model axes in lab coordinates (e_z along the bar).
    """

    origin: np.ndarray
    e_x: np.ndarray
    e_y: np.ndarray
    e_z: np.ndarray

    def project(self, points: np.ndarray) -> np.ndarray:
        """(..., 3) lab points (m) → (..., 2) model-plane coordinates (m)."""
        relative = points - self.origin
        return np.stack([relative @ self.e_x, relative @ self.e_y], axis=-1)

    def to_lab(self, plane_points: np.ndarray, z: np.ndarray | float = 0.0) -> np.ndarray:
        """(..., 2) plane points (m), with out-of-plane ``z`` (m) → (..., 3) lab points (m)."""
        z = np.asarray(z)
        return (self.origin + plane_points[..., :1] * self.e_x + plane_points[..., 1:2] * self.e_y
                + z[..., None] * self.e_z)


def bar_axis(bar_markers: np.ndarray) -> np.ndarray:
    """Unit direction (3,) of the bar from (F, B, 3) bar-marker positions (m), sign arbitrary.

    The markers are centred frame by frame (the bar moves) and the principal direction of all
    centred samples is the axis.
    """
    centred = bar_markers - np.nanmean(bar_markers, axis=1, keepdims=True)
    samples = centred.reshape(-1, 3)
    samples = samples[np.isfinite(samples).all(axis=1)]
    if samples.shape[0] < 2:
        raise DataError("bar markers: too few valid samples to find the bar axis")
    _, singular, vectors = np.linalg.svd(samples, full_matrices=False)
    if singular[0] < 1e-6 * np.sqrt(samples.shape[0]):
        raise DataError("bar markers: all at one point, the bar axis is undefined")
    return vectors[0] / np.linalg.norm(vectors[0])


def study_plane(
    axis: np.ndarray,
    vertical_axis: str,
    back: np.ndarray,
    front: np.ndarray,
    bar_start: np.ndarray,
    initial_bar_displacement_m: tuple[float, float] = (0.0, 0.0),
) -> Plane:
    """The model frame from the bar ``axis`` (3,), the lab's vertical axis name ("X"/"Y"/"Z"),
    the back and front trunk markers at the first frame (3,) m, and the bar centre at the first
    frame (3,) m, which sits at ``initial_bar_displacement_m`` (x, y) from the origin.
    """
    vertical = np.zeros(3)
    vertical[_AXES[vertical_axis]] = 1.0
    e_y = vertical - (vertical @ axis) * axis
    if np.linalg.norm(e_y) < 0.5:
        raise DataError(
            f"bar markers: the bar axis is within 30° of the vertical ({vertical_axis}); "
            "is the bar horizontal and the vertical_axis right?"
        )
    e_y /= np.linalg.norm(e_y)
    e_z = axis / np.linalg.norm(axis)
    e_x = np.cross(e_y, e_z)
    # The chest faces +x at the first frame; otherwise look at the plane from the other side.
    if (front - back) @ e_x < 0:
        e_z, e_x = -e_z, -e_x
    dx, dy = initial_bar_displacement_m
    origin = bar_start - dx * e_x - dy * e_y
    return Plane(origin, e_x, e_y, e_z)
