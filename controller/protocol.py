"""Host side of the bench wire protocol: spec, frame codec, message codec, streaming decoder.

The protocol is specified once, in ``controller/protocol.toml`` (package data of the bench
side); this module reads it at run time
(as Klipper's host reads the firmware's data dictionary) and the firmware's C header is generated
from the same file. Frame layout (see ``firmware/PROTOCOL.md``)::

    raw   = seq:u8 | msg_id:u8 | len:u8 | payload[len] | crc16:u16le   (CRC-16/CCITT-FALSE)
    wire  = COBS(raw) | 0x00

Wire values are integers in fixed-point units (µrad, µrad/s, mN·m, ms, ticks); each field's
``scale`` converts to SI (value_SI = wire_integer · scale). Use :func:`encode_message` with wire
integers or :func:`encode_message_si` with SI values; :meth:`Message.si` reads SI values back.

Example::

    >>> wire = encode_message("HEARTBEAT", seq=5)
    >>> decoder = FrameDecoder()
    >>> [decode_message(f).name for f in decoder.feed(b"\\x13\\x37\\x00" + wire)]
    ['HEARTBEAT']
    >>> decoder.bad_frames
    1
"""

from __future__ import annotations

import binascii
import hashlib
import struct
import sys
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from controller.errors import BenchError, ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

#: The protocol definition: package data of the bench side, and the input of the firmware's
#: generated header (firmware/tools/gen_protocol.py).
SPEC_PATH = Path(__file__).resolve().parent / "protocol.toml"
DELIMITER = 0x00
HEADER_SIZE = 3  # seq, msg_id, len
CRC_SIZE = 2

_STRUCT_CODES = {"u8": "B", "u16": "H", "u32": "I", "i16": "h", "i32": "i"}


@dataclass(frozen=True)
class FieldSpec:
    """One field of a message: wire type, and ``scale`` (SI per wire unit) when it has a unit."""

    name: str
    type: str
    unit: str = ""
    scale: float = 1.0
    doc: str = ""


@dataclass(frozen=True)
class MessageSpec:
    """One message of the catalogue: id, fields in wire order, and its payload ``struct`` format."""

    name: str
    id: int
    fields: tuple[FieldSpec, ...]
    doc: str = ""

    @cached_property
    def struct_format(self) -> str:
        """Little-endian ``struct`` format of the payload."""
        return "<" + "".join(_STRUCT_CODES[f.type] for f in self.fields)

    @cached_property
    def codec(self) -> struct.Struct:
        """Compiled ``struct`` of the payload."""
        return struct.Struct(self.struct_format)

    @property
    def size(self) -> int:
        """Payload size in bytes."""
        return self.codec.size


@dataclass(frozen=True)
class ProtocolSpec:
    """The parsed ``protocol.toml``: versions, limits and code tables, message catalogue."""

    protocol_version: int
    firmware_version: tuple[int, int, int]
    protocol_hash: int  # the definition's identity (see protocol_hash), reported in HELLO_REPLY
    tick_hz: int
    max_payload: int
    limits: dict[str, int]
    modes: dict[str, int]
    states: dict[str, int]
    faults: dict[str, int]
    results: dict[str, int]
    limit_flags: dict[str, int]
    messages: dict[str, MessageSpec]
    by_id: dict[int, MessageSpec]

    def name_of(self, table: str, code: int) -> str:
        """Name of ``code`` in one of the code tables (``"faults"``, ``"states"``, ...)."""
        for name, value in getattr(self, table).items():
            if value == code:
                return name
        return f"UNKNOWN({code})"

    def scale(self, message: str, field_name: str) -> float:
        """SI units per wire unit of one field (e.g. 1e-6 rad per µrad for SETPOINT
        ``position_urad``): the one place the host takes a wire scale from."""
        try:
            return next(f.scale for f in self.messages[message].fields if f.name == field_name)
        except (KeyError, StopIteration):
            raise ConfigError(f"protocol spec: no field {message}.{field_name}") from None

    def flag_names(self, flags: int) -> list[str]:
        """Names of the bits set in a telemetry ``limit_flags`` value."""
        return [name for name, bit in self.limit_flags.items() if flags & bit]


