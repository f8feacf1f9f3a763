"""The ATmega2560 test kit (importable as ``tests.avr.emulated``): the avr-gcc build, the simavr
harness behind a pty, a small protocol client. The harness (firmware/build/avr/avrsim) prints its
pty path first, event lines "avrsim: ..." on stdout, and its statistics on stderr at exit."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field

import pytest
import serial

from bemore.paths import REPOSITORY_DIR
from controller.protocol import FrameDecoder, Message, decode_message, encode_message, load_spec

FIRMWARE = REPOSITORY_DIR / "firmware"
ELF = FIRMWARE / "build" / "avr" / "bemore-avr.elf"
HEX = FIRMWARE / "build" / "avr" / "bemore-avr.hex"
AVRSIM = FIRMWARE / "build" / "avr" / "avrsim"
SPEC = load_spec()
BAUD = 500_000  # the firmware's UART (board.h); a pty ignores it, a real port needs it


def make_avr(*targets: str) -> subprocess.CompletedProcess:
    """Run ``make -C firmware TARGETS`` (output as text)."""
    return subprocess.run(["make", "--no-print-directory", "-C", str(FIRMWARE), *targets],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="session")
def avr_build() -> str:
    """Build the firmware ELF/HEX and the harness once; the output of ``make avr``."""
    for tool in ("avr-gcc", "avr-objcopy", "avr-size", "pkg-config"):
        assert shutil.which(tool), (f"{tool} is missing: run `make sysdeps` "
                                    "(tools/system-packages.txt)")
    result = make_avr("avrsim")
    assert result.returncode == 0, result.stdout + result.stderr
    result = make_avr("avr")
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def parse_stats(text: str) -> dict[str, float]:
    """Numbers of the harness's statistics lines (tick cycles, resets, counters, speed)."""
    patterns = {
        "emulated_s": r"emulated ([\d.]+) s", "speed": r"\(([\d.]+)x real time\)",
        "ticks": r"s wall \([\d.]+x real time\), (\d+) ticks",
        "tick_min": r"tick cycles min (\d+)", "tick_median": r"median (\d+)",
        "tick_max": r"median \d+ max (\d+)", "period_max": r"tick period max (\d+)",
        "resets": r"(\d+) resets", "cpu_busy_pct": r"CPU busy ([\d.]+)%",
        "rx_dropped": r"(\d+) bytes dropped by the receive ring",
        "tx_dropped": r"(\d+) frames dropped by the transmit ring",
        "late": r"late_setpoints (\d+)", "bad_frames": r"bad_frames (\d+)",
        "seq_gaps": r"seq_gaps (\d+)", "state": r"state (\d+) fault", "fault": r"fault (\d+),",
        "setpoint_time_ms": r"setpoint time (\d+) ms", "sent": r"Hz, (\d+) setpoints sent",
    }
    found = {}
    for key, pattern in patterns.items():
        match = re.search(pattern, text)
        if match:
            found[key] = float(match.group(1))
    return found


