"""C3D reading and writing through ezc3d, guarded so a damaged file gives one clear line.

ezc3d is the community's reference reader, but on truncated or corrupted bytes it may raise a
C++ exception, hang or crash: :func:`~bemore.trial.c3d_guard.check_c3d_bytes` checks the header,
the parameter records and the size of the data section before ezc3d sees the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bemore.errors import DataError
from bemore.trial.c3d_guard import check_c3d_bytes
from bemore.trial.markers import Markers, metres_per_unit


class C3DFile(NamedTuple):
    """A C3D file read once by ezc3d after the structural guard: its ``layout`` (the guard's
    frame count and where it came from), ezc3d's ``acquisition`` dict and its ``path``. The
    markers (:func:`read_c3d`) and the analog channels (``bemore.trial.forces.read_analogs``)
    are both taken from it."""

    layout: object  # bemore.trial.c3d_guard.C3DLayout
    acquisition: dict
    path: Path


def load_c3d(path: str | Path) -> C3DFile:
    """Guard then read ``path`` with ezc3d; a damaged or unreadable file raises one DataError
    line."""
    path = Path(path)
    layout = check_c3d_bytes(path)
    try:
        import ezc3d

        acquisition = ezc3d.c3d(str(path), extract_forceplat_data=False)
    except Exception as error:  # ezc3d raises plain RuntimeError/IndexError on bad files
        raise DataError(f"{path}: unreadable C3D file ({reason_of(error)})") from None
    return C3DFile(layout, acquisition, path)


def reason_of(error: Exception) -> str:
    """The first line of ``error``'s message, or its type's name."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def read_c3d(path: str | Path | C3DFile) -> Markers:
    """Read the 3D points of a C3D file (a path, or a :class:`C3DFile` already read); positions
    in m, missing samples (residual < 0) NaN.

    The frame count is the guard's (parameters before header, see
    :mod:`bemore.trial.c3d_guard`): ezc3d reads a trial of 65 535 frames or more up to the end
    of the file, block padding included, so its extra frames are dropped here. Labels past the
    255th (POINT:LABELS2, LABELS3, …) follow POINT:LABELS; POINT:UNITS may hold one unit for
    all markers or one per marker (as Optotrak writes it), which must then all be the same.
    """
    layout, acquisition, path = path if isinstance(path, C3DFile) else load_c3d(path)
    try:
        parameters = acquisition["parameters"]["POINT"]
        labels = tuple(str(label).strip() for label in _all_labels(parameters))
        rate_hz = float(np.asarray(parameters["RATE"]["value"]).ravel()[0])
        units = parameters["UNITS"]["value"] if "UNITS" in parameters else ["mm"]
        points = np.asarray(acquisition["data"]["points"], dtype=float)
        residuals = np.asarray(acquisition["data"]["meta_points"]["residuals"], dtype=float)
    except DataError:
        raise
    except Exception as error:  # a parameter ezc3d did not fill
        raise DataError(f"{path}: unreadable C3D file ({reason_of(error)})") from None
    distinct = sorted({str(unit).strip() for unit in units} - {""})
    if len(distinct) > 1:
        raise DataError(f"{path}: POINT:UNITS differ between markers ({', '.join(distinct)})")
    unit = distinct[0] if distinct else "mm"
    scale = metres_per_unit(unit, f"{path}: POINT:UNITS")
    if points.ndim != 3 or points.shape[1] != len(labels):
        raise DataError(
            f"{path}: C3D declares {len(labels)} point labels but holds "
            f"{points.shape[1] if points.ndim == 3 else 0} points"
        )
    if points.shape[2] < layout.n_frames:
        raise DataError(
            f"{path}: {layout.frames_from} declares {layout.n_frames} frames, the C3D reader "
            f"found {points.shape[2]}"
        )
    if not 1.0 <= rate_hz <= 100_000.0:
        raise DataError(f"{path}: C3D POINT:RATE is {rate_hz:g} Hz (expected 1 to 100000 Hz)")
    points, residuals = points[:, :, : layout.n_frames], residuals[:, :, : layout.n_frames]
    positions = np.transpose(points[:3], (2, 1, 0)) * scale  # (F, M, 3)
    positions[np.transpose(residuals[0]) < 0] = np.nan
    n_frames = positions.shape[0]
    t = np.arange(n_frames) / rate_hz
    notes = ()
    if layout.frames_from != "header" and layout.header_frames != layout.n_frames:
        notes = (f"header declares {layout.header_frames} frames, {layout.frames_from} "
                 f"{layout.n_frames} (the parameters are used)",)
    return Markers(t, positions, labels, rate_hz, str(path), unit, notes)


