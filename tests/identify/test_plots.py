"""identify's three plots are drawn with Pillow, in a process that never imports matplotlib
(its import was most of the plots' time), and show the measured and simulated curves."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from PIL import Image

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