def protocol_hash(text: bytes) -> int:
    """The protocol's identity: the first 4 bytes (big-endian) of the SHA-256 of the definition
    file's bytes, as firmware/tools/gen_protocol.py compiles it into the firmware
    (``BM_PROTOCOL_HASH``) and the firmware reports it in HELLO_REPLY ``protocol_hash``."""
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "big")


def _parse_spec(path: Path) -> ProtocolSpec:
    try:
        data = path.read_bytes()
        raw = tomllib.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the protocol spec ({exc})") from exc
    try:
        messages = {}
        for entry in raw["message"]:
            fields = tuple(
                FieldSpec(f["name"], f["type"], f.get("unit", ""), float(f.get("scale", 1.0)),
                          f.get("doc", ""))
                for f in entry["fields"]
            )
            messages[entry["name"]] = MessageSpec(entry["name"], entry["id"], fields,
                                                  entry.get("doc", ""))
        return ProtocolSpec(
            protocol_version=raw["protocol_version"],
            firmware_version=tuple(raw["firmware_version"]),
            protocol_hash=protocol_hash(data),
            tick_hz=raw["tick_hz"],
            max_payload=raw["max_payload"],
            limits=dict(raw["limits"]),
            modes=dict(raw["modes"]),
            states=dict(raw["states"]),
            faults=dict(raw["faults"]),
            results=dict(raw["results"]),
            limit_flags=dict(raw["limit_flags"]),
            messages=messages,
            by_id={m.id: m for m in messages.values()},
        )
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: protocol spec lacks or mistypes key {exc}") from exc


@lru_cache(maxsize=4)
def load_spec(path: Path = SPEC_PATH) -> ProtocolSpec:
    """Load (once) the protocol spec; raises ConfigError naming the file on a bad spec."""
    return _parse_spec(Path(path))


