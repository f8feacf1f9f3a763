"""``bemore synthesize`` writes its result (gesture.json, setpoints.csv, the console summary)
before its plots and GIF, marks its phases when asked (BEMORE_PHASE_TIMES), loads no numba."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

import bemore.synthesis.outputs as outputs
from bemore.cli import cli
from bemore.phases import read
from tests.synthesis.test_synthesize import NEAR_OPTIMUM, _config

ROOT = Path(__file__).resolve().parents[2]


def test_the_result_is_written_before_the_figures(tmp_path, monkeypatch) -> None:
    config = _config(tmp_path, "near.toml", NEAR_OPTIMUM)
    out = tmp_path / "gesture"
    marks = tmp_path / "phases.jsonl"
    monkeypatch.setenv("BEMORE_PHASE_TIMES", str(marks))
    seen = {}
    original = outputs.write_plots

    def recording_plots(folder, *args, **kwargs):
        seen["files"] = sorted(path.name for path in out.iterdir())
        return original(folder, *args, **kwargs)

    monkeypatch.setattr(outputs, "write_plots", recording_plots)
    result = CliRunner().invoke(
        cli, ["synthesize", "--synthesis-config", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    # when the plots start, the result is already on disk (and no figure yet)
    assert {"gesture.json", "setpoints.csv", "profiles.csv"} <= set(seen["files"])
    assert "gesture.gif" not in seen["files"] and "plots" not in seen["files"]
    # the console gives the result before it announces the figures
    text = result.output
    assert text.index("every constraint holds") < text.index("plotting…")
    assert text.index("bench requirements") < text.index("plotting…")
    assert text.rstrip().endswith("plots/, gesture.gif")
    # the GIF and the plots are there after the command
    assert (out / "gesture.gif").read_bytes()[:6] in (b"GIF87a", b"GIF89a")
    assert len(list((out / "plots").glob("*.png"))) == 8
    assert json.loads((out / "gesture.json").read_text())["feasible"] is True
    phases = [(item["command"], item["phase"]) for item in read(marks)]
    assert phases == [("synthesize", name) for name in
                      ("start-up", "synthesis", "outputs", "plots", "animation")]
    instants = [item["end_unix_s"] for item in read(marks)]
    assert instants == sorted(instants)


def test_synthesize_loads_no_numba(tmp_path) -> None:
    config = _config(tmp_path, "near.toml", NEAR_OPTIMUM)
    code = (
        "import sys\n"
        "from bemore.cli import cli\n"
        f"try:\n    cli(['synthesize', '--synthesis-config', {str(config)!r}, '--no-animation', "
        f"'--out', {str(tmp_path / 'g')!r}], prog_name='bemore')\n"
        "except SystemExit as end:\n    assert end.code in (0, None), end.code\n"
        "print('numba loaded:', 'numba' in sys.modules)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "BEMORE_PHASE_TIMES"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, env=env, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "numba loaded: False"
