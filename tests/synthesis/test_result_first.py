"""``bemore synthesize`` writes its result (gesture.json, setpoints.csv, the console summary)
without waiting for its plots and GIF (drawn by a child process beside it), returns once both
are written, marks its phases when asked (BEMORE_PHASE_TIMES), loads no numba."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import bemore.synthesis.outputs as outputs
from bemore.cli import cli
from bemore.errors import DataError
from bemore.phases import read
from tests.synthesis.test_synthesize import NEAR_OPTIMUM, _config

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 120.0  # the longest the figures' process waits for the result before giving up


def test_the_result_does_not_wait_for_the_figures(tmp_path, monkeypatch) -> None:
    config = _config(tmp_path, "near.toml", NEAR_OPTIMUM)
    out = tmp_path / "gesture"
    marks = tmp_path / "phases.jsonl"
    seen = tmp_path / "seen.json"
    monkeypatch.setenv("BEMORE_PHASE_TIMES", str(marks))
    original = outputs.write_plots

    def plots_after_the_result(folder, *args, **kwargs):
        # The figures' process holds its plots until gesture.json is complete: were the
        # result waiting for the figures, this would time out and no figure would be written.
        deadline = time.monotonic() + WAIT_S
        while not (out / "gesture.json").is_file() or not _complete(out / "gesture.json"):
            if time.monotonic() > deadline:
                raise TimeoutError("the result was not written while the figures waited")
            time.sleep(0.01)
        seen.write_text(json.dumps(sorted(path.name for path in out.iterdir())))
        return original(folder, *args, **kwargs)

    monkeypatch.setattr(outputs, "write_plots", plots_after_the_result)
    result = CliRunner().invoke(
        cli, ["synthesize", "--synthesis-config", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    # when the plots started, the result was on disk (and no figure yet)
    files = set(json.loads(seen.read_text()))
    assert {"gesture.json", "setpoints.csv", "profiles.csv"} <= files
    assert "gesture.gif" not in files and "plots" not in files
    # the console gives the result before it announces the figures
    text = result.output
    assert text.index("every constraint holds") < text.index("plotting…")
    assert text.index("bench requirements") < text.index("plotting…")
    assert text.rstrip().endswith("plots/, gesture.gif")
    # the GIF and the plots are there when the command returns
    assert (out / "gesture.gif").read_bytes()[:6] in (b"GIF87a", b"GIF89a")
    assert len(list((out / "plots").glob("*.png"))) == 8
    assert json.loads((out / "gesture.json").read_text())["feasible"] is True
    phases = [(item["command"], item["phase"]) for item in read(marks)]
    assert phases == [("synthesize", name) for name in
                      ("start-up", "synthesis", "outputs", "figures")]
    instants = [item["end_unix_s"] for item in read(marks)]
    assert instants == sorted(instants)


def _complete(path: Path) -> bool:
    try:
        json.loads(path.read_text())
    except ValueError:
        return False
    return True


def test_a_figure_that_fails_is_one_line_and_exit_code_1(tmp_path, monkeypatch) -> None:
    config = _config(tmp_path, "near.toml", NEAR_OPTIMUM)
    out = tmp_path / "gesture"

    def broken(path, *args, **kwargs):
        raise OSError(f"{path}: disk full")

    monkeypatch.setattr(outputs, "write_animation", broken)
    result = CliRunner().invoke(
        cli, ["synthesize", "--synthesis-config", str(config), "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "the figures in" in result.output and "disk full" in result.output
    assert "Traceback" not in result.output
    # the result itself is complete
    assert json.loads((out / "gesture.json").read_text())["feasible"] is True


def test_an_output_the_system_refuses_is_the_whole_output_before_the_synthesis(
        tmp_path, monkeypatch, unwritable_folder) -> None:
    # A file where the output folder would go on the way, a folder that exists and that not
    # even root can write a file in (the fixture unwritable_folder), a folder where
    # profiles.csv goes, a file where the plots' folder goes, a folder where the animation
    # goes: each one line naming it, the whole output (nothing printed before it), exit code
    # 2, said before the synthesis starts.
    import bemore.synthesis.synthesize

    started = []
    monkeypatch.setattr(bemore.synthesis.synthesize, "synthesize",
                        lambda *args: started.append(args) or pytest.fail("synthesized"))
    config = _config(tmp_path, "near.toml", NEAR_OPTIMUM)
    (tmp_path / "a-file").write_text("not a folder")
    for name, folder in (("profiles.csv", True), (outputs.PLOTS_FOLDER, False),
                         (outputs.ANIMATION_FILE, True)):
        (tmp_path / name / "out").mkdir(parents=True)
        if folder:
            (tmp_path / name / "out" / name).mkdir()
        else:
            (tmp_path / name / "out" / name).write_text("not a folder")
    for out, expected in (
            (tmp_path / "a-file" / "g", "cannot create the output folder (Not a directory)"),
            (unwritable_folder, "cannot write in the output folder ("),
            (tmp_path / "profiles.csv" / "out",
             "profiles.csv: cannot write the output file (Is a directory)"),
            (tmp_path / "plots" / "out", "plots: output folder exists and is not a folder"),
            (tmp_path / "gesture.gif" / "out",
             "gesture.gif: cannot write the output file (Is a directory)")):
        result = CliRunner().invoke(
            cli, ["synthesize", "--synthesis-config", str(config), "--out", str(out)])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        (line,) = result.output.splitlines()
        separator = ": " if expected.startswith("cannot") else "/"
        assert line.startswith(f"bemore: error: {out}{separator}{expected}"), result.output
    assert started == []
    # Without the animation, a folder where it would go is not in the way: the synthesis
    # starts (here it stops there, with a line of its own).
    def reached(*args) -> None:
        raise DataError("the synthesis started")

    monkeypatch.setattr(bemore.synthesis.synthesize, "synthesize", reached)
    result = CliRunner().invoke(
        cli, ["synthesize", "--synthesis-config", str(config), "--no-animation",
              "--out", str(tmp_path / "gesture.gif" / "out")])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == "bemore: error: the synthesis started"


def test_a_bad_athlete_file_leaves_no_output_folder(tmp_path) -> None:
    result = CliRunner().invoke(
        cli, ["synthesize", str(tmp_path / "none.json"), "--out", str(tmp_path / "new" / "g")])
    assert result.exit_code == 2
    assert result.output == f"bemore: error: {tmp_path / 'none.json'}: athlete file not found\n"
    assert list(tmp_path.iterdir()) == []


def test_synthesize_loads_no_numba_matplotlib_pymoo_or_scipy_optimize(tmp_path) -> None:
    # Without os.fork (as where there is none) the figures are drawn in this same process, so
    # its modules after the command are those of the synthesis, the result and the figures.
    # SLSQP runs from scipy's compiled loop alone (bemore.optimize.slsqp, with the installed
    # scipy: tests/optimize/test_slsqp.py).
    config = _config(tmp_path, "near.toml", NEAR_OPTIMUM)
    code = (
        "import os, sys\n"
        "del os.fork\n"
        "from bemore.cli import cli\n"
        f"try:\n    cli(['synthesize', '--synthesis-config', {str(config)!r}, "
        f"'--out', {str(tmp_path / 'g')!r}], prog_name='bemore')\n"
        "except SystemExit as end:\n    assert end.code in (0, None), end.code\n"
        "print('loaded:', sorted(name for name in ('numba', 'matplotlib', 'pymoo', "
        "'scipy.optimize', 'scipy.linalg') if name in sys.modules))\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "BEMORE_PHASE_TIMES"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, env=env, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "loaded: []"
    assert (tmp_path / "g" / "gesture.gif").is_file()
    assert len(list((tmp_path / "g" / "plots").glob("*.png"))) == 8
