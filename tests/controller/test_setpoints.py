"""The setpoint file reader: the format of docs/formats.md, and one clear line for bad files."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bemore.errors import DataError
from controller.setpoints import read_setpoints

EXAMPLE = """\
# format: bemore-setpoints 1
# rate_hz: 1000
# peak_angle_deg: 160.0
# peak_velocity_deg_s: 251.3
# peak_torque_nm: 41.2
# athlete: out/identify/athlete.json
# gesture: clear hip circle, t_f 2.405 s, t_flexmax 1.468 s, phi_max 160 deg
t_s,shoulder_angle_rad,shoulder_velocity_rad_s,shoulder_torque_nm
0.000,0.0,0.0,0.0
0.001,1.2e-09,4.8e-06,0.013
0.002,9.6e-09,9.6e-06,0.026
"""


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
    assert math.degrees(read.angle_rad.max()) == pytest.approx(160.0, abs=1e-6)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: text.replace("# format: bemore-setpoints 1\n", ""),
         "missing metadata format"),
        (lambda text: text.replace("bemore-setpoints 1", "bemore-setpoints 2"),
         "expected 'bemore-setpoints 1'"),
        (lambda text: text.replace("rate_hz: 1000", "rate_hz: fast"), "rate_hz = 'fast'"),
        (lambda text: text.replace("shoulder_torque_nm\n", "torque\n"), "line 8: header"),
        (lambda text: text.replace("0.001,1.2e-09", "0.001,abc"), "line 10: not a number"),
        (lambda text: text.replace("0.001,1.2e-09", "0.001,nan"), "line 10: NaN"),
        (lambda text: text.replace("0.002,9.6e-09,", "0.0035,9.6e-09,"), "row 3 (t_s = 0.0035)"),
        (lambda text: text.replace(",0.026", ",0.026,1"), "line 11: 5 values"),
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
