"""``bemore simulate`` end to end: files written, numbers consistent, bad input one line."""

from __future__ import annotations

import csv
import json

import numpy as np
from click.testing import CliRunner

from bemore.cli import cli


def test_simulate_writes_csv_plot_and_summary(tmp_path):
    out = tmp_path / "sim"
    result = CliRunner().invoke(cli, ["simulate", "--duration", "0.5", "--set",
                                      "bar.stiffness_y=20000", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "rotation about the bar" in result.output
    with (out / "trajectories.csv").open() as stream:
        rows = list(csv.DictReader(r for r in stream if not r.startswith("#")))
    assert len(rows) == 501
    first = rows[0]
    # Starts from spring equilibrium: the bar is pressed down by the gymnast in handstand.
    assert float(first["bar_y"]) < -0.005
    assert abs(float(first["hand_rotation"]) - np.radians(93.0)) < 1e-8
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parameters"]["bar.stiffness_y"] == 20000.0
    assert (out / "stick.png").stat().st_size > 10_000


def test_simulate_driven_csv_and_bad_inputs(tmp_path):
    driven = tmp_path / "phi.csv"
    t = np.arange(0, 0.301, 0.001)
    driven.write_text("t_s,shoulder_flexion\n" + "\n".join(f"{x:.3f},{0.5 * x:.6f}" for x in t))
    out = tmp_path / "ex"
    ok = CliRunner().invoke(cli, ["simulate", "--model", "exemplary_gymnast", "--driven",
                                  str(driven), "--out", str(out)])
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(cli, ["simulate", "--driven", str(driven), "--out", str(out)])
    assert bad.exit_code == 2
    assert "missing column 'wrist'" in bad.output
    unknown = CliRunner().invoke(cli, ["simulate", "--set", "bar.stifness=3", "--out", str(out)])
    assert unknown.exit_code == 2 and "unknown parameter 'bar.stifness'" in unknown.output
