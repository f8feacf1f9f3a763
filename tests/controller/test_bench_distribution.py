"""The bench side installs alone: `pip install ./controller` into a fresh virtual environment
gives the `bemore-bench` command, which drives the simulated bench and replays its log without
bemore's scientific side."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller.protocol import load_spec
from controller.setpoints import write_setpoints
from tests.controller.gestures import make_gesture

ROOT = Path(__file__).resolve().parents[2]
NOT_INSTALLED = ("bemore", "scipy", "numba", "pymoo", "pyswarms", "ezc3d", "dask", "matplotlib")


def _run(argv: list[str], cwd: Path, timeout_s: float, **env: str) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s,
                            env={**os.environ, **env}, check=False)
    return result


@pytest.mark.slow
def test_the_bench_distribution_drives_and_replays_alone(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    created = _run([sys.executable, "-m", "venv", str(venv)], tmp_path, 120)
    assert created.returncode == 0, created.stderr[-3000:]
    python, bench = venv / "bin" / "python", venv / "bin" / "bemore-bench"
    # install a copy: the build writes build/ and *.egg-info beside the sources it is given
    source = tmp_path / "controller"
    shutil.copytree(ROOT / "controller", source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    installed = _run([str(python), "-m", "pip", "install", "--quiet", str(source)], tmp_path, 600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    # run from a folder without the checkout on the path: only the installed package is seen
    work = tmp_path / "bench-pc"
    work.mkdir()
    probe = _run([str(python), "-c", "import importlib.util as u, sys; "
                  f"print([m for m in {NOT_INSTALLED!r} if u.find_spec(m)]); "
                  "import controller; print(controller.__file__)"], work, 60,
                 PYTHONPATH="")
    assert probe.returncode == 0, probe.stderr
    absent, location = probe.stdout.splitlines()
    assert absent == "[]"  # none of bemore's scientific side is installed
    assert str(venv) in location

    setpoints = work / "setpoints.csv"
    write_setpoints(setpoints, make_gesture())
    log = work / "session.jsonl"
    # a dry run: the simulated bench is built from the checkout's firmware sources
    drive = _run([str(bench), "drive", str(setpoints), "--log", str(log), "--no-view"], work,
                 300, PYTHONPATH="", BEMORE_FIRMWARE=str(ROOT / "firmware"))
    assert drive.returncode == 0, drive.stdout[-2000:] + drive.stderr[-3000:]
    assert "gesture completed: ramped down and disarmed" in drive.stdout
    sent = int(drive.stdout.split("sent ")[1].split()[0])
    assert sent == 2701  # 2.4 s at 1 kHz + the 0.3 s ramp-down
    # the packaged protocol definition is the checkout's (the firmware reported the same hash)
    assert f'"protocol_hash": {load_spec().protocol_hash}' in log.read_text()

    replay = _run([str(bench), "replay", str(log)], work, 120, PYTHONPATH="")
    assert replay.returncode == 0, replay.stderr[-3000:]
    assert "(2701 setpoints" in replay.stdout
    assert "end         completed" in replay.stdout

    # without firmware sources a dry run is refused with one line (exit 2); so is --plot
    # without matplotlib
    alone = _run([str(bench), "drive", str(setpoints), "--log", str(work / "x.jsonl"),
                  "--no-view"], work, 120, PYTHONPATH="")
    assert alone.returncode == 2 and alone.stderr.count("\n") == 1, alone.stderr
    assert "set BEMORE_FIRMWARE" in alone.stderr
    plot = _run([str(bench), "replay", str(log), "--plot", str(work / "plots")], work, 120,
                PYTHONPATH="")
    assert plot.returncode == 2 and "needs matplotlib" in plot.stderr
