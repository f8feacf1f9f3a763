"""Byte-exact dump of a link, and its decoder (Klipper's ``parsedump`` idea).

``bemore drive --dump FILE`` records every chunk of bytes written to or read from the bench,
exactly as on the wire; :func:`decode_dump` turns the file back into messages, for replay and
for regression tests of the stream. Layout: a magic line ``bemore-dump 1\\n``, then records of
``direction:u8`` (0 host→bench, 1 bench→host) | ``host_time_ns:u64le`` (perf_counter_ns) |
``length:u16le`` | ``bytes[length]``. A truncated last record (a crash, a full disk) is
ignored. A write error (a full disk) is never raised to the link: the first one is kept
(:attr:`DumpWriter.failure`, the session stops on it as on a log it cannot write) and nothing
more is written.
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
        self.failure: OSError | None = None  # the first write error: nothing is written after it

    def record(self, direction: int, host_time_ns: int, data: bytes) -> None:
        """Append one chunk (``direction`` 0 host→bench, 1 bench→host); a write error is kept
        in :attr:`failure`, not raised (the link's threads must go on: a stop needs them)."""
        for start in range(0, len(data), 0xFFFF):
            chunk = data[start : start + 0xFFFF]
            with self._lock:
                if self._file.closed or self.failure is not None:
                    return
                try:
                    self._file.write(_RECORD.pack(direction, host_time_ns, len(chunk)) + chunk)
                except OSError as error:
                    self.failure = error
                    return

    def failure_text(self) -> str:
        """'FILE: cannot write the byte dump (REASON)' once a write failed, '' before."""
        if self.failure is None:
            return ""
        return (f"{self.path}: cannot write the byte dump "
                f"({self.failure.strerror or self.failure})")

    def close(self) -> None:
        """Flush and close (idempotent); a write error of the flush is kept in :attr:`failure`."""
        with self._lock:
            if not self._file.closed:
                try:
                    self._file.close()  # closed even when its flush fails
                except OSError as error:
                    self.failure = self.failure or error


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
