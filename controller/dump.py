"""Byte-exact dump of a link, and its decoder (Klipper's ``parsedump`` idea).

``bemore drive --dump FILE`` records every chunk of bytes written to or read from the bench,
exactly as on the wire; :func:`decode_dump` turns the file back into messages, for replay and
for regression tests of the stream. Layout: a magic line ``bemore-dump 1\\n``, then records of
``direction:u8`` (0 host→bench, 1 bench→host) | ``host_time_ns:u64le`` (perf_counter_ns) |
``length:u16le`` | ``bytes[length]``. A truncated last record (a crash) is ignored.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from controller.errors import BenchError, DataError
from controller.protocol import FrameDecoder, Message, decode_message

MAGIC = b"bemore-dump 1\n"
_RECORD = struct.Struct("<BQH")
DIRECTIONS = ("host→bench", "bench→host")


class DumpWriter:
    """Appends wire chunks to a dump file (thread-safe; flushed by the OS buffer, see close)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._file = self.path.open("wb")
        except OSError as error:
            raise DataError(f"{self.path}: cannot write the dump ({error})") from None
        self._file.write(MAGIC)
        self._lock = threading.Lock()

    def record(self, direction: int, host_time_ns: int, data: bytes) -> None:
        """Append one chunk (``direction`` 0 host→bench, 1 bench→host)."""
        for start in range(0, len(data), 0xFFFF):
            chunk = data[start : start + 0xFFFF]
            with self._lock:
                if not self._file.closed:
                    self._file.write(_RECORD.pack(direction, host_time_ns, len(chunk)) + chunk)

    def close(self) -> None:
        """Flush and close (idempotent)."""
        with self._lock:
            if not self._file.closed:
                self._file.close()


@dataclass(frozen=True)
class DumpedMessage:
    """One message decoded from a dump: direction, host time of its last chunk (ns), message."""

    direction: str
    host_time_ns: int
    message: Message

    def line(self, origin_ns: int = 0) -> str:
        """Text form: time (s), direction, name, seq and fields."""
        fields = " ".join(f"{key}={value}" for key, value in self.message.fields.items())
        return (f"{(self.host_time_ns - origin_ns) * 1e-9:10.6f} {self.direction} "
                f"{self.message.name} seq={self.message.seq} {fields}".rstrip())


def decode_dump(path: str | Path) -> tuple[list[DumpedMessage], dict[str, int]]:
    """Messages of a dump in time order, and per-direction counts of frames that did not decode."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot read the dump ({error})") from None
    if not data.startswith(MAGIC):
        raise DataError(f"{path}: not a bemore dump (expected the line {MAGIC!r})")
    decoders = (FrameDecoder(), FrameDecoder())
    undecodable = [0, 0]
    messages: list[DumpedMessage] = []
    offset = len(MAGIC)
    while offset + _RECORD.size <= len(data):
        direction, host_time_ns, length = _RECORD.unpack_from(data, offset)
        offset += _RECORD.size
        if direction > 1 or offset + length > len(data):
            break  # truncated last record
        for frame in decoders[direction].feed(data[offset : offset + length]):
            try:
                message = decode_message(frame)
            except BenchError:
                undecodable[direction] += 1
                continue
            messages.append(DumpedMessage(DIRECTIONS[direction], host_time_ns, message))
        offset += length
    bad = {DIRECTIONS[i]: decoders[i].bad_frames + undecodable[i] for i in range(2)}
    messages.sort(key=lambda item: item.host_time_ns)  # the two directions interleaved in time
    return messages, bad
