"""Read and validate a setpoint file (``setpoints.csv``, format in ``docs/formats.md``).

The file is the contract between the gesture (``bemore synthesize``) and the bench. Anything
that does not follow the format is refused with one :class:`~bemore.errors.DataError` line
naming the file, the line and what is wrong; nothing is repaired silently.

Example (a 2.4 s rest-to-rest gesture of 1 rad, 1 kHz, written then read back)::

    >>> import math, pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "setpoints.csv"
    >>> t = [k / 1000 for k in range(2401)]
    >>> angle = [math.sin(math.pi * s / 2.4) ** 2 for s in t]
    >>> velocity = [math.pi / 2.4 * math.sin(2 * math.pi * s / 2.4) for s in t]
    >>> path = write_setpoints(path, Gesture("memory", 1000.0, t, angle, velocity, [10.0] * 2401))
    >>> gesture = read_setpoints(path)
    >>> gesture.duration_s, gesture.rate_hz, round(gesture.summary()["peak_angle_deg"], 2)
    (2.4, 1000.0, 57.3)
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from controller.errors import DataError
from controller.outputs import write_file
from controller.series import floats

FORMAT_TAG = "bemore-setpoints 1"
COLUMNS = ("t_s", "shoulder_angle_rad", "shoulder_velocity_rad_s", "shoulder_torque_nm")
# Optional last column: the static (gravity) part of the torque, for slow motion (controller.modes)
STATIC_COLUMN = "shoulder_static_torque_nm"
# The header's required keys, in the order the writer puts them: what the gesture is, then (after
# any optional key) its completeness, which the reader checks (_check_complete)
DESCRIPTION_METADATA = ("format", "rate_hz", "peak_angle_deg", "peak_velocity_deg_s",
                        "peak_torque_nm", "athlete", "gesture")
COMPLETENESS_METADATA = ("rows", "duration_s", "sha256")
REQUIRED_METADATA = (*DESCRIPTION_METADATA, *COMPLETENESS_METADATA)
# The declared peaks are rounded in the header; the data may exceed them by this much.
PEAK_TOLERANCE = 0.01
# Sample times may deviate from k / rate_hz by this fraction of a period (text rounding).
TIME_TOLERANCE = 0.01


def body_digest(body: str) -> str:
    """SHA-256 (hex) of a setpoint file's body: the UTF-8 bytes from the CSV header line to the
    end of the file, final newline included."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass
class Gesture:
    """A validated gesture: sample times (s), shoulder angle (rad), velocity (rad/s), torque (N·m).

    ``torque_nm`` is the torque at ONE shoulder; ``metadata`` holds every ``key: value`` line of
    the header as text; ``static_torque_nm`` the static (gravity) part of ``torque_nm`` (N·m,
    per shoulder) when the file has that column, else None. The columns are stored as
    ``array('d')`` whatever sequences they are given as (lists, numpy arrays).
    """

    path: str
    rate_hz: float
    t_s: array
    angle_rad: array
    velocity_rad_s: array
    torque_nm: array
    metadata: dict[str, str] = field(default_factory=dict)
    static_torque_nm: array | None = None

    def __post_init__(self) -> None:
        self.t_s, self.angle_rad = floats(self.t_s), floats(self.angle_rad)
        self.velocity_rad_s, self.torque_nm = floats(self.velocity_rad_s), floats(self.torque_nm)
        if self.static_torque_nm is not None:
            self.static_torque_nm = floats(self.static_torque_nm)

    @property
    def duration_s(self) -> float:
        """Time of the last sample (s)."""
        return float(self.t_s[-1])

    def summary(self) -> dict:
        """JSON-ready description (peaks in degrees, labelled)."""
        return {
            "path": self.path,
            "rate_hz": self.rate_hz,
            "samples": len(self.t_s),
            "duration_s": self.duration_s,
            "peak_angle_deg": math.degrees(_peak(self.angle_rad)),
            "peak_velocity_deg_s": math.degrees(_peak(self.velocity_rad_s)),
            "peak_torque_nm": _peak(self.torque_nm),
            "athlete": self.metadata.get("athlete", ""),
            "gesture": self.metadata.get("gesture", ""),
        }


def _peak(values: Sequence[float]) -> float:
    """Largest magnitude of ``values`` (their units)."""
    return float(max(max(values), -min(values)))


