"""The setpoint file reader: the format of docs/formats.md, and one clear line for bad files."""

from __future__ import annotations

import hashlib
import math
from types import SimpleNamespace

import numpy as np
import pytest

from bemore.errors import DataError
from controller.setpoints import read_setpoints, write_setpoints
from tests.controller.gestures import make_gesture

BODY = """\
t_s,shoulder_angle_rad,shoulder_velocity_rad_s,shoulder_torque_nm
0.000,0.0,0.0,0.0
0.001,1.2e-09,4.8e-06,0.013
0.002,9.6e-09,9.6e-06,0.026
"""
EXAMPLE = f"""\
# format: bemore-setpoints 1
# rate_hz: 1000
# peak_angle_deg: 160.0
# peak_velocity_deg_s: 251.3
# peak_torque_nm: 41.2
# athlete: out/identify/athlete.json
# gesture: clear hip circle, t_f 2.405 s, t_flexmax 1.468 s, phi_max 160 deg
# rows: 3
# duration_s: 0.002
# sha256: {hashlib.sha256(BODY.encode()).hexdigest()}
""" + BODY


def write(tmp_path, text):
    path = tmp_path / "setpoints.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_the_documented_example(tmp_path):
    gesture = read_setpoints(write(tmp_path, EXAMPLE))
    assert gesture.rate_hz == 1000.0
    assert gesture.t_s.tolist() == [0.0, 0.001, 0.002]
    assert gesture.velocity_rad_s[1] == 4.8e-06
    assert gesture.torque_nm[2] == 0.026
    assert gesture.metadata["gesture"].startswith("clear hip circle, t_f 2.405 s")
    assert gesture.duration_s == 0.002


def test_round_trip_of_the_writer(setpoint_file, gesture):
    read = read_setpoints(setpoint_file)
    assert len(read.t_s) == 2401
    np.testing.assert_allclose(read.angle_rad, gesture.angle_rad, rtol=1e-8, atol=1e-12)
    assert math.degrees(max(read.angle_rad)) == pytest.approx(160.0, abs=1e-6)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: text.replace("# format: bemore-setpoints 1\n", ""),
         "missing metadata format"),
        (lambda text: text.replace("bemore-setpoints 1", "bemore-setpoints 2"),
         "expected 'bemore-setpoints 1'"),
        (lambda text: text.replace("rate_hz: 1000", "rate_hz: fast"), "rate_hz = 'fast'"),
        (lambda text: text.replace("shoulder_torque_nm\n", "torque\n"), "line 11: header"),
        (lambda text: text.replace("0.001,1.2e-09", "0.001,abc"), "line 13: not a number"),
        (lambda text: text.replace("0.001,1.2e-09", "0.001,nan"), "line 13: NaN"),
        (lambda text: text.replace("0.002,9.6e-09,", "0.0035,9.6e-09,"), "row 3 (t_s = 0.0035)"),
        (lambda text: text.replace(",0.026", ",0.026,1"), "line 14: 5 values"),
        (lambda text: text.replace("peak_torque_nm: 41.2", "peak_torque_nm: 0.01"),
         "0.026 exceeds the declared peak_torque_nm = 0.01"),
    ],
)
def test_bad_files_give_one_line_naming_the_place(tmp_path, edit, message):
    path = write(tmp_path, edit(EXAMPLE))
    with pytest.raises(DataError) as caught:
        read_setpoints(path)
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(str(path))
    assert message in text


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="setpoint file not found"):
        read_setpoints(tmp_path / "nope.csv")


def test_synthesis_output_is_read_back(tmp_path):
    """bemore.synthesis writes the completeness fields (rows, duration, hash) the reader checks."""
    from bemore.synthesis.outputs import write_setpoints as synthesis_write

    gesture = make_gesture()
    torque = np.asarray(gesture.torque_nm)
    profiles = SimpleNamespace(t_s=np.asarray(gesture.t_s), angle_rad=np.asarray(gesture.angle_rad),
                               velocity_rad_s=np.asarray(gesture.velocity_rad_s),
                               torque_per_shoulder_nm=torque,
                               static_torque_per_shoulder_nm=0.5 * torque)
    path = synthesis_write(tmp_path / "s.csv", profiles, 1000.0, "default", "x",
                           {"final_time_s": "2.400000"})
    read = read_setpoints(path)
    assert len(read.t_s) == 2401 and read.metadata["rows"] == "2401"
    np.testing.assert_allclose(read.torque_nm, torque, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(read.static_torque_nm, 0.5 * torque, rtol=1e-9, atol=1e-12)


@pytest.fixture
def full_file(tmp_path):
    path = tmp_path / "setpoints.csv"
    write_setpoints(path, make_gesture())
    return path


def test_a_file_cut_mid_row_is_refused(full_file):
    # cut inside the last number of a row: the row still parses, as a shorter number
    text = full_file.read_text()
    cut = text.index("\n", len(text) // 2) - 2
    full_file.write_text(text[:cut])
    with pytest.raises(DataError, match="partial last row"):
        read_setpoints(full_file)


def test_a_file_cut_to_half_its_rows_is_refused(full_file):
    lines = full_file.read_text().splitlines(keepends=True)
    full_file.write_text("".join(lines[:len(lines) // 2]))  # whole rows, final newline kept
    with pytest.raises(DataError, match=r"1195 rows of setpoints, the header declares 2401"):
        read_setpoints(full_file)


def test_the_rows_must_reach_the_declared_duration_and_final_time(full_file):
    text = full_file.read_text()
    # rows and hash consistent with a shorter file, duration kept: the duration check refuses
    lines = text.splitlines(keepends=True)
    head = [line for line in lines if line.startswith("#")]
    body = "".join(lines[len(head):len(head) + 1 + 1200])
    edited = "".join(head).replace("# rows: 2401", "# rows: 1200").replace(
        "# sha256: ", "# old: ") + f"# sha256: {hashlib.sha256(body.encode()).hexdigest()}\n"
    full_file.write_text(edited + body)
    with pytest.raises(DataError, match=r"last row at t_s = 1.199, the header declares "
                                        r"duration_s = 2.4"):
        read_setpoints(full_file)
    edited = edited.replace("# duration_s: 2.400000", "# duration_s: 1.199000")
    full_file.write_text(edited.replace("# athlete:", "# final_time_s: 2.4\n# athlete:") + body)
    with pytest.raises(DataError, match=r"the gesture ends at final_time_s = 2.4"):
        read_setpoints(full_file)


def test_a_changed_row_breaks_the_hash(full_file):
    text = full_file.read_text()
    index = text.index("\n1.000000,") + 1
    row_end = text.index("\n", index)
    cells = text[index:row_end].split(",")
    cells[3] = "99.5"  # a torque edited by hand, within the declared peak
    full_file.write_text(text[:index] + ",".join(cells) + text[row_end:])
    with pytest.raises(DataError, match="the rows do not match the header's sha256"):
        read_setpoints(full_file)


def test_a_crlf_resave_hashes_the_same(full_file):
    # docs/formats.md: the sha256 is of the body with every line ending read as \n, so a file
    # re-saved with CRLF line endings (a Windows editor) is accepted, the same gesture
    before = read_setpoints(full_file)
    data = full_file.read_bytes()
    assert b"\r\n" not in data
    full_file.write_bytes(data.replace(b"\n", b"\r\n"))
    after = read_setpoints(full_file)
    assert after.metadata == before.metadata
    assert np.array_equal(after.torque_nm, before.torque_nm)
