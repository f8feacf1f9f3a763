"""The Python codec against the golden frames, catalogued check values and hand-built frames."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bemore.errors import BenchError
from bemore.paths import REPOSITORY_DIR
from controller.protocol import (
    FrameDecoder,
    cobs_decode,
    cobs_encode,
    crc16,
    decode_frame,
    decode_message,
    dump_stream,
    encode_frame,
    encode_message,
    encode_message_si,
    load_spec,
)

VECTORS = json.loads((REPOSITORY_DIR / "firmware" / "tests" / "vectors.json").read_text())


def test_crc16_catalogued_check_value():
    # CRC-16/CCITT-FALSE check value from the CRC catalogue.
    assert crc16(b"123456789") == 0x29B1


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [  # examples of the COBS paper / Wikipedia article
        ("00", "0101"),
        ("0000", "010101"),
        ("11220033", "0311220233"),
        ("11223344", "0511223344"),
        ("11000000", "0211010101"),
        ("", "01"),
    ],
)
def test_cobs_published_examples(raw, encoded):
    assert cobs_encode(bytes.fromhex(raw)).hex() == encoded
    assert cobs_decode(bytes.fromhex(encoded)) == bytes.fromhex(raw)


def test_cobs_rejects_malformed_blocks():
    assert cobs_decode(b"\x05\x11\x22") is None  # run longer than the block
    assert cobs_decode(b"\x00") is None


def test_hand_built_heartbeat_frame():
    # raw = seq 05, id 05, len 00, CRC 0xD899 little-endian → COBS runs [05 05] [99 D8].
    assert crc16(b"\x05\x05\x00") == 0xD899
    assert encode_message("HEARTBEAT", seq=5) == bytes.fromhex("03 05 05 03 99 d8 00")


@pytest.mark.parametrize("vector", VECTORS["frames"], ids=lambda v: v["name"])
def test_golden_frames_encode_and_decode(vector):
    wire = bytes.fromhex(vector["frame"])
    assert encode_message(vector["message"], vector["seq"], **vector["fields"]) == wire
    frames = FrameDecoder().feed(wire)
    assert len(frames) == 1
    message = decode_message(frames[0])
    assert (message.name, message.seq, message.fields) == (
        vector["message"], vector["seq"], vector["fields"])


@pytest.mark.parametrize("vector", VECTORS["rejected"], ids=lambda v: v["name"])
@pytest.mark.parametrize("chunk", [1, 7, 10_000])
def test_rejected_streams_counted_and_resynchronised(vector, chunk):
    stream = bytes.fromhex(vector["stream"])
    decoder = FrameDecoder()
    frames = []
    for start in range(0, len(stream), chunk):
        frames += decoder.feed(stream[start : start + chunk])
    assert len(frames) == vector["good_frames"]
    assert decoder.bad_frames == vector["bad_frames"]


def test_every_single_bit_flip_of_every_golden_frame_is_rejected():
    accepted = 0
    for vector in VECTORS["frames"]:
        wire = bytes.fromhex(vector["frame"])
        for index in range(len(wire) - 1):
            for bit in range(8):
                garbled = bytearray(wire)
                garbled[index] ^= 1 << bit
                decoder = FrameDecoder()
                accepted += len(decoder.feed(bytes(garbled)))
                assert decoder.bad_frames >= 1
    assert accepted == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(0, 255), max_size=5))
def test_accepted_frames_are_exactly_well_formed_blocks_of_the_stream(noise, seqs):
    # Mix valid frames into random noise: every accepted frame must re-encode to a block that
    # is present, delimited, in the stream — garbage never turns into an accepted frame.
    stream = noise + b"".join(encode_message("HEARTBEAT", s) for s in seqs)
    frames = FrameDecoder().feed(stream)
    blocks = stream.split(b"\x00")
    for frame in frames:
        assert encode_frame(frame.seq, frame.msg_id, frame.payload)[:-1] in blocks
    assert len(frames) >= len(seqs) - 1  # only the frame glued to the noise may be lost


def test_si_encoding_rounds_to_wire_units():
    wire = encode_message_si("SETPOINT", 3, time_ms=1.5, mode=0, position_urad=1.5707963,
                             velocity_urad_s=-0.25, torque_mNm=12.5)
    message = decode_message(decode_frame(wire[:-1]))
    assert message.fields == {"time_ms": 1500, "mode": 0, "position_urad": 1570796,
                              "velocity_urad_s": -250000, "torque_mNm": 12500}
    assert message.si("torque_mNm") == pytest.approx(12.5)
    assert message.si("position_urad") == pytest.approx(1.570796)


def test_bad_requests_raise_bench_errors():
    with pytest.raises(BenchError, match="unknown message 'NOPE'"):
        encode_message("NOPE")
    with pytest.raises(BenchError, match="ARM needs fields"):
        encode_message("ARM", 0)
    with pytest.raises(BenchError, match="wire range"):
        encode_message("ARM", 0, watchdog_ms=70000, lead_ms=0)
    with pytest.raises(BenchError, match="unknown message id 0x55"):
        decode_message(decode_frame(encode_frame(1, 0x55, b"")[:-1]))
    with pytest.raises(BenchError, match="payload is 1 bytes, expected 0"):
        decode_message(decode_frame(encode_frame(1, 0x05, b"\x01")[:-1]))


def test_spec_tables_match_the_protocol_document():
    spec = load_spec()
    assert spec.protocol_version == VECTORS["protocol_version"] == 4
    assert spec.messages["HELLO_REPLY"].size == 41  # 4+2+1+5·4+3·2+4+4 (protocol_hash last)
    assert spec.messages["SETPOINT"].size == 17
    assert spec.messages["ARM"].size == 4  # watchdog_ms, lead_ms
    assert spec.messages["FLUSH"].size == 0 and spec.messages["FLUSH"].id == 0x08
    assert spec.limits["setpoint_queue"] == 32 and spec.limits["lead_default_ms"] == 20
    assert spec.name_of("faults", 7) == "QUEUE_OVERFLOW"
    assert spec.name_of("faults", 8) == "LIMIT"
    assert spec.messages["TELEMETRY"].size == 30  # 1+4+4+4+4+4+1+1+1+2+2+2
    assert spec.limits["watchdog_default_ms"] == 50
    assert spec.name_of("faults", 1) == "WATCHDOG"
    assert spec.flag_names(9) == ["POSITION_REFUSED", "SLEW_LIMITED"]
    assert spec.flag_names(192) == ["TORQUE_REFUSED", "FEEDFORWARD_DROPPED"]
    assert all(m.size <= spec.max_payload for m in spec.messages.values())


def test_dump_stream_describes_messages_in_si_units():
    stream = (encode_message("SETPOINT", 4, time_ms=1234, mode=0, position_urad=1570796,
                             velocity_urad_s=-250000, torque_mNm=12500)
              + b"\x01\x02\x00"  # a garbled block
              + bytes.fromhex(next(v["frame"] for v in VECTORS["frames"]
                                   if v["name"] == "telemetry")))
    lines = dump_stream(stream)
    assert lines == [
        "SETPOINT seq=4 time_ms=1234 mode=POSITION position_urad=1.570796rad "
        "velocity_urad_s=-0.25rad/s torque_mNm=12.5N·m",
        "TELEMETRY seq=200 seq_echo=4 mcu_ticks=70000 setpoint_time_ms=1234 "
        "position_urad=1.570001rad velocity_urad_s=-0.249rad/s torque_mNm=12.4N·m state=ARMED "
        "fault=NONE limit_flags=POSITION_REFUSED|SLEW_LIMITED bad_frames=3 late_setpoints=1 "
        "seq_gaps=65535",
        "# 2 frames, 1 bad",
    ]