def read_setpoints(path: str | Path, text: str | None = None) -> Gesture:
    """Read and validate a setpoint file; any problem raises one DataError line. ``text``: the
    file's content, not yet written at ``path`` (``bemore synthesize``'s, checked before it is)."""
    path = Path(path)
    try:
        if text is None:
            text = path.read_text(encoding="utf-8-sig")  # past a byte order mark (a re-saved file)
    except FileNotFoundError:
        raise DataError(f"{path}: setpoint file not found") from None
    except (OSError, UnicodeDecodeError) as error:  # a folder, a C3D trial…
        from controller.filekinds import SETPOINTS, misplaced

        raise DataError(misplaced(path, SETPOINTS)
                        or f"{path}: cannot read the setpoint file ({error})") from None
    lines = text.splitlines()
    try:
        metadata, header_index = _parse_metadata(path, lines)
    except DataError:
        _refuse_another_kind(path, text)
        raise
    rate_hz = _float_metadata(path, metadata, "rate_hz")
    if not rate_hz > 0:
        raise DataError(f"{path}: metadata rate_hz = {metadata['rate_hz']}: must be positive")
    if not text.endswith("\n"):
        # a file cut mid-row can still parse ("12.3" cut to "12"): only a complete file ends
        # with a newline
        raise DataError(f"{path}: line {len(lines)}: partial last row (no final newline): "
                        "the file was cut short")
    table = _parse_rows(path, lines, header_index)
    static = table[4] if len(table) > len(COLUMNS) else None
    gesture = Gesture(str(path), rate_hz, *table[: len(COLUMNS)], metadata=metadata,
                      static_torque_nm=static)
    _check_times(gesture)
    _check_complete(gesture, text, header_index)
    _check_peaks(gesture)
    return gesture


def _check_complete(gesture: Gesture, text: str, header_index: int) -> None:
    """The rows are all there: as many as the header's ``rows``, the last at its
    ``duration_s`` (and, when synthesis wrote it, at the gesture's ``final_time_s`` within one
    period), and the body hashes to its ``sha256``."""
    path, metadata = gesture.path, gesture.metadata
    try:
        rows = int(metadata["rows"])
    except ValueError:
        raise DataError(f"{path}: metadata rows = {metadata['rows']!r}: not an integer") from None
    if rows != len(gesture.t_s):
        raise DataError(f"{path}: {len(gesture.t_s)} rows of setpoints, the header declares "
                        f"{rows}: the file is incomplete or was edited")
    period = 1.0 / gesture.rate_hz
    declared = _float_metadata(Path(path), metadata, "duration_s")
    if abs(gesture.duration_s - declared) > TIME_TOLERANCE * period:
        raise DataError(f"{path}: last row at t_s = {gesture.duration_s:g}, the header declares "
                        f"duration_s = {declared:g}")
    if "final_time_s" in metadata:
        final = _float_metadata(Path(path), metadata, "final_time_s")
        if abs(gesture.duration_s - final) > period * (1 + TIME_TOLERANCE):
            raise DataError(f"{path}: last row at t_s = {gesture.duration_s:g}, the gesture "
                            f"ends at final_time_s = {final:g}")
    body = text.split("\n", header_index)[header_index]
    if body_digest(body) != metadata["sha256"]:
        raise DataError(f"{path}: the rows do not match the header's sha256: the file was "
                        "changed or damaged after it was written")


def _refuse_another_kind(path: Path, text: str) -> None:
    """A DataError naming what the file is when ``text`` is another of bemore's outputs (an
    athlete.json, a session log…) instead of a setpoint file; nothing otherwise."""
    from controller.filekinds import SETPOINTS, other_than, refusal

    kind = other_than(text, SETPOINTS)
    if kind is not None:
        raise DataError(refusal(path, kind, SETPOINTS.wanted()))


def _parse_metadata(path: Path, lines: list[str]) -> tuple[dict[str, str], int]:
    """``key: value`` lines before the header, and the index of the header line."""
    metadata: dict[str, str] = {}
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        if not line.startswith("#"):
            break
        text = line[1:].strip()
        if ":" not in text:
            raise DataError(f"{path}: line {index + 1}: metadata must be '# key: value'")
        key, value = (part.strip() for part in text.split(":", 1))
        metadata[key] = value
    else:
        raise DataError(f"{path}: no CSV header and no rows")
    missing = [key for key in REQUIRED_METADATA if key not in metadata]
    if missing:
        raise DataError(f"{path}: missing metadata {', '.join(missing)}")
    if metadata["format"] != FORMAT_TAG:
        raise DataError(
            f"{path}: metadata format = {metadata['format']!r}: expected {FORMAT_TAG!r}"
        )
    return metadata, index


def _float_metadata(path: Path, metadata: dict[str, str], key: str) -> float:
    try:
        return float(metadata[key])
    except ValueError:
        raise DataError(f"{path}: metadata {key} = {metadata[key]!r}: not a number") from None


def _parse_rows(path: Path, lines: list[str], header_index: int) -> list[array]:
    """The numeric columns (4 in the order of :data:`COLUMNS`, 5 with the optional
    :data:`STATIC_COLUMN`), each an ``array('d')`` of the rows."""
    header = [name.strip() for name in lines[header_index].split(",")]
    if tuple(header) not in (COLUMNS, (*COLUMNS, STATIC_COLUMN)):
        raise DataError(
            f"{path}: line {header_index + 1}: header {','.join(header)!r}: "
            f"expected {','.join(COLUMNS)!r} (optionally then {STATIC_COLUMN!r})"
        )
    rows = []
    for index in range(header_index + 1, len(lines)):
        line = lines[index]
        if not line.strip():
            continue
        cells = line.split(",")
        if len(cells) != len(header):
            raise DataError(
                f"{path}: line {index + 1}: {len(cells)} values, expected {len(header)}"
            )
        try:
            values = [float(cell) for cell in cells]
        except ValueError:
            raise DataError(f"{path}: line {index + 1}: not a number in {line!r}") from None
        if not all(math.isfinite(value) for value in values):
            raise DataError(f"{path}: line {index + 1}: NaN or infinite value in {line!r}")
        rows.append(values)
    if len(rows) < 2:
        raise DataError(f"{path}: needs at least 2 rows of setpoints, found {len(rows)}")
    return [array("d", column) for column in zip(*rows, strict=True)]


