#!/usr/bin/env python3
"""Write firmware/tests/vectors.json, the golden frames both the C and the Python tests check.

Run once when the protocol changes (then ``gen_protocol.py`` to refresh the C test data), review
the diff, and commit. The frames are produced by the Python codec and checked byte for byte by the
independent C implementation, so a disagreement between the two fails a test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from controller.protocol import (
    cobs_encode,
    crc16,
    encode_message,
    encode_payload,
    load_spec,
)

OUT = Path(__file__).resolve().parents[1] / "tests" / "vectors.json"
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus"

SPEC = load_spec()
VERSION = SPEC.protocol_version
FRAMES = [
    ("hello", "HELLO", 0, {"protocol_version": VERSION, "telemetry_period_ms": 10}),
    ("arm_defaults", "ARM", 1, {"watchdog_ms": 0, "lead_ms": 0}),
    ("arm_100ms_lead_30ms", "ARM", 2, {"watchdog_ms": 100, "lead_ms": 30}),
    ("disarm", "DISARM", 3, {}),
    ("setpoint_position", "SETPOINT", 4,
     {"time_ms": 1234, "mode": 0, "position_urad": 1570796, "velocity_urad_s": -250000,
      "torque_mNm": 12500}),
    ("setpoint_zero_bytes", "SETPOINT", 0,
     {"time_ms": 0, "mode": 2, "position_urad": 0, "velocity_urad_s": 0, "torque_mNm": -1}),
    ("setpoint_extremes", "SETPOINT", 255,
     {"time_ms": 4294967295, "mode": 1, "position_urad": -2147483648,
      "velocity_urad_s": 2147483647, "torque_mNm": -150000}),
    ("heartbeat", "HEARTBEAT", 5, {}),
    ("estop", "ESTOP", 6, {}),
    ("clear_fault", "CLEAR_FAULT", 7, {}),
    ("flush", "FLUSH", 8, {}),
    ("hello_reply", "HELLO_REPLY", 0,
     {"protocol_version": VERSION, "fw_major": SPEC.firmware_version[0],
      "fw_minor": SPEC.firmware_version[1], "fw_patch": SPEC.firmware_version[2], "tick_hz": 1000,
      "max_payload": 48, "torque_max_mNm": 150000, "velocity_max_urad_s": 8000000,
      "position_min_urad": -500000, "position_max_urad": 3200000, "slew_max_mNm_per_tick": 2000,
      "watchdog_default_ms": 50, "watchdog_min_ms": 10, "watchdog_max_ms": 500,
      "mcu_ticks": 123456, "protocol_hash": 0xA1B2C3D4}),
    ("ack_ok", "ACK", 1, {"acked_seq": 2, "acked_id": 2, "result": 0}),
    ("telemetry", "TELEMETRY", 200,
     {"seq_echo": 4, "mcu_ticks": 70000, "setpoint_time_ms": 1234, "position_urad": 1570001,
      "velocity_urad_s": -249000, "torque_mNm": 12400, "state": 1, "fault": 0,
      "limit_flags": 9, "bad_frames": 3, "late_setpoints": 1, "seq_gaps": 65535}),
]


def rejected_streams() -> list[dict]:
    """Byte streams with a known count of bad and good frames (resynchronisation cases)."""
    good = encode_message("HEARTBEAT", 9)
    setpoint = encode_message("SETPOINT", 10, time_ms=5, mode=0, position_urad=1000,
                              velocity_urad_s=0, torque_mNm=0)
    flipped = bytearray(setpoint)
    flipped[5] ^= 0x10
    # Valid COBS and CRC, but the len byte says 1 while the payload is empty.
    raw = bytes([11, 0x05, 1])
    raw_len = cobs_encode(raw + crc16(raw).to_bytes(2, "little")) + b"\x00"
    return [
        {"name": "bit_flip_then_good", "stream": (bytes(flipped) + good).hex(),
         "bad_frames": 1, "good_frames": 1},
        {"name": "wrong_length_then_good", "stream": (bytes(raw_len) + good).hex(),
         "bad_frames": 1, "good_frames": 1},
        {"name": "truncated_then_good", "stream": (setpoint[:8] + b"\x00" + good).hex(),
         "bad_frames": 1, "good_frames": 1},
        {"name": "overlong_garbage_then_good", "stream": (b"\x55" * 200 + b"\x00" + good).hex(),
         "bad_frames": 1, "good_frames": 1},
        {"name": "empty_delimiters", "stream": (b"\x00\x00\x00" + good + b"\x00").hex(),
         "bad_frames": 0, "good_frames": 1},
        {"name": "short_frame", "stream": (b"\x03\x01\x02\x00" + good).hex(),
         "bad_frames": 1, "good_frames": 1},
    ]


def session(seed: int) -> bytes:
    """A plausible host session (handshake, arm, setpoints, heartbeat, e-stop, clear)."""
    seq = iter(range(seed, seed + 1000))
    out = b"\x00" + encode_message("HELLO", next(seq) % 256, protocol_version=VERSION,
                                    telemetry_period_ms=1)
    out += encode_message("ARM", next(seq) % 256, watchdog_ms=20, lead_ms=5)
    for k in range(12):
        out += encode_message("SETPOINT", next(seq) % 256, time_ms=k, mode=k % 3,
                              position_urad=k * 90000 - 400000, velocity_urad_s=k * 700000,
                              torque_mNm=(k - 6) * 30000)
    out += encode_message("HEARTBEAT", next(seq) % 256)
    out += encode_message("FLUSH", next(seq) % 256)
    for name in ("ESTOP", "CLEAR_FAULT", "DISARM"):
        out += encode_message(name, next(seq) % 256)
    return out


def write_corpus() -> None:
    """Seed corpus of the fuzzer: golden frames, sessions, and a garbled session."""
    CORPUS.mkdir(exist_ok=True)
    for name, message, seq, fields in FRAMES:
        (CORPUS / f"frame_{name}").write_bytes(encode_message(message, seq, **fields))
    (CORPUS / "session").write_bytes(session(0))
    (CORPUS / "session_seq_wrap").write_bytes(session(250))
    garbled = bytearray(session(7))
    for index in range(5, len(garbled), 23):
        garbled[index] ^= 0x21
    (CORPUS / "session_garbled").write_bytes(bytes(garbled))
    # Structured seeds (odd first byte): [id][len][payload] chunks the harness frames itself.
    chunks = [(0x01, encode_payload("HELLO", protocol_version=VERSION, telemetry_period_ms=1)),
              (0x02, encode_payload("ARM", watchdog_ms=10, lead_ms=3))]
    for k in range(20):
        chunks.append((0x04, encode_payload("SETPOINT", time_ms=k, mode=k % 3,
                                            position_urad=k * 200000 - 600000,
                                            velocity_urad_s=(k - 10) * 1000000,
                                            torque_mNm=(k - 10) * 20000)))
    chunks += [(0x05, b""), (0x06, b""), (0x07, b""), (0x08, b""), (0x02, b"\x00\x00\x00\x00"),
               (0x03, b"")]
    structured = b"\x01" + b"".join(bytes([i, len(p)]) + p for i, p in chunks)
    (CORPUS / "structured_session").write_bytes(structured)
    for name, operations in structured_scenarios().items():
        (CORPUS / f"structured_{name}").write_bytes(b"\x01" + b"".join(operations))
    for vec in rejected_streams():
        (CORPUS / f"rejected_{vec['name']}").write_bytes(bytes.fromhex(vec["stream"]))


# Operations of the fuzz harness's structured mode (firmware/tests/fuzz_frame.c).
OP_TICK, OP_ESTOP, OP_DRIVER, OP_MOVE = 0xF0, 0xF1, 0xF2, 0xF3


def op_message(name: str, **fields: int) -> bytes:
    """A message operation: [id][len][payload] (the harness frames it with a valid CRC)."""
    payload = encode_payload(name, **fields)
    return bytes([SPEC.messages[name].id, len(payload)]) + payload


def op_setpoint(time_ms: int, position_urad: int = 0, torque_mNm: int = 0,
                mode: str = "POSITION") -> bytes:
    """A SETPOINT operation (zero velocity)."""
    return op_message("SETPOINT", time_ms=time_ms, mode=SPEC.modes[mode],
                      position_urad=position_urad, velocity_urad_s=0, torque_mNm=torque_mNm)


def structured_scenarios() -> dict[str, list[bytes]]:
    """Seeds that reach the schedule's corners: ticks chosen by the input."""
    def start(watchdog_ms: int, lead_ms: int) -> list[bytes]:
        return [op_message("HELLO", protocol_version=VERSION, telemetry_period_ms=1),
                op_message("ARM", watchdog_ms=watchdog_ms, lead_ms=lead_ms)]

    tick = [bytes([OP_TICK, 1])]
    # lead 5, one setpoint per tick, an 8-tick host stall, then the owed setpoints in one burst
    # within a tick: the overdue ones replace each other in the queue
    late = start(50, 5)
    for k in range(10):
        late += [op_setpoint(k, 1000 * k, 2000), *tick]
    late += [bytes([OP_TICK, 8])] + [op_setpoint(k, 1000 * k, 2000) for k in range(10, 19)]
    late += [bytes([OP_TICK, 10])]
    # lead 100: 33 setpoints without a tick overflow the 32-deep queue
    overflow = start(200, 100) + [op_setpoint(k) for k in range(33)] + [bytes([OP_TICK, 5])]
    # the e-stop input, then the driver fault, while streaming with a feed-forward
    inputs = start(100, 1)
    for k in range(5):
        inputs += [op_setpoint(k, 0, 30000), *tick]
    inputs += [bytes([OP_ESTOP, 1]), *tick, bytes([OP_ESTOP, 0]), *tick]
    inputs += [op_message("CLEAR_FAULT"), op_message("ARM", watchdog_ms=100, lead_ms=1)]
    for k in range(5):
        inputs += [op_setpoint(k, 0, 30000), *tick]
    inputs += [bytes([OP_DRIVER, 1]), *tick, bytes([OP_DRIVER, 0]), bytes([OP_TICK, 3])]
    # the host falls silent with a feed-forward in force; the axis drifts meanwhile
    silent = start(50, 2)
    for k in range(20):
        silent += [op_setpoint(k, 20000, 40000), bytes([OP_MOVE, 1]), *tick]
    silent += [bytes([OP_TICK, 60])]
    # a setpoint outside the limits mid-stream
    limit = [*start(50, 1), op_setpoint(0), *tick, op_setpoint(1, 0, 150001), *tick]
    # torque mode pushing an axis that runs at 9 rad/s: the speed cut-off
    speed = start(100, 1)
    for k in range(30):
        speed += [op_setpoint(k, 0, 4000, "TORQUE"), bytes([OP_MOVE, 9]), *tick]
    # moved (disarmed) just beyond the range, then pushed further: the range cut-off, then,
    # drifting at 1 rad/s, overtravel
    beyond = [start(100, 1)[0]] + [bytes([OP_MOVE, 127])] * 26 + [start(100, 1)[1]]
    for k in range(120):
        beyond += [op_setpoint(k, 0, 3000, "TORQUE"), bytes([OP_MOVE, 1]), *tick]
    return {"late_burst": late, "queue_overflow": overflow, "estop_driver": inputs,
            "silent_host": silent, "limit": limit, "speed_cut": speed, "range_cut": beyond}


def main() -> None:
    """Write the vectors file and the fuzzer's seed corpus."""
    write_corpus()
    spec = load_spec()
    frames = []
    for name, message, seq, fields in FRAMES:
        assert set(fields) == {f.name for f in spec.messages[message].fields}, name
        frames.append({"name": name, "message": message, "seq": seq, "fields": fields,
                       "frame": encode_message(message, seq, **fields).hex()})
    doc = {"protocol_version": spec.protocol_version,
           "comment": "frame = hex of the wire bytes including the final 0x00 delimiter",
           "frames": frames, "rejected": rejected_streams()}
    OUT.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
