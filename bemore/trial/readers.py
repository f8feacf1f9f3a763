"""Motion-capture readers: C3D (ezc3d), TRC (OpenSim layout) and CSV → one :class:`Markers`.

Every reader converts lengths to metres at the boundary (refusing unknown units), keeps labels as
written (a subject prefix such as ``Gymnast:C7`` is kept; look-ups accept either form), marks
missing samples NaN, and turns anything it cannot use into one DataError line naming the file.

CSV layout (bemore's own, for labs without C3D/TRC export)::

    # units: mm
    time_s,C7_X,C7_Y,C7_Z,STERNUM_X,STERNUM_Y,STERNUM_Z
    0.00,12.1,-3.0,1501.2,...

Comment lines ``# key: value`` come first (``units`` is required: mm, cm or m); the first column
is the time in s; then three columns ``<label>_X``, ``_Y``, ``_Z`` per marker; empty cells are
missing samples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bemore.errors import DataError
from bemore.filekinds import MOTION_CAPTURE, misplaced
from bemore.trial.c3d import read_c3d
from bemore.trial.markers import Markers, metres_per_unit

_RATE_TOLERANCE = 0.01  # relative disagreement allowed between a declared rate and the time column


def read_markers(path: str | Path) -> Markers:
    """Read a C3D, TRC or CSV motion-capture file (chosen by extension); positions in m."""
    path = Path(path)
    if not path.is_file():
        raise DataError(misplaced(path, MOTION_CAPTURE) or f"{path}: file not found")
    if path.stat().st_size == 0:
        raise DataError(f"{path}: empty file")
    suffix = path.suffix.lower()
    if suffix == ".c3d":
        return read_c3d(path)
    if suffix == ".trc":
        return read_trc(path)
    try:
        if suffix == ".csv":
            return read_csv(path)
    except DataError:  # perhaps another command's CSV output (a setpoints.csv, say)
        line = misplaced(path, MOTION_CAPTURE)
        if line is not None:
            raise DataError(line) from None
        raise
    raise DataError(misplaced(path, MOTION_CAPTURE) or
                    f"{path}: unknown motion-capture format {suffix!r} (known: .c3d, .trc, .csv)")


def _read_lines(path: Path) -> list[str]:
    """The text lines of ``path``; a binary or non-UTF-8 file raises DataError."""
    try:
        return path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text file (not UTF-8)") from None


def _parse_rows(path: Path, rows: list[str], delimiter: str, n_columns: int, first_line: int):
    """Numeric table (R, n_columns) from text rows; empty cells → NaN, short rows padded NaN."""
    table = np.full((len(rows), n_columns), np.nan)
    for r, row in enumerate(rows):
        cells = row.split(delimiter)
        if len(cells) > n_columns and any(cell.strip() for cell in cells[n_columns:]):
            raise DataError(
                f"{path}: line {first_line + r}: {len(cells)} columns, header has {n_columns}"
            )
        for c, cell in enumerate(cells[:n_columns]):
            cell = cell.strip()
            if not cell:
                continue
            try:
                table[r, c] = float(cell)
            except ValueError:
                raise DataError(
                    f"{path}: line {first_line + r}, column {c + 1}: {cell!r} is not a number"
                ) from None
    return table


def check_time_column(path: Path | str, t: np.ndarray, declared_rate_hz: float | None) -> float:
    """Check a time column (s) is finite and strictly increasing; return its rate (Hz).

    If ``declared_rate_hz`` is given, the median step must agree with it within 1 %.
    """
    if t.size < 2:
        raise DataError(f"{path}: fewer than 2 frames")
    if not np.all(np.isfinite(t)):
        row = int(np.flatnonzero(~np.isfinite(t))[0])
        raise DataError(f"{path}: time column is missing at frame {row + 1}")
    steps = np.diff(t)
    if np.any(steps <= 0):
        k = int(np.flatnonzero(steps <= 0)[0])
        raise DataError(
            f"{path}: time column not increasing at frame {k + 2} "
            f"({t[k]:.6g} s then {t[k + 1]:.6g} s)"
        )
    step = float(np.median(steps))
    if np.max(np.abs(steps - step)) > 0.1 * step:
        k = int(np.argmax(np.abs(steps - step)))
        raise DataError(
            f"{path}: time column not uniform: step {steps[k]:.6g} s at {t[k]:.6g} s, "
            f"median {step:.6g} s"
        )
    rate_hz = 1.0 / step
    if declared_rate_hz is not None and abs(rate_hz - declared_rate_hz) > (
        _RATE_TOLERANCE * declared_rate_hz
    ):
        raise DataError(
            f"{path}: declared rate {declared_rate_hz:g} Hz disagrees with the time column "
            f"(steps of {step:.6g} s, i.e. {rate_hz:.6g} Hz)"
        )
    return declared_rate_hz if declared_rate_hz is not None else rate_hz


def read_trc(path: str | Path) -> Markers:
    """Read an OpenSim TRC file (tab- or comma-separated); positions in m."""
    path = Path(path)
    lines = _read_lines(path)
    if len(lines) < 5 or not lines[0].startswith("PathFileType"):
        raise DataError(f"{path}: not a TRC file (first line must start with PathFileType)")
    delimiter = "\t" if "\t" in lines[1] else ","
    keys = [cell.strip() for cell in lines[1].split(delimiter)]
    values = [cell.strip() for cell in lines[2].split(delimiter)]
    header = dict(zip(keys, values, strict=False))  # trailing cells may be absent
    for key in ("DataRate", "NumFrames", "NumMarkers", "Units"):
        if not header.get(key):
            raise DataError(f"{path}: TRC header line 3 has no {key} value")
    try:
        rate_hz = float(header["DataRate"])
        n_frames_declared = int(float(header["NumFrames"]))
        n_markers = int(float(header["NumMarkers"]))
    except ValueError:
        raise DataError(f"{path}: TRC header line 3 holds a non-numeric rate or count") from None
    scale = metres_per_unit(header["Units"], f"{path}: TRC Units")
    names = [cell.strip() for cell in lines[3].split(delimiter)]
    if len(names) < 2 or names[0].lower() != "frame#" or names[1].lower() != "time":
        raise DataError(f"{path}: TRC line 4 must start with Frame# and Time")
    labels = tuple(name for name in names[2:] if name)
    if len(labels) != n_markers:
        raise DataError(
            f"{path}: TRC header declares NumMarkers {n_markers} but line 4 names {len(labels)}"
        )
    first = 5
    while first < len(lines) and not lines[first].strip(delimiter + " "):
        first += 1
    rows = [line for line in lines[first:] if line.strip(delimiter + " ")]
    if not rows:
        raise DataError(f"{path}: TRC file holds no data rows")
    table = _parse_rows(path, rows, delimiter, 2 + 3 * n_markers, first + 1)
    t = table[:, 1]
    check_time_column(path, t, rate_hz)
    positions = table[:, 2:].reshape(len(rows), n_markers, 3) * scale
    notes = ()
    if n_frames_declared != len(rows):
        notes = (f"header declares {n_frames_declared} frames, file holds {len(rows)}",)
    return Markers(t - t[0], positions, labels, rate_hz, str(path), header["Units"], notes)


def read_csv(path: str | Path) -> Markers:
    """Read bemore's marker CSV (see the module docstring); positions in m."""
    path = Path(path)
    lines = _read_lines(path)
    meta = {}
    k = 0
    while k < len(lines) and lines[k].startswith("#"):
        key, _, value = lines[k][1:].partition(":")
        meta[key.strip().lower()] = value.strip()
        k += 1
    if "units" not in meta:
        raise DataError(f"{path}: no '# units: mm|cm|m' line before the CSV header")
    scale = metres_per_unit(meta["units"], f"{path}: # units")
    if k >= len(lines):
        raise DataError(f"{path}: no CSV header line")
    columns = [cell.strip() for cell in lines[k].split(",")]
    if (len(columns) - 1) % 3 or len(columns) < 4:
        raise DataError(f"{path}: header must be a time column then X, Y, Z columns per marker")
    labels = []
    for j in range(1, len(columns), 3):
        stems = {name[:-2] for name in columns[j : j + 3]}
        axes = [name[-2:].upper() for name in columns[j : j + 3]]
        if len(stems) != 1 or axes != ["_X", "_Y", "_Z"]:
            raise DataError(f"{path}: columns {columns[j : j + 3]} are not <label>_X, _Y, _Z")
        labels.append(stems.pop())
    rows = [line for line in lines[k + 1 :] if line.strip(", ")]
    if not rows:
        raise DataError(f"{path}: CSV file holds no data rows")
    table = _parse_rows(path, rows, ",", len(columns), k + 2)
    t = table[:, 0]
    declared = float(meta["rate_hz"]) if "rate_hz" in meta else None
    rate_hz = check_time_column(path, t, declared)
    positions = table[:, 1:].reshape(len(rows), len(labels), 3) * scale
    return Markers(t - t[0], positions, tuple(labels), rate_hz, str(path), meta["units"])
