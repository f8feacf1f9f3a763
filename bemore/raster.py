"""Line charts and the stick-figure animation of ``bemore identify`` and ``bemore synthesize``,
drawn with Pillow.

Why not matplotlib: its import alone costs about as much as the whole synthesis, and drawing
the eight figures and the GIF through it took 2.2–2.8 s of a 4.6–5 s ``bemore synthesize``;
drawn here straight into Pillow images they take ≈ 0.3 s of CPU (docs/speed.md). What a chart
holds: a title, axis labels, "nice" ticks with their values, a light grid, solid, dashed and
dotted lines, point marks with a caption, and a legend.

Charts are drawn at ``SUPERSAMPLE`` times their size and reduced (each pixel the mean of its
block), which smooths the lines. The font is DejaVu Sans, the one matplotlib ships (located,
not imported), else Pillow's own scalable default font. Colours are matplotlib's "tab" palette.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

SUPERSAMPLE = 2


def save_image(image: Image.Image, path: str | Path, **options: object) -> Path:
    """Write ``image`` at ``path`` in the format its suffix names (PNG, GIF; Pillow's
    ``options``), atomically (:func:`bemore.paths.write_file`: the previous file or the whole
    new one, never a cut image; a full disk is a DataError naming the file). Returns ``path``."""
    import io

    from bemore.paths import write_file

    buffer = io.BytesIO()
    image.save(buffer, format=Image.registered_extensions()[Path(path).suffix.lower()],
               **options)
    return write_file(path, buffer.getvalue())

COLOURS = {
    "tab:blue": (31, 119, 180), "tab:orange": (255, 127, 14), "tab:green": (44, 160, 44),
    "tab:red": (214, 39, 40), "tab:purple": (148, 103, 189), "grey": (128, 128, 128),
    "black": (0, 0, 0),
}
GRID = (225, 225, 225)
TEXT = (30, 30, 30)


def _font_file() -> str | None:
    """DejaVu Sans from matplotlib's data folder (located, not imported), or None."""
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "mpl-data/fonts/ttf/DejaVuSans.ttf"
    return str(path) if path.is_file() else None


_FONTS: dict[int, ImageFont.FreeTypeFont | ImageFont.ImageFont] = {}


