"""Bad input gives one DataError line naming the file and the problem (never a traceback)."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.errors import DataError
from bemore.trial.pipeline import prepare_trial
from bemore.trial.readers import read_markers


def _one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_truncated_c3d(real_c3d, tmp_path):
    copy = tmp_path / "truncated.c3d"
    copy.write_bytes(real_c3d.read_bytes()[:1_000_000])
    with pytest.raises(DataError) as error:
        read_markers(copy)
    assert _one_line(error) == (
        f"{copy}: truncated C3D file (1000000 bytes, POINT:FRAMES declares 580 frames of 51 "
        "markers needing 2250816 bytes)"
    )


def test_c3d_truncated_inside_parameters(real_c3d, tmp_path):
    copy = tmp_path / "short.c3d"
    copy.write_bytes(real_c3d.read_bytes()[:3000])
    with pytest.raises(DataError, match=r"short\.c3d: truncated C3D file \(3000 bytes, parameter"):
        read_markers(copy)


def test_byte_corrupted_c3d_parameter_text(real_c3d, tmp_path):
    # Random bytes over part of the ANALOG:LABELS text (bytes 9580–9699 of the file): ezc3d
    # alone hangs on this copy; the guard refuses it.
    data = bytearray(real_c3d.read_bytes())
    data[9580:9700] = np.random.default_rng(3).integers(1, 32, 120, dtype=np.uint8).tobytes()
    copy = tmp_path / "corrupted.c3d"
    copy.write_bytes(bytes(data))
    with pytest.raises(DataError) as error:
        read_markers(copy)
    assert _one_line(error) == f"{copy}: corrupted C3D parameter LABELS (bad text)"


def test_byte_corrupted_c3d_record_size(real_c3d, tmp_path):
    # One byte: the description length of TRIAL:X_DIRECTION (file offset 625) set to 184 runs
    # past its record; ezc3d alone hangs on this copy.
    data = bytearray(real_c3d.read_bytes())
    data[625] = 184
    copy = tmp_path / "record.c3d"
    copy.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"corrupted C3D parameter X_DIRECTION \(data size\)"):
        read_markers(copy)


def test_byte_corrupted_c3d_header(real_c3d, tmp_path):
    data = bytearray(real_c3d.read_bytes())
    data[1] = 0x00  # the C3D key
    copy = tmp_path / "header.c3d"
    copy.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"header\.c3d: not a C3D file"):
        read_markers(copy)


@pytest.mark.parametrize("suffix", [".c3d", ".trc", ".csv"])
def test_empty_file(tmp_path, suffix):
    path = tmp_path / f"empty{suffix}"
    path.write_bytes(b"")
    with pytest.raises(DataError) as error:
        read_markers(path)
    assert _one_line(error) == f"{path}: empty file"


def test_unknown_extension_and_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"x\.txt: file not found"):
        read_markers(tmp_path / "x.txt")
    (tmp_path / "x.txt").write_text("1")
    with pytest.raises(DataError, match=r"unknown motion-capture format '\.txt'"):
        read_markers(tmp_path / "x.txt")


def test_csv_non_monotonic_time(tmp_path):
    path = tmp_path / "back.csv"
    path.write_text("# units: mm\ntime_s,C7_X,C7_Y,C7_Z\n0.00,1,2,3\n0.02,1,2,3\n0.01,1,2,3\n")
    with pytest.raises(DataError) as error:
        read_markers(path)
    assert _one_line(error) == f"{path}: time column not increasing at frame 3 (0.02 s then 0.01 s)"


def test_csv_without_units(tmp_path):
    path = tmp_path / "nounits.csv"
    path.write_text("time_s,C7_X,C7_Y,C7_Z\n0.00,1,2,3\n0.01,1,2,3\n")
    with pytest.raises(DataError, match=r"no '# units: mm\|cm\|m' line"):
        read_markers(path)


def test_trc_unknown_units(real_trc, tmp_path):
    lines = real_trc.read_text().splitlines()
    lines[2] = lines[2].replace(",mm,", ",inches,")
    copy = tmp_path / "inches.trc"
    copy.write_text("\n".join(lines))
    with pytest.raises(DataError, match=r"inches\.trc: TRC Units: unknown length unit 'inches'"):
        read_markers(copy)


def test_trc_declared_rate_disagrees_with_time(real_trc, tmp_path):
    lines = real_trc.read_text().splitlines()
    lines[2] = "50" + lines[2][3:]  # DataRate 100 → 50, time column still in 0.01 s steps
    copy = tmp_path / "rate.trc"
    copy.write_text("\n".join(lines))
    with pytest.raises(DataError) as error:
        read_markers(copy)
    assert _one_line(error) == (
        f"{copy}: declared rate 50 Hz disagrees with the time column (steps of 0.01 s, i.e. 100 Hz)"
    )


def test_trc_non_monotonic_time(real_trc, tmp_path):
    lines = real_trc.read_text().splitlines()
    cells = lines[10].split(",")
    cells[1] = "0.01"  # row 5 (t = 0.04 s) stamped 0.01 s
    lines[10] = ",".join(cells)
    copy = tmp_path / "time.trc"
    copy.write_text("\n".join(lines))
    with pytest.raises(DataError, match=r"time column not increasing at frame 5 \(0\.03 s then"):
        read_markers(copy)


def _blank(marker: str, first: int, last: int):
    def edit(markers):
        positions = markers.positions.copy()
        positions[first : last + 1, markers.find(marker)] = np.nan
        return markers.with_positions(positions)

    return edit


def test_missing_required_marker_is_named(write_trial):
    def drop(markers):
        keep = [i for i, label in enumerate(markers.labels) if not label.endswith("R_ELBOW")]
        from bemore.trial.markers import Markers

        return Markers(markers.t, markers.positions[:, keep],
                       tuple(markers.labels[i] for i in keep), markers.rate_hz, markers.source)

    path, *_ = write_trial(edit=drop)
    with pytest.raises(DataError) as error:
        prepare_trial(path)
    assert _one_line(error) == f"{path}: required marker(s) missing from the file: R_ELBOW"


def test_nan_only_marker_is_named(write_trial):
    path, *_ = write_trial(edit=_blank("Gymnast:L_KNEE_MED", 0, 200))
    with pytest.raises(DataError) as error:
        prepare_trial(path)
    assert _one_line(error) == (
        f"{path}: marker Gymnast:L_KNEE_MED has no valid sample (0.000–2.000 s)"
    )


def test_long_gap_is_refused_with_marker_and_time_range(write_trial):
    path, *_ = write_trial(edit=_blank("Gymnast:R_ULNA", 50, 69))
    with pytest.raises(DataError) as error:
        prepare_trial(path)
    assert _one_line(error) == (
        f"{path}: marker Gymnast:R_ULNA 0.500–0.690 s (20 frames) is missing for longer than "
        "the 0.1 s that can be filled ([gaps] max_gap_s)"
    )


def test_gap_at_the_start_asks_for_trimming(write_trial):
    path, *_ = write_trial(edit=_blank("Gymnast:C7", 0, 2))
    with pytest.raises(DataError, match=r"C7 0\.000–0\.020 s \(3 frames\) missing at the start"):
        prepare_trial(path)
