"""The Pillow charts of the synthesis: ticks, and lines drawn where their data say."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from bemore.raster import COLOURS, Chart, nice_ticks, stick_animation, tick_label


@pytest.mark.parametrize(("low", "high", "count", "expected"), [
    (0.0, 2.96, 7, [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]),  # step 2.96/6 ≈ 0.49 → 0.5
    (0.0, 2.96, 6, [0.0, 1.0, 2.0, 3.0]),  # 2.96/5 ≈ 0.59 → 1
    (-112.0, 191.7, 6, [-200.0, -100.0, 0.0, 100.0, 200.0]),  # 60.7 → 100
    (0.0, 160.0, 6, [0.0, 50.0, 100.0, 150.0, 200.0]),  # 32 → 50
    (-0.004, 0.011, 6, [-0.005, 0.0, 0.005, 0.01, 0.015]),  # 0.003 → 0.005
])
def test_ticks_are_round_and_cover_the_range(low, high, count, expected) -> None:
    ticks = nice_ticks(low, high, count)
    assert ticks.tolist() == pytest.approx(expected)
    assert tick_label(2.5, 0.5) == "2.5" and tick_label(-100.0, 100.0) == "-100"
    assert tick_label(-1e-17, 0.5) == "0" and tick_label(7.5, 2.5) == "7.5"
    assert tick_label(0.015, 0.005) == "0.015" and tick_label(200.0, 50.0) == "200"


def _columns_of(image: Image.Image, colour: tuple[int, int, int]) -> np.ndarray:
    pixels = np.asarray(image.convert("RGB")).astype(int)
    close = np.abs(pixels - np.array(colour)).sum(axis=2) < 60
    return np.argwhere(close)


def test_a_line_is_drawn_where_its_values_are(tmp_path) -> None:
    # y = 10 on the left half, y = 30 on the right half: the blue pixels must sit on two rows,
    # the right one higher in the image (smaller row), split at the middle column
    chart = Chart("step", "x", "y")
    x = np.linspace(0.0, 2.0, 201)
    chart.line(x, np.where(x < 1.0, 10.0, 30.0), colour="tab:blue")
    chart.horizontal.append((20.0, "tab:red", "dashed", "limit"))
    path = chart.save(tmp_path / "step.png", (400, 300))
    with Image.open(path) as image:
        assert image.size == (400, 300)
        blue = _columns_of(image, COLOURS["tab:blue"])
        red = _columns_of(image, COLOURS["tab:red"])
    middle = np.median(blue[:, 1])
    left_rows = blue[blue[:, 1] < middle - 20][:, 0]
    right_rows = blue[blue[:, 1] > middle + 20][:, 0]
    assert np.ptp(left_rows) <= 3 and np.ptp(right_rows) <= 3
    # the dashed line at y = 20 lies halfway between the two levels (linear axis)
    red_row = np.median(red[red[:, 1] > 100][:, 0])  # skip the legend's sample
    assert red_row == pytest.approx(0.5 * (np.median(left_rows) + np.median(right_rows)), abs=2)


def test_the_stick_figure_moves_frame_by_frame(tmp_path) -> None:
    t = np.linspace(0.0, 1.0, 5)
    angle = np.linspace(0.0, np.pi, 5)
    tip = np.column_stack([np.cos(angle), np.sin(angle)])  # (5, 2): a half turn about the bar
    points = np.stack([np.zeros_like(tip), tip], axis=1)
    path = stick_animation(tmp_path / "g.gif", t, points, np.rad2deg(angle), range(5))
    with Image.open(path) as image:
        assert image.n_frames == 5
        image.seek(0)
        first = _columns_of(image, COLOURS["tab:red"])
        image.seek(4)
        last = _columns_of(image, COLOURS["tab:red"])
    # the figure points right at the start and left at the end (the bar is the image centre)
    assert first[:, 1].max() > last[:, 1].max() + 50
    assert last[:, 1].min() < first[:, 1].min() - 50