def font(size_px: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """The charts' font at ``size_px`` pixels (cached)."""
    if size_px not in _FONTS:
        path = _font_file()
        _FONTS[size_px] = (ImageFont.truetype(path, size_px) if path
                           else ImageFont.load_default(size_px))
    return _FONTS[size_px]


def nice_ticks(low: float, high: float, count: int = 6) -> np.ndarray:
    """About ``count`` round tick values (1, 2, 2.5 or 5 × 10^k apart) covering [low, high]."""
    if not np.isfinite(low) or not np.isfinite(high):
        return np.array([0.0])
    if high <= low:
        high, low = low + 0.5 * (abs(low) or 1.0), low - 0.5 * (abs(low) or 1.0)
    raw = (high - low) / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    last = math.ceil(high / step - 1e-9) * step
    return first + step * np.arange(round((last - first) / step) + 1)


def tick_label(value: float, step: float) -> str:
    """A tick value with as many decimals as its spacing needs (no "-0")."""
    decimals = 0
    while decimals < 8 and abs(step * 10**decimals - round(step * 10**decimals)) > 1e-6:
        decimals += 1
    text = f"{value:.{decimals}f}"
    return "0" if float(text) == 0.0 else text


@dataclass
class Series:
    """One line of a chart: x, y (same length), colour name, width (px), style
    ("solid", "dashed", "dotted"), legend label (None: not in the legend)."""

    x: np.ndarray
    y: np.ndarray
    colour: str = "tab:blue"
    width: float = 1.5
    style: str = "solid"
    label: str | None = None


@dataclass
class Mark:
    """A point mark (x, y) with a caption beside it."""

    x: float
    y: float
    colour: str
    text: str


@dataclass
class Chart:
    """A line chart: title, axis labels and what it draws (data units)."""

    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    vertical: list[tuple[float, str, str, str | None]] = field(default_factory=list)
    horizontal: list[tuple[float, str, str, str | None]] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    legend_below: bool = False
    legend_columns: int = 2

    def line(self, x: np.ndarray, y: np.ndarray, **style: object) -> None:
        """Add a series (see :class:`Series` for the style keys)."""
        self.series.append(Series(np.asarray(x, float), np.asarray(y, float), **style))

    def save(self, path: Path, size_px: tuple[int, int]) -> Path:
        """Draw the chart at ``size_px`` (width, height) and write it as a PNG."""
        return save_image(self.draw(size_px), path, compress_level=1)

    # ------------------------------------------------------------------ drawing

    def _legend_entries(self) -> list[tuple[str, str, str]]:
        entries = [(s.label, s.colour, s.style) for s in self.series if s.label]
        entries += [(label, colour, style) for _, colour, style, label in
                    self.vertical + self.horizontal if label]
        return entries

    def _limits(self) -> tuple[float, float, float, float]:
        xs = [s.x[np.isfinite(s.x)] for s in self.series] + [np.array([v for v, *_ in
                                                                       self.vertical])]
        ys = [s.y[np.isfinite(s.y)] for s in self.series] + [np.array([v for v, *_ in
                                                                       self.horizontal])]
        ys += [np.array([m.y for m in self.marks])]
        xs += [np.array([m.x for m in self.marks])]
        x = np.concatenate([a for a in xs if a.size] or [np.zeros(1)])
        y = np.concatenate([a for a in ys if a.size] or [np.zeros(1)])
        x0, x1 = float(x.min()), float(x.max())
        y0, y1 = float(y.min()), float(y.max())
        pad = 0.05 * ((y1 - y0) or abs(y0) or 1.0)
        top = 2.5 * pad if self.marks else pad  # room for the marks' captions
        return x0, x1, y0 - pad, y1 + top

    def draw(self, size_px: tuple[int, int]) -> Image.Image:
        """The chart as an RGB image of ``size_px``."""
        k = SUPERSAMPLE
        width, height = size_px[0] * k, size_px[1] * k
        image = Image.new("RGB", (width, height), "white")
        pen = ImageDraw.Draw(image)
        small, normal = font(10 * k), font(12 * k)
        entries = self._legend_entries()
        rows = math.ceil(len(entries) / self.legend_columns) if self.legend_below else 0
        left, right, top = 70 * k, width - 15 * k, 30 * k
        bottom = height - (42 + 15 * rows) * k
        x0, x1, y0, y1 = self._limits()
        xt = nice_ticks(x0, x1, 7)
        yt = nice_ticks(y0, y1, 6)
        xt = xt[(xt >= x0 - 1e-9 * abs(x1 - x0)) & (xt <= x1 + 1e-9 * abs(x1 - x0))]
        yt = yt[(yt >= y0) & (yt <= y1)]
        sx = (right - left) / ((x1 - x0) or 1.0)
        sy = (bottom - top) / ((y1 - y0) or 1.0)

        def px(x: np.ndarray) -> np.ndarray:
            return left + (np.asarray(x, float) - x0) * sx

        def py(y: np.ndarray) -> np.ndarray:
            return bottom - (np.asarray(y, float) - y0) * sy

        for value in xt:
            pen.line([(px(value), top), (px(value), bottom)], fill=GRID, width=k)
            label = tick_label(float(value), float(xt[1] - xt[0]) if xt.size > 1 else 1.0)
            pen.text((px(value), bottom + 4 * k), label, fill=TEXT, font=small, anchor="ma")
        for value in yt:
            pen.line([(left, py(value)), (right, py(value))], fill=GRID, width=k)
            label = tick_label(float(value), float(yt[1] - yt[0]) if yt.size > 1 else 1.0)
            pen.text((left - 5 * k, py(value)), label, fill=TEXT, font=small, anchor="rm")
        for value, colour, style, _ in self.vertical:
            _styled(pen, [(px(value), top), (px(value), bottom)], COLOURS[colour], k, style)
        for value, colour, style, _ in self.horizontal:
            _styled(pen, [(left, py(value)), (right, py(value))], COLOURS[colour], k, style)
        for s in self.series:
            keep = np.isfinite(s.x) & np.isfinite(s.y)
            points = list(zip(px(s.x[keep]).tolist(), py(s.y[keep]).tolist(), strict=True))
            _styled(pen, points, COLOURS[s.colour], max(1, round(s.width * k)), s.style)
        for m in self.marks:
            cx, cy, r = float(px(m.x)), float(py(m.y)), 3.5 * k
            pen.ellipse([cx - r, cy - r, cx + r, cy + r], fill=COLOURS[m.colour])
            at_right = cx > left + 0.75 * (right - left)  # caption to the left near the edge
            pen.text((cx + (-6 if at_right else 6) * k, cy - 6 * k), m.text,
                     fill=COLOURS[m.colour], font=small, anchor="rd" if at_right else "ld")
        pen.rectangle([left, top, right, bottom], outline=TEXT, width=k)
        pen.text(((left + right) / 2, top - 8 * k), self.title, fill=TEXT, font=normal,
                 anchor="md")
        pen.text(((left + right) / 2, bottom + 20 * k), self.xlabel, fill=TEXT, font=normal,
                 anchor="ma")
        label = Image.new("RGB", (round(pen.textlength(self.ylabel, font=normal)) + 4 * k,
                                  16 * k), "white")
        ImageDraw.Draw(label).text((2 * k, 0), self.ylabel, fill=TEXT, font=normal)
        rotated = label.rotate(90, expand=True)
        image.paste(rotated, (4 * k, round((top + bottom) / 2 - rotated.height / 2)))
        if entries:
            self._legend(pen, entries, small, k, (left, right, top, bottom), height)
        return image.reduce(SUPERSAMPLE)

    def _legend(self, pen: ImageDraw.ImageDraw, entries: Sequence[tuple[str, str, str]],
                small: ImageFont.FreeTypeFont | ImageFont.ImageFont, k: int,
                box: tuple[float, float, float, float], height: int) -> None:
        left, right, top, bottom = box
        if self.legend_below:
            column = (right - left) / self.legend_columns
            for i, (text, colour, style) in enumerate(entries):
                x = left + (i % self.legend_columns) * column
                y = bottom + (38 + 15 * (i // self.legend_columns)) * k
                _styled(pen, [(x, y), (x + 22 * k, y)], COLOURS[colour], 2 * k, style)
                pen.text((x + 27 * k, y), text, fill=TEXT, font=small, anchor="lm")
            return
        widest = max(pen.textlength(text, font=small) for text, _, _ in entries)
        x, y = right - widest - 40 * k, top + 8 * k
        pen.rectangle([x - 6 * k, y - 6 * k, right - 6 * k, y + (15 * len(entries) - 3) * k],
                      fill="white", outline=GRID, width=k)
        for i, (text, colour, style) in enumerate(entries):
            yy = y + (15 * i + 4) * k
            _styled(pen, [(x, yy), (x + 22 * k, yy)], COLOURS[colour], 2 * k, style)
            pen.text((x + 27 * k, yy), text, fill=TEXT, font=small, anchor="lm")


def _styled(pen: ImageDraw.ImageDraw, points: list[tuple[float, float]],
            colour: tuple[int, int, int], width: int, style: str) -> None:
    """A polyline, solid or broken into dashes (dashed) or dots (dotted) along its length."""
    if len(points) < 2:
        return
    if style == "solid":
        pen.line(points, fill=colour, width=width, joint="curve")
        return
    on, off = (8.0, 5.0) if style == "dashed" else (2.0, 4.0)
    on, off = on * width, off * width
    xy = np.asarray(points, float)
    lengths = np.hypot(*np.diff(xy, axis=0).T)
    along = np.concatenate([[0.0], np.cumsum(lengths)])
    start = 0.0
    while start < along[-1]:
        stop = min(start + on, along[-1])
        piece = np.column_stack([np.interp([start, stop], along, xy[:, 0]),
                                 np.interp([start, stop], along, xy[:, 1])])
        pen.line([tuple(p) for p in piece.tolist()], fill=colour, width=width)
        start = stop + off


def stick_animation(path: Path, t_s: np.ndarray, points: np.ndarray, angle_deg: np.ndarray,
                    frames: Sequence[int], size_px: int = 400, duration_ms: int = 40) -> Path:
    """Animated GIF of a stick figure: ``points`` (F, P, 2) m joined in order, the bar at the
    origin, square axes in metres with ticks, one frame per index of ``frames``, each with the
    time (s) and shoulder angle (deg) as caption. Frames are palette images drawn directly
    (one fixed palette: no colour quantisation)."""
    palette_colours = [(255, 255, 255), TEXT, COLOURS["tab:red"], GRID, (0, 0, 0)]
    white, ink, red, grid, black = range(len(palette_colours))
    palette = [channel for colour in palette_colours for channel in colour]
    reach = float(np.nanmax(np.abs(points))) * 1.1 or 1.0
    left, top, right, bottom = 70, 40, size_px - 20, size_px - 50
    side = min(right - left, bottom - top)
    right, bottom = left + side, top + side
    scale = side / (2 * reach)

    def to_px(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return left + (x + reach) * scale, bottom - (y + reach) * scale

    background = Image.new("P", (size_px, size_px), white)
    background.putpalette(palette)
    pen = ImageDraw.Draw(background)
    small = font(11)
    ticks = nice_ticks(-reach, reach, 5)
    ticks = ticks[np.abs(ticks) <= reach + 1e-9]
    for value in ticks:
        (gx,), (gy,) = to_px(np.array([value]), np.array([value]))
        pen.line([(gx, top), (gx, bottom)], fill=grid)
        pen.line([(left, gy), (right, gy)], fill=grid)
        label = tick_label(float(value), float(ticks[1] - ticks[0]) if ticks.size > 1 else 1.0)
        pen.text((gx, bottom + 4), label, fill=ink, font=small, anchor="ma")
        pen.text((left - 5, gy), label, fill=ink, font=small, anchor="rm")
    pen.rectangle([left, top, right, bottom], outline=ink)
    pen.text(((left + right) / 2, bottom + 22), "x (m)", fill=ink, font=small, anchor="ma")
    pen.text((8, (top + bottom) / 2), "y (m)", fill=ink, font=small, anchor="lm")
    (bx,), (by,) = to_px(np.zeros(1), np.zeros(1))
    pen.ellipse([bx - 4, by - 4, bx + 4, by + 4], fill=black)
    caption_font = font(13)
    images = []
    for index in frames:
        frame = background.copy()
        draw = ImageDraw.Draw(frame)
        xs, ys = to_px(points[index, :, 0], points[index, :, 1])
        joints = list(zip(xs.tolist(), ys.tolist(), strict=True))
        draw.line(joints, fill=red, width=4, joint="curve")
        for x, y in joints:
            draw.ellipse([x - 4, y - 4, x + 4, y + 4], fill=red)
        draw.text(((left + right) / 2, top - 10),
                  f"t = {t_s[index]:.2f} s, shoulder {angle_deg[index]:.0f}°", fill=ink,
                  font=caption_font, anchor="md")
        images.append(frame)
    return save_image(images[0], path, save_all=True, append_images=images[1:],
                      duration=duration_ms, loop=0, optimize=False)
