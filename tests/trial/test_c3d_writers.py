"""C3D files from several writers and systems: each is read with the right rate, frames, labels
and units, or refused with one line that is true (tests/data/README.md says where each comes
from).

Writers: Vicon Nexus (the laboratory file in tests/data, which is also ezc3d's Vicon example),
the ``c3d`` package from PyPI, and tests/trial/c3d_bytes.py, an independent byte-level writer
that makes what those cannot (DEC and MIPS processor types, the Optotrak and Qualisys examples'
peculiarities, TRIAL fields past 65 535 frames).
"""

from __future__ import annotations

import ezc3d
import numpy as np
import pytest
from c3d_bytes import DEC, INTEL, MIPS, C3DSpec, Parameter, write_c3d_bytes
from click.testing import CliRunner
from conftest import REALDATA

from bemore.cli import cli
from bemore.errors import DataError
from bemore.trial.c3d import read_c3d

RNG = np.random.default_rng(7)
pytestmark = pytest.mark.filterwarnings("ignore:No analog data found:UserWarning")  # c3d package


def _points(frames: int, markers: int, missing: tuple[int, int] | None = (3, 1)) -> np.ndarray:
    """(F, M, 3) positions in mm on a 0.1 mm grid (exact in both storages), one sample missing."""
    points = np.round(RNG.uniform(-800.0, 1800.0, (frames, markers, 3)), 1)
    if missing is not None:
        points[missing] = np.nan
    return points


def _one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text and "Traceback" not in text
    return text


# --- Vicon: the laboratory file is ezc3d's own Vicon example -------------------------------------


def test_vicon_nexus_file_reads_as_ezc3d_s_test_describes_it(real_c3d) -> None:
    # ezc3d's test suite (readViconC3D) states these figures for its Vicon.c3d: 100 Hz, 580
    # frames, 51 points, Vicon Nexus 2.4.0.91647h, frame 0 point 0 x = 44.16278839111328 mm,
    # last frame point 50 z = 99.682586669921875 mm, sum of the valid coordinates 42506014.918...
    markers = read_c3d(real_c3d)
    assert markers.rate_hz == 100.0 and markers.n_frames == 580 and len(markers.labels) == 51
    assert markers.unit_in_file == "mm"
    mm = markers.positions * 1000.0
    assert mm[0, 0, 0] == pytest.approx(44.16278839111328, rel=1e-12)
    assert mm[-1, 50, 2] == pytest.approx(99.682586669921875, rel=1e-12)
    assert np.nansum(mm) == pytest.approx(42506014.918278672, rel=1e-9)
    manufacturer = ezc3d.c3d(str(real_c3d))["parameters"]["MANUFACTURER"]
    assert manufacturer["SOFTWARE"]["value"] == ["Vicon Nexus"]


# --- the c3d package (PyPI) ----------------------------------------------------------------------


def _write_with_c3d_package(path, points_mm: np.ndarray, labels: list[str], rate_hz: float,
                            scale: float) -> None:
    import c3d

    writer = c3d.Writer(point_rate=rate_hz, point_scale=scale, point_units="mm  ")
    writer.set_point_labels(labels)
    frames = []
    for frame in points_mm:
        block = np.zeros((len(labels), 5), np.float32)
        missing = np.isnan(frame).any(axis=1)
        block[:, :3] = np.where(missing[:, None], 0.0, frame)
        block[missing, 3] = -1.0  # residual < 0: not seen
        frames.append((block, np.zeros((0, 0), np.float32)))
    writer.add_frames(frames)
    with open(path, "wb") as handle:
        writer.write(handle)


@pytest.mark.parametrize("scale", [-1.0, 0.1], ids=["floating-point", "integer"])
def test_c3d_package_files_read_with_rate_frames_labels_units(tmp_path, scale) -> None:
    points = _points(50, 4)
    labels = ["Gymnast:C7", "Gymnast:STERNUM", "BAR_01", "BAR_02"]
    path = tmp_path / "c3d_package.c3d"
    _write_with_c3d_package(path, points, labels, 150.0, scale)
    markers = read_c3d(path)
    assert markers.rate_hz == 150.0 and markers.n_frames == 50
    assert markers.labels == tuple(labels) and markers.unit_in_file == "mm"
    # Integer storage: the package truncates position / scale toward zero (one 0.1 mm step at
    # most); floating point: float32.
    tolerance = scale * 1.0001 if scale > 0 else 1e-4
    assert np.isnan(markers.positions[3, 1]).all()
    np.testing.assert_allclose(markers.positions * 1000.0, points, atol=tolerance)