def _all_labels(parameters: dict) -> list[str]:
    """POINT:LABELS followed by LABELS2, LABELS3, … (files with more than 255 points)."""
    labels = list(parameters["LABELS"]["value"])
    index = 2
    while f"LABELS{index}" in parameters:
        labels += list(parameters[f"LABELS{index}"]["value"])
        index += 1
    return labels


def write_c3d(path: str | Path, markers: Markers, description: str = "",
              analogs: dict | None = None) -> None:
    """Write ``markers`` as a C3D file in mm (NaN samples become missing, residual −1).

    ``description`` is stored in the MANUFACTURER:SOFTWARE parameter (e.g. "synthetic").
    ``analogs`` (optional): ``{"labels": [...], "units": [...], "samples": (C, F·n) array,
    "per_frame": n}``, analog channels at n times the marker rate (SCALE 1, OFFSET 0).
    """
    import ezc3d

    acquisition = ezc3d.c3d()
    acquisition["parameters"]["POINT"]["RATE"]["value"] = [float(markers.rate_hz)]
    acquisition["parameters"]["POINT"]["LABELS"]["value"] = list(markers.labels)
    acquisition["parameters"]["POINT"]["UNITS"]["value"] = ["mm"]
    acquisition.add_parameter("MANUFACTURER", "SOFTWARE", [description or "bemore"])
    points = np.ones((4, len(markers.labels), markers.n_frames))
    points[:3] = np.transpose(markers.positions, (2, 1, 0)) * 1000.0
    missing = np.isnan(points[:3]).any(axis=0)
    points[:3][:, missing] = 0.0
    acquisition["data"]["points"] = points
    residuals = np.zeros((1, len(markers.labels), markers.n_frames))
    residuals[0][missing] = -1.0
    acquisition["data"]["meta_points"]["residuals"] = residuals
    acquisition["data"]["meta_points"]["camera_masks"] = np.zeros(
        (7, len(markers.labels), markers.n_frames), dtype=bool
    )
    if analogs is not None:
        samples = np.asarray(analogs["samples"], dtype=float)
        per_frame = int(analogs["per_frame"])
        if samples.shape != (len(analogs["labels"]), markers.n_frames * per_frame):
            raise DataError(f"{path}: analog samples of shape {samples.shape}, expected "
                            f"({len(analogs['labels'])}, {markers.n_frames * per_frame})")
        analog = acquisition["parameters"]["ANALOG"]
        analog["RATE"]["value"] = [float(markers.rate_hz) * per_frame]
        analog["LABELS"]["value"] = list(analogs["labels"])
        analog["UNITS"]["value"] = list(analogs["units"])
        analog["SCALE"]["value"] = [1.0] * samples.shape[0]
        analog["OFFSET"]["value"] = [0] * samples.shape[0]
        acquisition["data"]["analogs"] = samples[None]
    path = Path(path)
    if path.name.endswith(".c3d"):
        acquisition.write(str(path))
        return
    # ezc3d appends ".c3d" to a name that does not end in it (".C3D" too): written under a
    # name it keeps, then renamed to the path asked for
    temporary = path.with_name(f".{path.name}.{os.getpid()}.c3d")
    try:
        acquisition.write(str(temporary))
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
