"""``bemore trial inspect`` and ``bemore trial synth`` through the real command line group."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.paths import data_dir
from bemore.trial.readers import read_markers

SAMPLE = data_dir() / "sample_trial.c3d"


def _run(*arguments: str):
    return CliRunner().invoke(cli, list(arguments))


def test_inspect_sample_prints_and_writes(tmp_path):
    result = _run("trial", "inspect", str(SAMPLE), "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "rate: 100 Hz, 161 frames, 1.600 s, lengths in mm (converted to m)" in out
    assert "markers: 57 in the file, 37 of the 37 the joint centres need" in out
    assert "gaps: 3 (0.10 % of marker samples missing)" in out
    assert "  Gymnast:BAR_08 0.400–0.430 s (4 frames)" in out
    assert "prepared: 1601 frames at 1000 Hz, 1.600 s" in out
    # The initial rotation rate about the bar, printed, is the truth's 1.364 rad/s to 0.01.
    rates = next(line for line in out.splitlines() if line.startswith("initial rates: "))
    assert abs(float(rates.split("hand_rotation ")[1].split(" rad/s")[0]) - 1.364) < 0.01
    centres = np.loadtxt(tmp_path / "joint_centres.csv", delimiter=",", skiprows=1)
    assert centres.shape == (1601, 21)
    header = (tmp_path / "driven.csv").read_text().splitlines()[0].split(",")
    assert header[:4] == ["t_s", "wrist_rad", "wrist_rad_s", "wrist_rad_s2"]
    assert len(header) == 28
    assert (tmp_path / "stick_figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert '"rate_hz_original": 100.0' in (tmp_path / "trial.json").read_text()


def test_inspect_real_file_reports_then_names_missing_markers(real_c3d):
    result = _run("trial", "inspect", str(real_c3d))
    assert result.exit_code == 2
    assert "rate: 100 Hz, 580 frames, 5.790 s" in result.stdout
    assert "markers: 51 in the file, 0 of the 37 the joint centres need" in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"bemore: error: {real_c3d}: required marker(s) missing from the "
                               "file: BAR_01, BAR_02")
    assert "Traceback" not in result.output


def test_inspect_corrupted_file_one_line(real_c3d, tmp_path):
    copy = tmp_path / "cut.c3d"
    copy.write_bytes(real_c3d.read_bytes()[:700_000])
    result = _run("trial", "inspect", str(copy))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"bemore: error: {copy}: truncated C3D file (700000 bytes, POINT:FRAMES declares 580 "
        "frames of 51 markers needing 2250816 bytes)"
    ]


def test_synth_refuses_bad_options(tmp_path):
    result = _run("trial", "synth", str(tmp_path / "x.c3d"), "--set", "trunk.mass")
    assert result.exit_code == 2
    assert "--set 'trunk.mass': expected NAME=NUMBER (SI units)" in result.stderr
    result = _run("trial", "synth", str(tmp_path / "x.c3d"), "--duration", "3")
    assert result.exit_code == 2
    assert "synthetic trial: duration 3 s outside 1.5–2.5 s" in result.stderr
    assert not (tmp_path / "x.c3d").exists()


def test_help_says_what_is_read_written_and_an_example():
    for command in ("inspect", "synth"):
        text = _run("trial", command, "--help").output
        assert "Reads:" in text and "Writes" in text and "Example:" in text


@pytest.mark.parametrize("name", ["x.trc", "x.csv", "x.txt", "x"])
def test_synth_refuses_a_name_it_cannot_write(tmp_path, name):
    # it writes C3D only: a .trc name had been written as x.trc.c3d (and printed as x.trc)
    output = tmp_path / name
    result = _run("trial", "synth", str(output))
    assert result.exit_code == 2
    written = output.suffix or "a name without a suffix"
    assert result.stderr.splitlines() == [
        f"bemore: error: {output}: trial synth writes a C3D file: name it .c3d (it has no "
        f"writer for {written})"]
    assert list(tmp_path.iterdir()) == []


def test_synth_writes_the_path_it_prints_and_never_overwrites(tmp_path):
    output = tmp_path / "new" / "Circle.C3D"  # the suffix in capitals: still the path named
    result = _run("trial", "synth", str(output), "--duration", "1.6", "--gaps", "0")
    assert result.exit_code == 0, result.output
    truth = tmp_path / "new" / "Circle.truth.json"
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"wrote {output} (161 frames")
    assert lines[-1] == f"wrote {truth} (ground truth)"
    assert sorted(p.name for p in output.parent.iterdir()) == ["Circle.C3D", "Circle.truth.json"]
    assert read_markers(output).n_frames == 161
    before = output.read_bytes()
    for existing in (output, truth):  # either file there: refused before any work
        if existing == truth:
            output.rename(tmp_path / "moved.c3d")
        again = _run("trial", "synth", str(output), "--duration", "1.6")
        assert again.exit_code == 2
        assert again.stderr.splitlines() == [
            f"bemore: error: {existing}: exists; trial synth never overwrites a file (give "
            "another name, or remove it)"]
    assert (tmp_path / "moved.c3d").read_bytes() == before