def _check_times(gesture: Gesture) -> None:
    """Times must start at 0 and advance by exactly one period (within text rounding)."""
    period = 1.0 / gesture.rate_hz
    tolerance = TIME_TOLERANCE * period
    for row, t in enumerate(gesture.t_s):
        expected = row * period
        if abs(t - expected) > tolerance:
            raise DataError(
                f"{gesture.path}: row {row + 1} (t_s = {t:g}): times must be "
                f"k / rate_hz = {expected:g} s (from 0 at steps of {period:g} s)"
            )


def _check_peaks(gesture: Gesture) -> None:
    """The data must not exceed the peaks its header declares (beyond header rounding)."""
    checks = (
        ("peak_angle_deg", gesture.angle_rad, math.degrees),
        ("peak_velocity_deg_s", gesture.velocity_rad_s, math.degrees),
        ("peak_torque_nm", gesture.torque_nm, float),
    )
    for key, column, display in checks:
        declared = _float_metadata(Path(gesture.path), gesture.metadata, key)
        magnitudes = [abs(value) for value in column]
        row = max(range(len(magnitudes)), key=magnitudes.__getitem__)  # the first largest
        value = display(magnitudes[row])
        if value > declared * (1 + PEAK_TOLERANCE) + 1e-9:
            raise DataError(
                f"{gesture.path}: row {row + 1} (t_s = {gesture.t_s[row]:g}): "
                f"{value:.4g} exceeds the declared {key} = {declared:g}"
            )


def format_setpoints(gesture: Gesture) -> str:
    """The text of the setpoint file of ``gesture``: the one writer of the format, for
    ``bemore synthesize`` (``bemore.synthesis.outputs``) and the bench side's tests and tools.

    The header: :data:`DESCRIPTION_METADATA` (the peaks in deg, deg/s and N·m per shoulder,
    computed from the columns; ``athlete`` and ``gesture`` from ``gesture.metadata``, else
    ``default`` and ``unnamed``), then the other keys of ``gesture.metadata`` in their order,
    then :data:`COMPLETENESS_METADATA`. The body: the CSV header (:data:`COLUMNS`, and
    :data:`STATIC_COLUMN` when the gesture has its static torque) and one row per sample, the
    time (s) with 6 decimals, angle (rad), velocity (rad/s) and torques (N·m) with 10
    significant digits.
    """
    summary = gesture.summary()
    computed = {"format": FORMAT_TAG, "rate_hz": f"{gesture.rate_hz:g}",
                **{key: _declared_peak(summary[key])
                   for key in ("peak_angle_deg", "peak_velocity_deg_s", "peak_torque_nm")}}
    metadata = {**computed, "athlete": "default", "gesture": "unnamed"}
    metadata.update((key, value) for key, value in gesture.metadata.items()
                    if key not in computed and key not in COMPLETENESS_METADATA)
    columns = [gesture.t_s, gesture.angle_rad, gesture.velocity_rad_s, gesture.torque_nm]
    names = list(COLUMNS)
    if gesture.static_torque_nm is not None:
        columns.append(gesture.static_torque_nm)
        names.append(STATIC_COLUMN)
    rows = [f"{row[0]:.6f}," + ",".join(f"{value:.10g}" for value in row[1:])
            for row in zip(*columns, strict=True)]
    body = "\n".join([",".join(names), *rows]) + "\n"
    metadata.update({"rows": str(len(rows)), "duration_s": f"{gesture.t_s[-1]:.6f}",
                     "sha256": body_digest(body)})
    return "".join(f"# {key}: {value}\n" for key, value in metadata.items()) + body


def _declared_peak(value: float) -> str:
    """A peak (deg, deg/s or N·m) as the header declares it: 4 decimals, or 6 significant
    digits for a peak so small that 4 decimals would understate it beyond the reader's
    :data:`PEAK_TOLERANCE` (the writer never writes a file its reader refuses)."""
    text = f"{value:.4f}"
    return text if value <= float(text) * (1 + PEAK_TOLERANCE) else f"{value:.6g}"


def write_setpoints(path: str | Path, gesture: Gesture) -> Path:
    """Write ``gesture`` as a setpoint file at ``path`` (:func:`format_setpoints`); returns the
    path written."""
    return write_file(Path(path), format_setpoints(gesture))
