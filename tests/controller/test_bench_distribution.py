"""The bench side installs alone: `pip install ./controller` into a fresh virtual environment
(no system site packages) gives the `bemore-bench` command, which drives the simulated bench and
replays its log without numpy or anything else of bemore's scientific side. The gesture file
is written here, by the test's own interpreter (numpy's side), and handed over as a file."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller.modes import POSITION_SCALE, TORQUE_SCALE
from controller.protocol import load_spec
from controller.setpoints import write_setpoints
from tests.controller.gestures import make_gesture

ROOT = Path(__file__).resolve().parents[2]
NOT_INSTALLED = ("numpy", "bemore", "scipy", "numba", "pymoo", "pyswarms", "ezc3d", "dask",
                 "matplotlib")


def _run(argv: list[str], cwd: Path, timeout_s: float, **env: str) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s,
                            env={**os.environ, **env}, check=False)
    return result


def _failed(result: subprocess.CompletedProcess) -> str:
    """What a subprocess printed, for an assertion's message (its stderr in full)."""
    return (f"exit {result.returncode}\n--- stdout ---\n{result.stdout[-3000:]}\n--- stderr "
            f"---\n{result.stderr}")


@pytest.mark.slow
def test_the_bench_distribution_drives_and_replays_alone(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # without pip (ensurepip alone takes longer than the whole install): this interpreter's pip
    # installs into it (pip --python)
    created = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, 120)
    assert created.returncode == 0, _failed(created)
    python, bench = venv / "bin" / "python", venv / "bin" / "bemore-bench"
    # install a copy: the build writes build/ and *.egg-info beside the sources it is given
    source = tmp_path / "controller"
    shutil.copytree(ROOT / "controller", source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    installed = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                      str(source)], tmp_path, 600)
    assert installed.returncode == 0, _failed(installed)
    # run from a folder without the checkout on the path: only the installed package is seen
    work = tmp_path / "bench-pc"
    work.mkdir()
    probe = _run([str(python), "-c", "import importlib.util as u, sys; "
                  f"print([m for m in {NOT_INSTALLED!r} if u.find_spec(m)]); "
                  "import controller; print(controller.__file__)"], work, 60,
                 PYTHONPATH="")
    assert probe.returncode == 0, _failed(probe)
    absent, location = probe.stdout.splitlines()
    assert absent == "[]"  # neither numpy nor any of bemore's scientific side is installed
    assert str(venv) in location
    numpy = _run([str(python), "-c", "import numpy"], work, 60, PYTHONPATH="")
    assert numpy.returncode == 1 and "No module named 'numpy'" in numpy.stderr, _failed(numpy)

    setpoints = work / "setpoints.csv"
    gesture = make_gesture()  # 0 → 160° → 0 in 2.4 s (sin²), at 1 kHz
    write_setpoints(setpoints, gesture)
    log = work / "session.jsonl"
    # a dry run: the simulated bench is built from the checkout's firmware sources
    drive = _run([str(bench), "drive", str(setpoints), "--log", str(log), "--no-view"], work,
                 300, PYTHONPATH="", BEMORE_FIRMWARE=str(ROOT / "firmware"))
    assert drive.returncode == 0, _failed(drive)
    assert "gesture completed: ramped down and disarmed" in drive.stdout
    sent = int(drive.stdout.split("sent ")[1].split()[0])
    assert sent == 2701  # 2.4 s at 1 kHz + the 0.3 s ramp-down
    # the packaged protocol definition is the checkout's (the firmware reported the same hash)
    assert f'"protocol_hash": {load_spec().protocol_hash}' in log.read_text()
    # what was sent is the gesture: slot k at k ms, its sin² angle truncated to µrad, and in the
    # passive mode the gesture's whole torque (truncated to mN·m) as feed-forward
    records = [json.loads(line) for line in log.read_text().splitlines()]
    setpoints_sent = [r for r in records if r["type"] == "sp"]
    assert [r["k"] for r in setpoints_sent] == list(range(2701))
    assert [r["time_ms"] for r in setpoints_sent] == list(range(2701))
    peak = setpoints_sent[1200]  # t = 1.2 s: the top of the gesture, 160°
    assert peak["position_urad"] == math.trunc(math.radians(160.0) / POSITION_SCALE) == 2792526
    assert peak["torque_mNm"] == math.trunc(gesture.torque_nm[1200] / TORQUE_SCALE)
    for k in (0, 300, 600, 1799, 2400):
        expected = math.trunc(gesture.angle_rad[k] / POSITION_SCALE)
        assert setpoints_sent[k]["position_urad"] == expected
    assert all(r["torque_mNm"] == 0 and r["velocity_urad_s"] == 0 for r in setpoints_sent[-1:])
    telemetry = [r for r in records if r["type"] == "tm"]
    assert len(telemetry) > 400  # a frame every 5 ms over 2.7 s
    measured_peak_deg = math.degrees(max(r["position_urad"] for r in telemetry) * POSITION_SCALE)
    assert measured_peak_deg == pytest.approx(160.0, abs=3.0)  # the simulated arms went up

    replay = _run([str(bench), "replay", str(log)], work, 120, PYTHONPATH="")
    assert replay.returncode == 0, _failed(replay)
    assert "(2701 setpoints" in replay.stdout
    assert "end         completed" in replay.stdout
    assert "faults      none" in replay.stdout
    # the peak commanded torque is the gesture's peak torque, printed at 0.1 N·m: make_gesture's
    # 25·sin(angle) + 2·acceleration lies between the inertial term's amplitude at t = 0
    # (2·A·2π²/T² = 19.1 N·m for A = 160°, T = 2.4 s) and the sum of both amplitudes (44.1)
    found = re.search(r"peak commanded ([\d.]+) N·m", replay.stdout)
    assert found, replay.stdout
    assert float(found[1]) == pytest.approx(max(map(abs, gesture.torque_nm)), abs=0.051)
    assert 19.1 < float(found[1]) < 44.1
    tracking = re.search(r"tracking    RMS ([\d.]+) deg, max ([\d.]+) deg", replay.stdout)
    assert tracking, replay.stdout
    assert 0.0 < float(tracking[1]) < 2.0 and float(tracking[1]) <= float(tracking[2]) < 5.0
    timing = re.search(r"period error p50 ([\d.]+) ms, p99 ([\d.]+) ms, max ([\d.]+) ms",
                       replay.stdout)
    assert timing, replay.stdout
    assert float(timing[1]) <= float(timing[2]) <= float(timing[3])

    # without firmware sources a dry run is refused with one line (exit 2); so is --plot
    # without matplotlib
    alone = _run([str(bench), "drive", str(setpoints), "--log", str(work / "x.jsonl"),
                  "--no-view"], work, 120, PYTHONPATH="")
    assert alone.returncode == 2 and alone.stderr.count("\n") == 1, _failed(alone)
    assert "set BEMORE_FIRMWARE" in alone.stderr
    plot = _run([str(bench), "replay", str(log), "--plot", str(work / "plots")], work, 120,
                PYTHONPATH="")
    assert plot.returncode == 2 and "needs matplotlib" in plot.stderr, _failed(plot)
