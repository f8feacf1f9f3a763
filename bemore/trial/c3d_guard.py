"""Structural check of C3D bytes before ezc3d reads them, and the file's frame count.

ezc3d trusts the file: on a truncated or byte-corrupted file it may raise, hang on a huge
allocation, or crash the interpreter. :func:`check_c3d_bytes` walks the header and every
parameter record (C3D.org user guide, "The parameter section") and checks that the data section
the parameters declare lies inside the file; any inconsistency becomes one
:class:`~bemore.errors.DataError` line naming the file and what is wrong.

The number of frames follows the format's precedence, as ezc3d applies it: the parameters win
over the header. POINT:FRAMES (an unsigned 16-bit count) is the count; when it is saturated at
65 535, a longer trial states its first and last frames in TRIAL:ACTUAL_START_FIELD and
TRIAL:ACTUAL_END_FIELD (two 16-bit words each, low word first) or its count in POINT:LONG_FRAMES;
only a file without POINT:FRAMES falls back to the header's first/last-frame words. Those words
are not trusted otherwise: real files get them wrong (an Optotrak export declares 1 149 frames
there and holds 30) and they cannot count past 65 535.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from bemore.errors import DataError

_BLOCK = 512  # bytes per C3D block
_C3D_KEY = 0x50  # second byte of every C3D header (and of the parameter section)
_ENDIAN = {84: "<", 85: "<", 86: ">"}  # processor type: Intel, DEC (little-endian words), MIPS
_PROCESSOR_NAMES = {84: "Intel", 85: "DEC", 86: "MIPS"}
_SATURATED = 0xFFFF  # POINT:FRAMES of a trial of 65 535 frames or more
_TYPES = {-1: 1, 1: 1, 2: 2, 4: 4}  # parameter data type → bytes per element
_PRINTABLE = set(range(32, 127))
_CONTROL = set(range(1, 32)) - {9, 10, 13}  # never in a label, unit or description


def _float32(raw: bytes, processor: int) -> float:
    """A 4-byte C3D float; a DEC F-float is an IEEE float with swapped words, times 4."""
    if processor == 85:
        return struct.unpack("<f", raw[2:4] + raw[0:2])[0] / 4.0
    return struct.unpack(_ENDIAN[processor] + "f", raw)[0]


def _walk_parameters(
    path: Path, section: bytes, processor: int
) -> dict[str, tuple[int, list[int], bytes]]:
    """Check every parameter record; return ``{"GROUP:NAME": (type, dims, data bytes)}``.

    Raises DataError on a record that leaves the section, a non-ASCII name, an unknown data type
    or a parameter whose data does not fit before the next record.
    """
    endian = _ENDIAN[processor]
    groups: dict[int, str] = {}
    records: list[tuple[int, str, int, list[int], bytes]] = []
    position = 4
    while position + 2 <= len(section):
        name_length, group_id = struct.unpack("bb", section[position : position + 2])
        if name_length == 0:
            break
        name_length = abs(name_length)
        name_end = position + 2 + name_length
        if name_end + 2 > len(section):
            raise DataError(f"{path}: corrupted C3D parameter section (record at byte {position})")
        name = section[position + 2 : name_end]
        if not set(name) <= _PRINTABLE:
            raise DataError(f"{path}: corrupted C3D parameter section (name at byte {position})")
        (offset,) = struct.unpack(endian + "h", section[name_end : name_end + 2])
        next_position = name_end + offset if offset else len(section)
        if offset < 0 or next_position > len(section):
            raise DataError(f"{path}: corrupted C3D parameter section (record {name.decode()})")
        if group_id < 0:
            body = section[name_end + 2 : next_position]
            if offset and (not body or 1 + body[0] > len(body)):
                raise DataError(f"{path}: corrupted C3D group {name.decode()} (description)")
            if -group_id in groups:
                raise DataError(f"{path}: corrupted C3D parameters (group {-group_id} twice)")
            groups[-group_id] = name.decode().upper()
        else:
            body = section[name_end + 2 : next_position]
            if len(body) < 2:
                raise DataError(f"{path}: corrupted C3D parameter {name.decode()}")
            data_type, n_dims = struct.unpack("bB", body[:2])
            if data_type not in _TYPES or len(body) < 2 + n_dims:
                raise DataError(f"{path}: corrupted C3D parameter {name.decode()} (type/dims)")
            dims = list(body[2 : 2 + n_dims])
            count = 1
            for dim in dims:
                count *= dim
            data_end = 2 + n_dims + count * _TYPES[data_type]
            if offset and (data_end >= len(body) or data_end + 1 + body[data_end] > len(body)):
                raise DataError(f"{path}: corrupted C3D parameter {name.decode()} (data size)")
            raw = body[2 + n_dims : 2 + n_dims + count * _TYPES[data_type]]
            if data_type == -1 and set(raw) & _CONTROL:
                raise DataError(f"{path}: corrupted C3D parameter {name.decode()} (bad text)")
            records.append((group_id, name.decode().upper(), data_type, dims, raw))
        if not offset:
            break
        position = next_position
    table = {}
    for group_id, name, data_type, dims, raw in records:
        if group_id not in groups:
            raise DataError(f"{path}: corrupted C3D parameter {name} (unknown group {group_id})")
        table[f"{groups[group_id]}:{name}"] = (data_type, dims, raw)
    return table


@dataclass(frozen=True)
class C3DLayout:
    """What the guard established about a C3D file.

    n_frames: frames of 3D data, by the format's precedence (see the module doc);
    frames_from: where that count comes from ("POINT:FRAMES", "TRIAL:ACTUAL_START_FIELD/
    ACTUAL_END_FIELD", "POINT:LONG_FRAMES" or "header"); header_frames: what the header's
    first/last-frame words say; n_points: POINT:USED; processor: "Intel" or "DEC";
    floating_point: True for floating-point storage, False for scaled 16-bit integers.
    """

    n_frames: int
    frames_from: str
    header_frames: int
    n_points: int
    processor: str
    floating_point: bool


def _integers(table: dict, key: str, endian: str) -> list[int] | None:
    """The unsigned 16-bit (or byte) values of an integer parameter, or None if it is absent
    or not an integer parameter."""
    if key not in table:
        return None
    data_type, _, raw = table[key]
    if data_type == 2:
        return list(struct.unpack(f"{endian}{len(raw) // 2}H", raw[: len(raw) // 2 * 2]))
    if data_type == 1:
        return list(raw)
    return None


def _frame_count(path: Path, table: dict, endian: str, processor: int,
                 header_frames: int) -> tuple[int, str]:
    """Number of frames and the parameter it comes from (the module doc's precedence)."""
    if "POINT:FRAMES" in table and table["POINT:FRAMES"][0] == 4:
        value = _float32(table["POINT:FRAMES"][2][:4], processor)
        raise DataError(
            f"{path}: POINT:FRAMES is a floating-point number ({value:g}); the C3D reader "
            "(ezc3d) reads only an integer POINT:FRAMES"
        )
    frames = _integers(table, "POINT:FRAMES", endian)
    count = frames[0] if frames else 0
    if 0 < count < _SATURATED:
        return count, "POINT:FRAMES"
    start = _integers(table, "TRIAL:ACTUAL_START_FIELD", endian)
    end = _integers(table, "TRIAL:ACTUAL_END_FIELD", endian)
    if count == _SATURATED and start and end and len(start) >= 2 and len(end) >= 2:
        first, last = start[0] | start[1] << 16, end[0] | end[1] << 16
        if last >= first:
            return last - first + 1, "TRIAL:ACTUAL_START_FIELD/ACTUAL_END_FIELD"
    if count == _SATURATED and "POINT:LONG_FRAMES" in table:
        data_type, _, raw = table["POINT:LONG_FRAMES"]
        long_frames = _float32(raw[:4], processor) if data_type == 4 and len(raw) >= 4 else 0.0
        if long_frames >= _SATURATED:
            return int(long_frames), "POINT:LONG_FRAMES"
    if count:
        return count, "POINT:FRAMES"
    return header_frames, "header"


def _first_integer(table: dict, key: str, endian: str) -> int:
    """First element of an integer parameter (the C3D USED counts are unsigned 16-bit)."""
    data_type, _, raw = table[key]
    if data_type != 2 or len(raw) < 2:
        raise DataError(f"C3D parameter {key} is not an integer")
    return struct.unpack(endian + "H", raw[:2])[0]


def _check_channels(path: Path, table: dict, group: str, endian: str, per_channel: list[str]):
    """Every per-channel parameter of ``group`` exists and covers ``group:USED`` channels."""
    try:
        used = _first_integer(table, f"{group}:USED", endian)
    except DataError as error:
        raise DataError(f"{path}: {error}") from None
    for name in per_channel:
        key = f"{group}:{name}"
        if key not in table:
            raise DataError(f"{path}: C3D parameter {key} missing ({used} channels used)")
        data_type, dims, _ = table[key]
        # Strings are (length, count) arrays; numbers are (count,).
        count = (dims[1] if len(dims) > 1 else 1) if data_type == -1 else (dims[0] if dims else 1)
        if count < used and not (group == "POINT" and f"{group}:{name}2" in table):
            raise DataError(
                f"{path}: C3D parameter {key} describes {count} channels, {group}:USED is {used}"
            )


def check_c3d_bytes(path: Path) -> C3DLayout:
    """Refuse, with one DataError line, a file that is empty, not C3D, corrupted, truncated or
    of a kind the C3D reader (ezc3d) cannot read; return what the file declares."""
    size = path.stat().st_size
    if size == 0:
        raise DataError(f"{path}: empty file")
    data = path.read_bytes()
    if size < _BLOCK or data[1] != _C3D_KEY:
        raise DataError(f"{path}: not a C3D file (bad or missing 512-byte header)")
    parameter_start = (data[0] - 1) * _BLOCK
    if data[0] < 2 or parameter_start + 4 > size:
        raise DataError(f"{path}: corrupted C3D header (parameter section at block {data[0]})")
    n_blocks, processor = data[parameter_start + 2], data[parameter_start + 3]
    if processor not in _ENDIAN or n_blocks == 0:
        raise DataError(f"{path}: corrupted C3D parameter section (processor type {processor})")
    if processor == 86:
        raise DataError(
            f"{path}: C3D file of the MIPS processor type (big-endian), which the C3D reader "
            "(ezc3d) does not read; export it with the Intel (PC) or DEC processor type"
        )
    parameter_end = parameter_start + n_blocks * _BLOCK
    if parameter_end > size:
        raise DataError(
            f"{path}: truncated C3D file ({size} bytes, parameter section ends at {parameter_end})"
        )
    endian = _ENDIAN[processor]
    _, n_analog, first, last = struct.unpack(endian + "HHHH", data[2:10])
    scale = _float32(data[12:16], processor)
    (data_block,) = struct.unpack(endian + "H", data[16:18])
    table = _walk_parameters(path, data[parameter_start:parameter_end], processor)
    (header_points,) = struct.unpack(endian + "H", data[2:4])
    if header_points == 0 and not any(key.startswith("POINT:") for key in table):
        raise DataError(
            f"{path}: no marker data: the C3D file has no POINT group and its header declares 0 "
            f"points (analog channels only: {n_analog} samples per frame)"
        )
    for required in ("POINT:USED", "POINT:RATE"):
        if required not in table:
            raise DataError(f"{path}: C3D parameter {required} missing")
    _check_channels(path, table, "POINT", endian, ["LABELS"])
    if n_analog > 0:
        if "ANALOG:USED" not in table:
            raise DataError(f"{path}: C3D parameter ANALOG:USED missing")
        _check_channels(path, table, "ANALOG", endian, ["LABELS", "SCALE", "OFFSET", "UNITS"])
    if (data_block - 1) * _BLOCK < parameter_end:
        raise DataError(f"{path}: corrupted C3D header (data section at block {data_block})")
    n_points = _first_integer(table, "POINT:USED", endian)
    header_frames = max(last - first + 1, 0)
    n_frames, frames_from = _frame_count(path, table, endian, processor, header_frames)
    if n_frames <= 0:
        raise DataError(f"{path}: C3D file declares no frames (POINT:FRAMES and header)")
    word = 4 if scale < 0 else 2
    expected = (data_block - 1) * _BLOCK + n_frames * (4 * n_points + n_analog) * word
    if expected > size:
        raise DataError(
            f"{path}: truncated C3D file ({size} bytes, {frames_from} declares {n_frames} frames "
            f"of {n_points} markers needing {expected} bytes)"
        )
    return C3DLayout(n_frames, frames_from, header_frames, n_points, _PROCESSOR_NAMES[processor],
                     scale < 0)
