"""A minimal, independent C3D writer for the reader tests (not ezc3d, not the ``c3d`` package).

It writes the format byte by byte from the C3D user guide (header, parameter section, 3D point
and analog data) so that the tests can make what other writers make and these libraries cannot:
the DEC and MIPS processor types, a header whose frame words disagree with the parameters, the
TRIAL fields of a trial longer than 65 535 frames, a parameter section that starts with two
zero bytes (as Qualisys writes it), one POINT:UNITS entry per marker (as Optotrak writes it).

Positions are given in the file's unit; missing samples (NaN) get a negative residual word.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

BLOCK = 512
INTEL, DEC, MIPS = 84, 85, 86


@dataclass
class Parameter:
    """One parameter: ``kind`` is "int" (16-bit), "float", "char" or "byte"; ``value`` a number,
    a list of numbers, or a list of strings (char: padded to the longest)."""

    name: str
    kind: str
    value: object
    dims: tuple[int, ...] | None = None


@dataclass
class C3DSpec:
    """Everything the writer puts in a file. Frame numbers are 1-based as in the format."""

    points: np.ndarray  # (F, M, 3) in the file's unit, NaN = missing
    labels: list[str]
    rate_hz: float
    processor: int = INTEL
    scale: float = -1.0  # < 0: floating-point storage; > 0: 16-bit integers times scale
    units: list[str] = field(default_factory=lambda: ["mm"])
    analog: np.ndarray | None = None  # (F, samples per frame, channels), stored as is
    analog_rate_hz: float = 0.0
    first_frame: int = 1
    header_last_frame: int | None = None  # None: first_frame + F − 1, capped at 65 535
    point_frames: object = "count"  # "count", None (left out), or a value written as is
    point_frames_kind: str = "int"
    trial_fields: bool = False  # TRIAL:ACTUAL_START_FIELD / ACTUAL_END_FIELD (two words each)
    long_frames: bool = False  # POINT:LONG_FRAMES (float)
    parameter_start_bytes: tuple[int, int] = (1, 0x50)
    extra_groups: dict[str, list[Parameter]] = field(default_factory=dict)


class _Encoder:
    """Integers and floats in the byte order and float format of one processor type."""

    def __init__(self, processor: int) -> None:
        self.processor = processor
        self.endian = ">" if processor == MIPS else "<"

    def int16(self, value: int) -> bytes:
        return struct.pack(self.endian + "h", value)

    def uint16(self, value: int) -> bytes:
        return struct.pack(self.endian + "H", value)

    def float32(self, value: float) -> bytes:
        if self.processor == DEC:  # DEC F-float: IEEE bytes of 4·value with the words swapped
            raw = struct.pack("<f", value * 4.0)
            return raw[2:4] + raw[0:2]
        return struct.pack(self.endian + "f", value)


def _parameter_record(encoder: _Encoder, group_id: int, parameter: Parameter, last: bool) -> bytes:
    name = parameter.name.encode()
    if parameter.kind == "char":
        strings = list(parameter.value)
        width = max((len(text) for text in strings), default=0)
        data = b"".join(text.ljust(width).encode() for text in strings)
        dims = parameter.dims or ((width, len(strings)) if len(strings) != 1 else (width,))
        type_code = -1
    else:
        values = np.atleast_1d(np.asarray(parameter.value, dtype=float)).ravel()
        dims = parameter.dims if parameter.dims is not None else (
            () if np.ndim(parameter.value) == 0 else (len(values),))
        if parameter.kind == "int":
            type_code, data = 2, b"".join(encoder.uint16(int(v) & 0xFFFF) for v in values)
        elif parameter.kind == "byte":
            type_code, data = 1, bytes(int(v) & 0xFF for v in values)
        else:
            type_code, data = 4, b"".join(encoder.float32(float(v)) for v in values)
    body = struct.pack("bB", type_code, len(dims)) + bytes(dims) + data + b"\x00"  # no description
    offset = 0 if last else 2 + len(body)
    return struct.pack("bb", len(name), group_id) + name + encoder.int16(offset) + body


def _group_record(encoder: _Encoder, group_id: int, name: str) -> bytes:
    raw = name.encode()
    return struct.pack("bb", len(raw), -group_id) + raw + encoder.int16(3) + b"\x00"


def write_c3d_bytes(path, spec: C3DSpec) -> None:
    """Write ``spec`` as a C3D file at ``path``."""
    encoder = _Encoder(spec.processor)
    points = np.asarray(spec.points, dtype=float)
    n_frames, n_points, _ = points.shape
    analog = spec.analog
    samples, channels = (0, 0) if analog is None else analog.shape[1:]
    floating = spec.scale < 0

    point_group = [
        Parameter("USED", "int", n_points),
        Parameter("SCALE", "float", spec.scale),
        Parameter("RATE", "float", spec.rate_hz),
        Parameter("DATA_START", "int", 0),  # patched below
        Parameter("LABELS", "char", spec.labels[:255]),
        Parameter("DESCRIPTIONS", "char", [""] * min(n_points, 255), dims=(0, min(n_points, 255))),
        Parameter("UNITS", "char", spec.units),
    ]
    for index, start in enumerate(range(255, n_points, 255), start=2):  # LABELS2, LABELS3, …
        point_group.append(Parameter(f"LABELS{index}", "char", spec.labels[start:start + 255]))
    if spec.point_frames is not None:
        value = min(n_frames, 65535) if spec.point_frames == "count" else spec.point_frames
        point_group.insert(1, Parameter("FRAMES", spec.point_frames_kind, value))
    if spec.long_frames:
        point_group.append(Parameter("LONG_FRAMES", "float", float(n_frames)))
    analog_group = [Parameter("USED", "int", channels),
                    Parameter("RATE", "float", spec.analog_rate_hz)]
    if channels:
        analog_group += [
            Parameter("LABELS", "char", [f"A{i + 1}" for i in range(channels)]),
            Parameter("DESCRIPTIONS", "char", [""] * channels, dims=(0, channels)),
            Parameter("GEN_SCALE", "float", 1.0),
            Parameter("SCALE", "float", [1.0] * channels),
            Parameter("OFFSET", "int", [0] * channels),
            Parameter("UNITS", "char", ["V"] * channels),
        ]
    groups = {"POINT": point_group, "ANALOG": analog_group,
              "FORCE_PLATFORM": [Parameter("USED", "int", 0)]}
    if spec.trial_fields:
        last = spec.first_frame + n_frames - 1
        groups["TRIAL"] = [
            Parameter("ACTUAL_START_FIELD", "int", [spec.first_frame & 0xFFFF,
                                                    spec.first_frame >> 16]),
            Parameter("ACTUAL_END_FIELD", "int", [last & 0xFFFF, last >> 16]),
        ]
    groups.update(spec.extra_groups)

    def parameter_section(data_start: int) -> bytes:
        records = b""
        entries = [(gid, name, params) for gid, (name, params) in enumerate(groups.items(), 1)]
        for gid, name, _ in entries:
            records += _group_record(encoder, gid, name)
        flat = [(gid, p) for gid, _, params in entries for p in params]
        for i, (gid, p) in enumerate(flat):
            if p.name == "DATA_START":
                p = Parameter("DATA_START", "int", data_start)
            records += _parameter_record(encoder, gid, p, last=i == len(flat) - 1)
        n_blocks = -(-(4 + len(records)) // BLOCK)
        start = bytes([*spec.parameter_start_bytes, n_blocks, spec.processor])
        return (start + records).ljust(n_blocks * BLOCK, b"\x00")

    section = parameter_section(0)
    data_start = 2 + len(section) // BLOCK  # 1-based: after the header and parameter blocks
    section = parameter_section(data_start)

    last_frame = spec.header_last_frame
    if last_frame is None:
        last_frame = min(spec.first_frame + n_frames - 1, 65535)
    header = bytearray(BLOCK)
    header[0], header[1] = 2, 0x50
    header[2:4] = encoder.uint16(n_points)
    header[4:6] = encoder.uint16(samples * channels)
    header[6:8] = encoder.uint16(min(spec.first_frame, 65535))
    header[8:10] = encoder.uint16(last_frame)
    header[10:12] = encoder.uint16(10)
    header[12:16] = encoder.float32(spec.scale)
    header[16:18] = encoder.uint16(data_start)
    header[18:20] = encoder.uint16(samples)
    header[20:24] = encoder.float32(spec.rate_hz)
    header[298:300] = encoder.uint16(0x3039)

    frames = bytearray()
    for f in range(n_frames):
        for m in range(n_points):
            xyz = points[f, m]
            missing = bool(np.isnan(xyz).any())
            if floating:
                values = [0.0, 0.0, 0.0, -1.0] if missing else [*xyz, 0.0]
                frames += b"".join(encoder.float32(v) for v in values)
            else:
                words = [0, 0, 0, -1] if missing else [*(round(v / spec.scale) for v in xyz), 0]
                frames += b"".join(encoder.int16(w) for w in words)
        if channels:
            for value in np.asarray(analog[f], dtype=float).ravel():
                frames += encoder.float32(value) if floating else encoder.int16(int(value))
    data = bytes(frames).ljust(-(-len(frames) // BLOCK) * BLOCK, b"\x00")
    with open(path, "wb") as handle:
        handle.write(bytes(header) + section + data)
