"""identify's three plots are drawn with Pillow, in a process that never imports matplotlib
(its import was most of the plots' time), and show the measured and simulated curves."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from PIL import Image

from tests.waiting import eventually

SCRIPT = """
import json, sys
from pathlib import Path

import numpy as np

from bemore.identify import report

folder = Path(sys.argv[1])
t = np.linspace(0.0, 1.6, 1601)
names = ["bar", "wrist", "elbow", "neck", "hip", "knee", "ankle"]
# Seven joint centres swinging about the bar (m); the simulation 2 cm off in x.
radius = np.arange(1, 8)[None, :] * 0.25
angle = np.sin(2 * np.pi * t / 1.6)[:, None]
measured = np.stack([radius * np.sin(angle), -radius * np.cos(angle)], axis=-1)
simulated = measured + np.array([0.02, 0.0])
report.plot_trajectories(folder / "trajectories.png", t, measured, simulated, names)
report.plot_stick_figures(folder / "stick_figures.png", t, measured, simulated)
report.plot_convergence(folder / "convergence.png", [200, 400, 600, 700],
                        [2.0, 0.5, 0.01, 0.003], "gwo 200 × 50 + least-squares polish")
print(json.dumps({"matplotlib": "matplotlib" in sys.modules}))
"""

RED = np.array([214, 39, 40])
BLACK = np.array([0, 0, 0])


def _pixels_near(image: np.ndarray, colour: np.ndarray, tolerance: int = 40) -> int:
    return int(np.sum(np.all(np.abs(image.astype(int) - colour) <= tolerance, axis=-1)))


def test_plots_are_drawn_without_matplotlib_and_show_both_curves(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"matplotlib": False}
    sizes = {"trajectories.png": (800, 190 + 6 * 160), "stick_figures.png": (1580, 340),
             "convergence.png": (480, 320)}
    for name, size in sizes.items():
        with Image.open(tmp_path / name) as image:
            assert image.size == size, name
            pixels = np.asarray(image.convert("RGB"))
        if name == "convergence.png":
            assert _pixels_near(pixels, np.array([31, 119, 180])) > 200  # the cost's line
            continue
        # Measured in black, simulated in red (dashed): both drawn (nothing else is red: the
        # bar's marks are blue), over many pixels (2 cm apart, the chains mostly overlap).
        assert _pixels_near(pixels, BLACK, 60) > 500, name
        assert _pixels_near(pixels, RED) > (200 if name == "trajectories.png" else 50), name


# ``bemore identify`` draws its plots in a child process from the fit, beside the analysis and
# the result's writing; it returns once both are done (bemore.drawing).
SHORT_RUN = ("--no-polish", "--pack", "6", "--iterations", "2", "--seed", "3")
WAIT_S = 120.0  # the longest the plots' process waits for the result before giving up


def _complete_json(path) -> bool:
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return True


def _wait_for(ready, what: str) -> None:
    eventually(ready, bool, what, WAIT_S)


def test_identify_draws_its_plots_beside_the_analysis_and_the_result(tmp_path, monkeypatch
                                                                     ) -> None:
    from click.testing import CliRunner

    import bemore.identify.outputs as outputs
    import bemore.identify.run as run_module
    from bemore.cli import cli
    from bemore.paths import data_dir

    out, started, seen = tmp_path / "out", tmp_path / "plots-started", tmp_path / "seen.json"
    original_plots, original_analysis = outputs.write_plots, run_module._analysis

    def plots_after_the_result(folder, *args, **kwargs):
        # The plots' process says it has started, then holds its plots until athlete.json is
        # complete: were the result waiting for the plots, this would time out.
        started.write_text("started")
        # The result is athlete.json, then convergence.csv, then summary.txt (write_results):
        # athlete.json complete is not yet the whole result.
        _wait_for(lambda: _complete_json(out / "athlete.json")
                  and (out / "summary.txt").exists(),
                  "the result was not written while the plots waited")
        seen.write_text(json.dumps(sorted(path.name for path in out.iterdir())))
        return original_plots(folder, *args, **kwargs)

    def analysis_once_the_plots_started(*args, **kwargs):
        # Were the plots drawn after the analysis, this would time out.
        _wait_for(started.exists, "the plots did not start before the analysis")
        return original_analysis(*args, **kwargs)

    monkeypatch.setattr(outputs, "write_plots", plots_after_the_result)
    monkeypatch.setattr(run_module, "_analysis", analysis_once_the_plots_started)
    result = CliRunner().invoke(cli, ["identify", str(data_dir() / "sample_trial.c3d"),
                                      *SHORT_RUN, "--out", str(out)])
    assert result.exit_code == 1, result.output  # 12 simulations: a poor fit, all written
    files = set(json.loads(seen.read_text()))
    assert {"athlete.json", "convergence.csv", "summary.txt"} <= files
    assert not any(name.endswith(".png") for name in files)
    assert json.loads((out / "athlete.json").read_text())["fit_verdict"]["status"] == "poor"
    assert result.output.index("athlete.json, convergence.csv") < result.output.index(
        "trajectories.png")
    for name in ("trajectories.png", "stick_figures.png", "convergence.png"):
        with Image.open(out / name) as image:
            assert image.size[0] > 400, name


def test_identify_plots_that_fail_are_one_line_and_the_result_is_kept(tmp_path, monkeypatch
                                                                      ) -> None:
    from click.testing import CliRunner

    from bemore.cli import cli
    from bemore.identify import report
    from bemore.paths import data_dir

    def disk_full(path, *args, **kwargs):
        raise OSError(f"{path}: disk full")

    monkeypatch.setattr(report, "plot_convergence", disk_full)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["identify", str(data_dir() / "sample_trial.c3d"),
                                      *SHORT_RUN, "--out", str(out)])
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == (f"bemore: error: the plots in {out} were not written: "
                    f"{out}/convergence.png: disk full (trajectories.png, stick_figures.png "
                    "written); the result there is written and complete")
    assert "Traceback" not in result.output
    assert _complete_json(out / "athlete.json")
    assert (out / "trajectories.png").is_file()  # drawn before the one that failed