@dataclass
class EmulatedBoard:
    """A running avrsim: ``port`` for the host, ``command`` for the pins, ``events`` seen."""

    process: subprocess.Popen
    port: str
    events: list[str] = field(default_factory=list)
    stats: str = ""

    def command(self, line: str) -> None:
        """Send one harness command (``estop on``, ``noise 300``, ...)."""
        assert self.process.stdin is not None
        self.process.stdin.write((line + "\n").encode())
        self.process.stdin.flush()

    def wait_event(self, pattern: str, timeout_s: float = 10.0) -> re.Match:
        """Wait for a stdout event line matching ``pattern``; its match."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for line in list(self.events):
                match = re.search(pattern, line)
                if match:
                    return match
            time.sleep(0.01)
        raise AssertionError(f"no harness event /{pattern}/ within {timeout_s} s: {self.events}")

    def stop(self) -> dict[str, float]:
        """Close stdin (the harness exits) and parse its statistics."""
        if self.process.poll() is None:
            try:
                _, err = self.process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                _, err = self.process.communicate()
            self.stats = err.decode(errors="replace")
        return parse_stats(self.stats)


@pytest.fixture
def board(avr_build):
    """The emulated board, paced to real time, with the default plant.

    ``--realtime 5``: the emulation runs under SCHED_FIFO (below the drive's streaming thread,
    priority 10) when the OS allows it, so that other work on a loaded machine does not starve
    it into lagging the wall clock (it would then deliver the host's stream in bursts).
    """
    process = subprocess.Popen([str(AVRSIM), "--realtime", "5", str(ELF)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    port = process.stdout.readline().decode().strip()
    assert port.startswith("/dev/"), f"avrsim did not start: {process.stderr.read().decode()}"
    emulated = EmulatedBoard(process, port)

    def read_events() -> None:
        for raw in process.stdout:
            emulated.events.append(raw.decode(errors="replace").strip())

    threading.Thread(target=read_events, daemon=True).start()
    yield emulated
    emulated.stop()


class Client:
    """A minimal synchronous host over the pty: send messages, collect the board's answers."""

    def __init__(self, port: str):
        self.serial = serial.Serial(port, baudrate=BAUD, timeout=0.002)
        self.decoder = FrameDecoder()
        self.seq = 0
        self.received: list[Message] = []
        self.cursor = 0  # wait_for looks at received[cursor:]
        self.serial.write(b"\x00")

    def send(self, name: str, **fields: int) -> int:
        """Send one message; its sequence number."""
        seq = self.seq
        self.serial.write(encode_message(name, seq, **fields))
        self.seq = (self.seq + 1) % 256
        return seq

    def poll(self, duration_s: float = 0.0) -> list[Message]:
        """Read for ``duration_s`` (at least once); the messages decoded."""
        end = time.monotonic() + duration_s
        new: list[Message] = []
        while True:
            data = self.serial.read(max(1, self.serial.in_waiting))
            new += [decode_message(frame) for frame in self.decoder.feed(data)]
            if time.monotonic() >= end:
                break
        self.received += new
        return new

    def wait_for(self, predicate, timeout_s: float = 10.0) -> Message:
        """The first message after the previous match for which ``predicate`` holds."""
        end = time.monotonic() + timeout_s
        while True:
            for index in range(self.cursor, len(self.received)):
                if predicate(self.received[index]):
                    self.cursor = index + 1
                    return self.received[index]
            if time.monotonic() >= end:
                raise AssertionError(f"no matching message within {timeout_s} s")
            self.poll(0.01)

    def ack(self, name: str, timeout_s: float = 10.0, **fields: int) -> int:
        """Send a command and return the result code of its ACK."""
        self.cursor = len(self.received)
        seq = self.send(name, **fields)
        reply = self.wait_for(lambda m: m.name == "ACK" and m.fields["acked_seq"] == seq,
                              timeout_s)
        return reply.fields["result"]

    def hello(self, telemetry_period_ms: int = 1) -> tuple[Message, int]:
        """HELLO; (the HELLO_REPLY, the result code of its ACK)."""
        self.cursor = len(self.received)
        seq = self.send("HELLO", protocol_version=SPEC.protocol_version,
                        telemetry_period_ms=telemetry_period_ms)
        reply = self.wait_for(lambda m: m.name == "HELLO_REPLY")
        ack = self.wait_for(lambda m: m.name == "ACK" and m.fields["acked_seq"] == seq)
        return reply, ack.fields["result"]

    def handshake(self, telemetry_period_ms: int = 1) -> Message:
        """HELLO (asserting OK); the HELLO_REPLY."""
        reply, result = self.hello(telemetry_period_ms)
        assert result == SPEC.results["OK"]
        return reply

    def close(self) -> None:
        self.serial.close()


@pytest.fixture
def client(board):
    """A protocol client connected to the emulated board."""
    host = Client(board.port)
    yield host
    host.close()
