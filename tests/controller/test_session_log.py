"""Session log: header, records, crash tolerance (truncated last line), damage reported."""

from __future__ import annotations

import json

import pytest

from bemore.errors import DataError
from controller.log import LogWriter, read_log


def write_session(path, count=5):
    writer = LogWriter(path, {"athlete": "A. Gymnast", "settings": {"mode": "guided"}})
    for k in range(count):
        writer.setpoint(writer.origin + 0.001 * k, k=k, seq=k, time_ms=k, position_urad=100 * k,
                        velocity_urad_s=0, torque_mNm=-k, rep=1)
    writer.telemetry(writer.origin + 0.0045, {"seq_echo": 3, "mcu_ticks": 17, "state": 1})
    writer.event("stop", "gesture completed", reason="completed")
    return writer


def test_round_trip(tmp_path):
    path = tmp_path / "session.jsonl"
    write_session(path).close()
    log = read_log(path)
    assert log.header["format"] == "bemore-session 1"
    assert log.header["athlete"] == "A. Gymnast"
    assert log.setpoints["position_urad"].tolist() == [0, 100, 200, 300, 400]
    assert log.setpoints["host_time"].tolist() == pytest.approx([0, 0.001, 0.002, 0.003, 0.004])
    assert log.telemetry["mcu_ticks"].tolist() == [17]
    assert [event["kind"] for event in log.events] == ["stop"]
    assert log.end is None and not log.truncated


def test_records_reach_the_file_without_close(tmp_path):
    """What a SIGKILL leaves: the header and every event are on disk without close()."""
    path = tmp_path / "session.jsonl"
    writer = write_session(path)  # never closed, like a killed process
    log = read_log(path)
    assert len(log.setpoints["k"]) == 5  # flushed by the event
    assert log.events[0]["message"] == "gesture completed"
    writer.close()


def test_truncated_last_record_is_tolerated(tmp_path):
    path = tmp_path / "session.jsonl"
    write_session(path).close()
    text = path.read_text()
    path.write_text(text + '{"type": "sp", "host_time": 0.00')  # cut mid-write
    log = read_log(path)
    assert log.truncated
    assert len(log.setpoints["k"]) == 5


def test_damage_in_the_middle_names_the_line(tmp_path):
    path = tmp_path / "session.jsonl"
    write_session(path).close()
    lines = path.read_text().splitlines()
    lines[3] = lines[3][:10]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"session.jsonl: line 4: not a JSON record"):
        read_log(path)


def test_not_a_session_log(tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text(json.dumps({"type": "sp"}) + "\n")
    with pytest.raises(DataError, match="line 1: the session log must start with a header"):
        read_log(path)
    with pytest.raises(DataError, match="session log not found"):
        read_log(tmp_path / "missing.jsonl")
    # JSON records that are not objects: one line, not an AttributeError's traceback
    path.write_text("[1, 2]\n")
    with pytest.raises(DataError, match="line 1: the session log must start with a header"):
        read_log(path)
    path.write_text(json.dumps({"type": "header", "format": "bemore-session 1"}) + "\n[1]\n")
    assert read_log(path).events == []


def test_a_log_the_system_refuses_is_one_line_with_its_reason(tmp_path):
    # A file on the way: the path and the reason in words, not Python's error text
    # ("[Errno 20] Not a directory: '…'", or mkdir's "File exists" for the file itself).
    (tmp_path / "a-file").write_text("not a folder")
    for path, reason in ((tmp_path / "a-file" / "session.jsonl",
                          f"{tmp_path / 'a-file'} is a file, not a folder"),
                         (tmp_path / "a-file" / "logs" / "session.jsonl", "Not a directory")):
        with pytest.raises(DataError) as error:
            LogWriter(path, {})
        assert str(error.value) == f"{path}: cannot write the session log ({reason})"