def test_c3d_package_trial_longer_than_65535_frames_keeps_its_own_count(tmp_path) -> None:
    # The package saturates POINT:FRAMES and the header at 65 535 and writes the true count in
    # TRIAL:ACTUAL_END_FIELD (and POINT:LONG_FRAMES). ezc3d reads such a file to its end, block
    # padding included; bemore keeps the trial's own 70 000 frames.
    n = 70_000
    points = np.zeros((n, 1, 3))
    points[:, 0, 0] = np.arange(n) % 1000
    points[:, 0, 2] = 1000.0
    path = tmp_path / "long.c3d"
    _write_with_c3d_package(path, points, ["M"], 1000.0, -1.0)
    assert ezc3d.c3d(str(path))["data"]["points"].shape[2] > n  # what ezc3d alone gives
    markers = read_c3d(path)
    assert markers.n_frames == n and markers.rate_hz == 1000.0
    np.testing.assert_allclose(markers.positions[:, 0, 0] * 1000.0, points[:, 0, 0], rtol=1e-12)
    assert markers.t[-1] == pytest.approx((n - 1) / 1000.0)


# --- processor types and storage (independent byte-level writer) ---------------------------------


@pytest.mark.parametrize("processor", [INTEL, DEC], ids=["Intel", "DEC"])
@pytest.mark.parametrize("scale", [-1.0, 0.1], ids=["floating-point", "integer"])
def test_intel_and_dec_files_read_the_same_positions(tmp_path, processor, scale) -> None:
    points = _points(40, 5)
    labels = [f"Subject:M{i}" for i in range(5)]
    path = tmp_path / "trial.c3d"
    write_c3d_bytes(path, C3DSpec(points, labels, 120.0, processor=processor, scale=scale))
    markers = read_c3d(path)
    assert markers.rate_hz == 120.0 and markers.n_frames == 40 and markers.labels == tuple(labels)
    np.testing.assert_allclose(markers.positions * 1000.0, points, atol=0.05 if scale > 0 else 1e-4)
    assert np.isnan(markers.positions[3, 1]).all() and not np.isnan(markers.positions[4]).any()


def test_units_in_metres_are_converted(tmp_path) -> None:
    points = _points(10, 2, missing=None) / 1000.0
    path = tmp_path / "metres.c3d"
    write_c3d_bytes(path, C3DSpec(points, ["A", "B"], 100.0, units=["m"]))
    markers = read_c3d(path)
    assert markers.unit_in_file == "m"
    np.testing.assert_allclose(markers.positions, points, rtol=1e-6)


def test_mips_file_is_refused_with_one_true_line(tmp_path) -> None:
    path = tmp_path / "sgi.c3d"
    write_c3d_bytes(path, C3DSpec(_points(10, 2), ["A", "B"], 100.0, processor=MIPS))
    with pytest.raises(DataError) as error:
        read_c3d(path)
    assert "MIPS processor type" in _one_line(error)
    # True: ezc3d itself does not read MIPS files.
    with pytest.raises(RuntimeError, match="MIPS"):
        ezc3d.c3d(str(path))


def test_more_than_255_markers_take_their_labels_from_labels2(tmp_path) -> None:
    labels = [f"M{i:03d}" for i in range(300)]
    path = tmp_path / "many.c3d"
    write_c3d_bytes(path, C3DSpec(_points(5, 300, missing=None), labels, 100.0))
    markers = read_c3d(path)
    assert markers.labels == tuple(labels)


# --- frame counts: parameters first, header words last -------------------------------------------


def _optotrak_like(path, frames: int = 30) -> np.ndarray:
    """The peculiarities of ezc3d's Optotrak example: 30 Hz, 54 markers, floating point with
    POINT:SCALE −7.8661418, one POINT:UNITS entry per marker, and header frame words that say
    1 to 1149 while POINT:FRAMES and the data say 30 frames."""
    points = _points(frames, 54)
    labels = [f"Marker_{i + 1}" for i in range(54)]
    write_c3d_bytes(path, C3DSpec(points, labels, 30.0, scale=-7.8661418, units=["mm"] * 54,
                                  header_last_frame=1149))
    return points


