"""Readers on the real laboratory files (values checked against independent readings)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from bemore.errors import DataError
from bemore.trial.readers import read_markers


def test_real_c3d_shape_rate_units_labels(real_c3d):
    markers = read_markers(real_c3d)
    assert markers.positions.shape == (580, 51, 3)
    assert markers.rate_hz == 100.0
    assert markers.unit_in_file == "mm"
    assert markers.labels[0] == "boite:gauche_ext"
    assert markers.labels[8] == "Daphnee:ASISr"
    assert markers.t[-1] == pytest.approx(5.79)
    # 305 missing samples (residual −1), each a NaN triplet: ~1 % of 580 × 51.
    assert np.isnan(markers.positions).sum() == 915
    assert markers.find("ASISr") == 8  # subject prefix optional in look-ups


def test_real_c3d_samples_match_raw_bytes(real_c3d):
    """Samples read straight from the file's bytes (float data, mm) agree with the reader (m)."""
    raw = real_c3d.read_bytes()
    data_start = (29 - 1) * 512  # header word 9 of this file
    frame_bytes = (51 * 4 + 760) * 4  # 51 points × (x, y, z, residual) + 760 analog samples
    first = struct.unpack("<3f", raw[data_start : data_start + 12])
    offset = data_start + 10 * frame_bytes + 8 * 16
    asis = struct.unpack("<3f", raw[offset : offset + 12])
    markers = read_markers(real_c3d)
    assert markers.positions[0, 0] * 1000 == pytest.approx(first, abs=1e-3)
    assert markers.positions[10, 8] * 1000 == pytest.approx(asis, abs=1e-3)
    assert asis == pytest.approx((667.2239, 305.4800, 175.2879), abs=1e-3)


def test_real_trc_values_read_by_hand(real_trc):
    markers = read_markers(real_trc)
    # The file declares 652 frames but holds 93 data rows: the rows are read, the
    # discrepancy is reported in the notes.
    assert markers.positions.shape == (93, 51, 3)
    assert markers.notes == ("header declares 652 frames, file holds 93",)
    assert markers.rate_hz == 100.0
    assert markers.t[-1] == pytest.approx(0.92)
    assert markers.labels[0] == "ASISl" and markers.labels[14] == "CLAV_SC"
    assert markers.labels[-1] == "boite_arriere_gauche"
    assert not np.isnan(markers.positions).any()
    # Row "1,0,733.7041,80.9832,191.8668", row 44 CLAV_SC, last row last marker (mm → m).
    assert markers.positions[0, 0] == pytest.approx([0.7337041, 0.0809832, 0.1918668])
    assert markers.positions[43, 14] == pytest.approx([0.7024015, 0.2496087, 0.6382355])
    assert markers.positions[92, 50] == pytest.approx([0.3467847, -0.0760879, 0.2298264])


def test_trc_in_metres_is_not_rescaled(real_trc, tmp_path):
    lines = real_trc.read_text().splitlines()
    lines[2] = lines[2].replace(",mm,", ",m,")
    copy = tmp_path / "metres.trc"
    copy.write_text("\n".join(lines))
    assert read_markers(copy).positions[0, 0, 0] == pytest.approx(733.7041)


def test_csv_reader(tmp_path):
    path = tmp_path / "trial.csv"
    path.write_text(
        "# units: mm\n"
        "time_s,Gymnast:C7_X,Gymnast:C7_Y,Gymnast:C7_Z\n"
        "0.00,1.0,2.0,3.0\n0.01,,,\n0.02,1.5,2.5,3.5\n"
    )
    markers = read_markers(path)
    assert markers.labels == ("Gymnast:C7",)
    assert markers.rate_hz == pytest.approx(100.0)
    assert markers.marker("C7")[0] == pytest.approx([0.001, 0.002, 0.003])
    assert np.isnan(markers.marker("C7")[1]).all()
    assert markers.marker("C7")[2] == pytest.approx([0.0015, 0.0025, 0.0035])


def test_c3d_round_trip_through_writer(tmp_path):
    from bemore.trial.c3d import write_c3d
    from bemore.trial.markers import Markers

    positions = np.array([[[0.1, 0.2, 0.3]], [[np.nan, np.nan, np.nan]], [[0.4, 0.5, 0.6]]])
    markers = Markers(np.arange(3) / 100.0, positions, ("Gymnast:C7",), 100.0, "x")
    write_c3d(tmp_path / "w.c3d", markers, "synthetic")
    back = read_markers(tmp_path / "w.c3d")
    assert back.labels == ("Gymnast:C7",) and back.rate_hz == 100.0
    assert back.positions[0, 0] == pytest.approx([0.1, 0.2, 0.3], abs=1e-6)
    assert np.isnan(back.positions[1, 0]).all()


def test_ambiguous_bare_label_is_refused(tmp_path):
    from bemore.trial.markers import Markers

    markers = Markers(np.arange(2) / 100.0, np.zeros((2, 2, 3)), ("A:C7", "B:C7"), 100.0, "f.c3d")
    with pytest.raises(DataError, match=r"marker C7 is ambiguous \(A:C7, B:C7\)"):
        markers.find("C7")
    assert markers.find("B:C7") == 1


def test_tab_separated_trc(real_trc, tmp_path):
    """OpenSim writes TRC with tabs; the same file with tabs reads to the same numbers."""
    copy = tmp_path / "tabs.trc"
    copy.write_text(real_trc.read_text().replace(",", "\t"))
    tabs, commas = read_markers(copy), read_markers(real_trc)
    assert tabs.labels == commas.labels
    assert np.array_equal(tabs.positions, commas.positions)