# ---------------------------------------------------------------- link level: CRC, COBS, frames
def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE of ``data`` (poly 0x1021, init 0xFFFF).

    >>> hex(crc16(b"123456789"))
    '0x29b1'
    """
    return binascii.crc_hqx(data, 0xFFFF)


def cobs_encode(data: bytes) -> bytes:
    """Consistent-overhead byte stuffing: the result holds no 0x00 byte."""
    out = bytearray()
    block = bytearray()
    for byte in data:
        if byte == 0:
            out += bytes([len(block) + 1]) + block
            block.clear()
        else:
            block.append(byte)
            if len(block) == 254:
                out += b"\xff" + block
                block.clear()
    out += bytes([len(block) + 1]) + block
    return bytes(out)


def cobs_decode(data: bytes) -> bytes | None:
    """Inverse of :func:`cobs_encode`; None when ``data`` is not a valid COBS block."""
    if 0 in data:  # a COBS block never holds a zero byte
        return None
    out = bytearray()
    i = 0
    n = len(data)
    while i < n:
        code = data[i]
        if i + code > n:
            return None
        out += data[i + 1 : i + code]
        i += code
        if code != 0xFF and i < n:
            out.append(0)
    return bytes(out)


@dataclass(frozen=True)
class Frame:
    """One link-level frame: sequence number, message id, payload bytes."""

    seq: int
    msg_id: int
    payload: bytes


def encode_frame(seq: int, msg_id: int, payload: bytes) -> bytes:
    """Wire bytes of one frame (COBS-encoded, ending with the 0x00 delimiter)."""
    if not 0 <= seq <= 255 or not 0 <= msg_id <= 255:
        raise BenchError(f"frame: seq {seq} and msg_id {msg_id} must be in 0..255")
    if len(payload) > load_spec().max_payload:
        raise BenchError(f"frame: payload of {len(payload)} bytes exceeds the maximum")
    raw = bytes([seq, msg_id, len(payload)]) + payload
    raw += crc16(raw).to_bytes(2, "little")
    return cobs_encode(raw) + b"\x00"


def decode_frame(block: bytes) -> Frame | None:
    """Decode the bytes between two delimiters; None if COBS, length or CRC is wrong."""
    raw = cobs_decode(block)
    if raw is None or len(raw) < HEADER_SIZE + CRC_SIZE:
        return None
    if raw[2] != len(raw) - HEADER_SIZE - CRC_SIZE:
        return None
    if crc16(raw[:-CRC_SIZE]) != int.from_bytes(raw[-CRC_SIZE:], "little"):
        return None
    return Frame(raw[0], raw[1], raw[HEADER_SIZE:-CRC_SIZE])


def max_encoded_block(max_payload: int) -> int:
    """Largest COBS block (without delimiter) a valid frame can produce, in bytes."""
    raw = HEADER_SIZE + max_payload + CRC_SIZE
    return raw + (raw + 253) // 254


@dataclass
class FrameDecoder:
    """Streaming frame decoder: feed any chunks of bytes, get the valid frames in order.

    Invalid frames (bad COBS, length or CRC; over-long runs without a delimiter) are counted in
    ``bad_frames`` and skipped; the decoder resynchronises on the next 0x00.
    """

    bad_frames: int = 0
    good_frames: int = 0
    _buffer: bytearray = field(default_factory=bytearray)
    _overflow: bool = False

    def feed(self, data: bytes) -> list[Frame]:
        """Consume ``data`` and return the frames completed by it."""
        limit = max_encoded_block(load_spec().max_payload)
        parts = bytes(data).split(b"\x00")
        frames = []
        for index, part in enumerate(parts[:-1]):  # every part but the last ends at a delimiter
            block = bytes(self._buffer) + part if index == 0 else part
            overflow = self._overflow if index == 0 else False
            if overflow or len(block) > limit:
                self.bad_frames += 1
            elif block:
                frame = decode_frame(block)
                if frame is None:
                    self.bad_frames += 1
                else:
                    self.good_frames += 1
                    frames.append(frame)
            if index == 0:
                self._buffer.clear()
                self._overflow = False
        # The unterminated tail waits for its delimiter; beyond the limit only the flag is kept.
        tail = parts[-1]
        room = limit - len(self._buffer)
        if len(tail) > room:
            self._overflow = True
        self._buffer += tail[: max(room, 0)]
        return frames


# ---------------------------------------------------------------- messages
@dataclass(frozen=True)
class Message:
    """A decoded message: name, sequence number and wire-integer field values."""

    name: str
    seq: int
    fields: dict[str, int]

    def si(self, name: str) -> float:
        """Value of field ``name`` in SI units (rad, rad/s, N·m, s)."""
        spec = load_spec().messages[self.name]
        scale = next(f.scale for f in spec.fields if f.name == name)
        return self.fields[name] * scale

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"name": self.name, "seq": self.seq, "fields": dict(self.fields)}


def _message_spec(name: str) -> MessageSpec:
    spec = load_spec().messages.get(name)
    if spec is None:
        raise BenchError(f"protocol: unknown message {name!r}")
    return spec


def encode_payload(name: str, **fields: int) -> bytes:
    """Payload bytes of message ``name`` from wire-integer fields (all fields required)."""
    spec = _message_spec(name)
    names = [f.name for f in spec.fields]
    if set(fields) != set(names):
        raise BenchError(f"protocol: {name} needs fields {names}, got {sorted(fields)}")
    try:
        return spec.codec.pack(*(int(fields[n]) for n in names))
    except struct.error as exc:
        raise BenchError(f"protocol: {name} field out of its wire range ({exc})") from exc


def encode_message(name: str, seq: int = 0, **fields: int) -> bytes:
    """Wire bytes of message ``name`` with wire-integer ``fields``."""
    return encode_frame(seq, _message_spec(name).id, encode_payload(name, **fields))


def encode_message_si(name: str, seq: int = 0, **values: float) -> bytes:
    """Wire bytes of message ``name`` from SI values (rad, rad/s, N·m, s), rounded to wire units."""
    spec = _message_spec(name)
    scales = {f.name: f.scale for f in spec.fields}
    unknown = set(values) - set(scales)
    if unknown:
        raise BenchError(f"protocol: {name} has no field(s) {sorted(unknown)}")
    return encode_message(name, seq, **{k: round(v / scales[k]) for k, v in values.items()})


def decode_message(frame: Frame) -> Message:
    """Message carried by a valid frame; BenchError on an unknown id or a wrong payload size."""
    spec = load_spec().by_id.get(frame.msg_id)
    if spec is None:
        raise BenchError(f"protocol: unknown message id 0x{frame.msg_id:02X} (seq {frame.seq})")
    if len(frame.payload) != spec.size:
        raise BenchError(
            f"protocol: {spec.name} payload is {len(frame.payload)} bytes, expected {spec.size}"
        )
    values = spec.codec.unpack(frame.payload)
    fields = {f.name: v for f, v in zip(spec.fields, values, strict=True)}
    return Message(spec.name, frame.seq, fields)


def hello_versions(frame: Frame) -> Message | None:
    """The versions of a HELLO_REPLY whose layout is another protocol version's, else None.

    Every protocol version starts HELLO_REPLY with ``protocol_version``, ``fw_major``,
    ``fw_minor``, ``fw_patch`` (u8 each), so a host can name the firmware's protocol even when
    the rest of the reply has another layout; the returned message holds those four fields only.
    """
    spec = load_spec().messages["HELLO_REPLY"]
    if frame.msg_id != spec.id or len(frame.payload) == spec.size or len(frame.payload) < 4:
        return None
    names = ("protocol_version", "fw_major", "fw_minor", "fw_patch")
    return Message(spec.name, frame.seq, dict(zip(names, frame.payload[:4], strict=True)))


# ---------------------------------------------------------------- text form (parsedump)
_SI_TEXT = {"µrad": ("rad", 6), "µrad/s": ("rad/s", 6), "mN·m": ("N·m", 3)}


def describe(message: Message) -> str:
    """One line of text for a message: SI values with units, code names for states and faults.

    >>> describe(Message("ACK", 3, {"acked_seq": 2, "acked_id": 2, "result": 5}))
    'ACK seq=3 acked_seq=2 acked_id=ARM result=FAULT_LATCHED'
    """
    spec = load_spec()
    parts = [f"{message.name} seq={message.seq}"]
    tables = {"state": "states", "fault": "faults", "result": "results", "mode": "modes"}
    for field_spec in spec.messages[message.name].fields:
        value = message.fields[field_spec.name]
        if field_spec.name in tables:
            text = spec.name_of(tables[field_spec.name], value)
        elif field_spec.name == "acked_id":
            text = spec.by_id[value].name if value in spec.by_id else f"0x{value:02X}"
        elif field_spec.name == "limit_flags":
            text = "|".join(spec.flag_names(value)) or "0"
        elif field_spec.unit in _SI_TEXT:
            si_unit, decimals = _SI_TEXT[field_spec.unit]  # exact: one wire unit, no rounding
            text = f"{value * field_spec.scale:.{decimals}f}".rstrip("0").rstrip(".") + si_unit
        else:
            text = str(value)
        parts.append(f"{field_spec.name}={text}")
    return " ".join(parts)


def dump_stream(data: bytes) -> list[str]:
    """Text lines for a recorded byte stream: one per message, then the bad-frame count."""
    decoder = FrameDecoder()
    lines = []
    for frame in decoder.feed(data):
        try:
            lines.append(describe(decode_message(frame)))
        except BenchError as error:
            lines.append(f"# {error}")
    lines.append(f"# {decoder.good_frames} frames, {decoder.bad_frames} bad")
    return lines


if __name__ == "__main__":
    import sys as _sys

    for path in _sys.argv[1:]:
        print("\n".join(dump_stream(Path(path).read_bytes())))