def _qualisys_like(path) -> np.ndarray:
    """The peculiarities of ezc3d's Qualisys example: 200 Hz, 55 markers, 69 analog channels at
    2000 Hz, floating point with POINT:SCALE −0.076232255, frames 705 to 1044 (340), a
    parameter section whose first two bytes are zero, a MANUFACTURER group."""
    points = _points(340, 55)
    labels = [f"Q{i + 1}" for i in range(55)]
    manufacturer = [Parameter("COMPANY", "char", ["Qualisys"]),
                    Parameter("SOFTWARE", "char", ["Qualisys Track Manager"]),
                    Parameter("VERSION", "int", [2, 17, 3720])]
    write_c3d_bytes(path, C3DSpec(
        points, labels, 200.0, scale=-0.076232255, first_frame=705,
        analog=RNG.normal(size=(340, 10, 69)), analog_rate_hz=2000.0,
        parameter_start_bytes=(0, 0), extra_groups={"MANUFACTURER": manufacturer}))
    return points


def test_optotrak_header_frame_words_are_not_trusted(tmp_path) -> None:
    path = tmp_path / "optotrak.c3d"
    points = _optotrak_like(path)
    markers = read_c3d(path)
    reference = ezc3d.c3d(str(path))  # what ezc3d reports for the same file
    assert reference["data"]["points"].shape[2] == 30
    assert markers.rate_hz == 30.0 and markers.n_frames == 30 and len(markers.labels) == 54
    assert markers.unit_in_file == "mm"
    np.testing.assert_allclose(markers.positions * 1000.0, points, atol=1e-4)
    assert markers.notes == ("header declares 1149 frames, POINT:FRAMES 30 (the parameters are "
                             "used)",)


def test_a_truncated_optotrak_file_is_still_refused(tmp_path) -> None:
    path = tmp_path / "optotrak.c3d"
    _optotrak_like(path)
    data = path.read_bytes()
    (tmp_path / "cut.c3d").write_bytes(data[: len(data) - 4096])
    with pytest.raises(DataError) as error:
        read_c3d(tmp_path / "cut.c3d")
    assert "truncated C3D file" in _one_line(error)
    assert "POINT:FRAMES declares 30 frames of 54 markers" in str(error.value)


def test_qualisys_file_reads_its_frames_markers_and_rate(tmp_path) -> None:
    path = tmp_path / "qualisys.c3d"
    points = _qualisys_like(path)
    reference = ezc3d.c3d(str(path))
    assert reference["header"]["points"]["first_frame"] == 704  # ezc3d counts from 0
    markers = read_c3d(path)
    assert markers.rate_hz == 200.0 and markers.n_frames == 340 and len(markers.labels) == 55
    np.testing.assert_allclose(markers.positions * 1000.0, points, atol=1e-4)


def test_trial_fields_give_the_length_of_a_trial_past_65535_frames(tmp_path) -> None:
    n = 66_000
    points = np.zeros((n, 1, 3))
    points[:, 0, 1] = np.arange(n) % 500
    path = tmp_path / "long.c3d"
    write_c3d_bytes(path, C3DSpec(points, ["M"], 2000.0, trial_fields=True))
    markers = read_c3d(path)
    assert markers.n_frames == n
    np.testing.assert_allclose(markers.positions[:, 0, 1] * 1000.0, points[:, 0, 1], rtol=1e-12)


def test_floating_point_frames_parameter_is_refused_with_one_true_line(tmp_path) -> None:
    path = tmp_path / "float_frames.c3d"
    write_c3d_bytes(path, C3DSpec(_points(10, 1, None), ["M"], 100.0, point_frames=10.0,
                                  point_frames_kind="float"))
    with pytest.raises(DataError) as error:
        read_c3d(path)
    assert "POINT:FRAMES is a floating-point number (10)" in _one_line(error)
    with pytest.raises(ValueError, match="FRAMES parameter is not an INT"):
        ezc3d.c3d(str(path))


def test_without_point_frames_the_header_words_count(tmp_path) -> None:
    path = tmp_path / "old_writer.c3d"
    write_c3d_bytes(path, C3DSpec(_points(25, 2), ["A", "B"], 50.0, point_frames=None))
    assert read_c3d(path).n_frames == 25


def test_units_that_differ_between_markers_are_refused(tmp_path) -> None:
    path = tmp_path / "units.c3d"
    write_c3d_bytes(path, C3DSpec(_points(5, 2), ["A", "B"], 50.0, units=["mm", "m"]))
    with pytest.raises(DataError) as error:
        read_c3d(path)
    assert "POINT:UNITS differ between markers (m, mm)" in _one_line(error)


