"""``bemore trial inspect`` and ``bemore trial synth`` through the real command line group."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from bemore.cli import cli
from bemore.paths import data_dir

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