# --- `bemore trial inspect` on the Optotrak and Qualisys look-alikes -----------------------------


@pytest.mark.parametrize("kind, first_line, markers_line", [
    ("optotrak", "rate: 30 Hz, 30 frames, 0.967 s, lengths in mm (converted to m)",
     "markers: 54 in the file, 0 of the 37 the joint centres need"),
    ("qualisys", "rate: 200 Hz, 340 frames, 1.695 s, lengths in mm (converted to m)",
     "markers: 55 in the file, 0 of the 37 the joint centres need"),
])
def test_inspect_reports_the_file_before_naming_the_missing_markers(
        tmp_path, kind, first_line, markers_line) -> None:
    path = tmp_path / f"{kind}.c3d"
    (_optotrak_like if kind == "optotrak" else _qualisys_like)(path)
    result = CliRunner().invoke(cli, ["trial", "inspect", str(path)])
    assert result.exit_code == 2, result.output
    lines = result.output.splitlines()
    assert first_line in lines and markers_line in lines
    error = [line for line in lines if line.startswith("bemore: error:")]
    assert len(error) == 1 and "required marker(s) missing from the file: BAR_01" in error[0]
    assert lines.index(first_line) < lines.index(error[0])


# --- real files of another laboratory (biomdp, MIT; tests/data/README.md) ------------------------

BIOMDP_VICON = REALDATA / "biomdp_vicon_CMJ.c3d"
BIOMDP_KISTLER = REALDATA / "biomdp_kistler_COP.c3d"


def test_another_laboratory_s_vicon_file_reads_as_ezc3d_reads_it() -> None:
    # Vicon Nexus 2.14 at 200 Hz with 31 analog channels at 2000 Hz, 7 % of the samples
    # missing: rate, frames, labels and every valid coordinate as ezc3d (the reference reader)
    # gives them, in metres.
    reference = ezc3d.c3d(str(BIOMDP_VICON))
    parameters = reference["parameters"]
    assert parameters["MANUFACTURER"]["VERSION_LABEL"]["value"] == ["2.14.0.139696h"]
    markers = read_c3d(BIOMDP_VICON)
    assert markers.rate_hz == parameters["POINT"]["RATE"]["value"][0] == 200.0
    assert markers.n_frames == parameters["POINT"]["FRAMES"]["value"][0] == 1600
    assert list(markers.labels) == parameters["POINT"]["LABELS"]["value"]
    assert len(markers.labels) == 42 and markers.unit_in_file == "mm"
    expected_m = np.transpose(reference["data"]["points"][:3], (2, 1, 0)) / 1000.0  # (F, M, 3)
    seen = np.isfinite(markers.positions)
    np.testing.assert_array_equal(seen, np.isfinite(expected_m))
    np.testing.assert_allclose(markers.positions[seen], expected_m[seen], rtol=0, atol=1e-12)
    assert 0.06 < 1.0 - seen.mean() < 0.08


def test_inspect_reads_another_laboratory_s_file_before_naming_the_missing_markers() -> None:
    result = CliRunner().invoke(cli, ["trial", "inspect", str(BIOMDP_VICON)])
    assert result.exit_code == 2, result.output
    lines = result.output.splitlines()
    first = "rate: 200 Hz, 1600 frames, 7.995 s, lengths in mm (converted to m)"
    assert first in lines and "markers: 42 in the file, 0 of the 37 the joint centres need" in lines
    error = [line for line in lines if line.startswith("bemore: error:")]
    assert len(error) == 1 and "required marker(s) missing from the file: BAR_01" in error[0]
    assert lines.index(first) < lines.index(error[0])


def test_an_analog_only_file_is_refused_with_one_true_line() -> None:
    # Kistler BioWare's export of a force-plate recording: 8 analog channels at 1000 Hz, no
    # POINT group at all (ezc3d fills in an empty one).
    reference = ezc3d.c3d(str(BIOMDP_KISTLER))
    assert reference["parameters"]["POINT"]["USED"]["value"][0] == 0
    assert reference["parameters"]["ANALOG"]["USED"]["value"][0] == 8
    with pytest.raises(DataError) as error:
        read_c3d(BIOMDP_KISTLER)
    assert _one_line(error) == (
        f"{BIOMDP_KISTLER}: no marker data: the C3D file has no POINT group and its header "
        "declares 0 points (analog channels only: 8 samples per frame)")
