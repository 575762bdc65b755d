"""The product's one chart helper: a line chart drawn as SVG on the server (no build step, no script).

Each series has a colour, a marker and a dash of its own (colour-blind-safe colours; the marker and
the dash tell series apart where colours fail or lines overlap), named in a legend. A band around a
series is drawn first and faint, so no band hides a line. The y axis is fitted to the data: shares
run between the tenths around the values drawn, with a tick at every tenth (a reliability diagram,
with its diagonal, runs from 0 to 1 on both axes); counts run from 0 at round steps. A point may
carry a note (a bin's count) and be drawn faint: hollow, grey and off the line, where too little is
behind it. Pages show the numbers in a table beside every chart."""

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 480, 280
LEFT, RIGHT, TOP, BOTTOM = 48, 120, 12, 40
# Okabe and Ito's palette: told apart with the common colour-vision deficiencies.
COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")
MARKERS = ("circle", "square", "triangle", "diamond", "cross", "triangle-down", "plus")
DASHES = ("", "6 3", "2 3", "8 3 2 3", "4 2 1 2", "1 2", "10 4")
LINE_OPACITY = 1.0
BAND_OPACITY = 0.12  # five overlapping bands stay lighter than any line
FAINT = "#8c959f"


@dataclass
class Series:
    name: str
    points: Sequence[tuple[float, Optional[float]]]  # (x, y); y None: a gap
    band: Sequence[tuple[float, float]] = field(default_factory=list)  # (low, high) per point
    notes: Sequence[str] = field(default_factory=list)  # per point, a word drawn beside it (a count)
    faint: Sequence[bool] = field(default_factory=list)  # per point: too little behind it, drawn hollow
    style: Optional[int] = None  # which colour, marker and dash: a series keeps its look when others are left out


def line_chart(series: Sequence[Series], *, x_label: str, y_label: str, x_range: tuple[float, float],
               title: str, diagonal: bool = False, y_high: Optional[float] = None) -> SafeString:
    """The chart. Without `y_high` the values are shares (0 to 1), the axis fitted to them; with it they
    are counts, the axis from 0 to `y_high`."""
    x_low, x_high = x_range
    span = (x_high - x_low) or 1
    if diagonal:
        y_low, y_top, y_ticks = 0.0, 1.0, _tenths(0.0, 1.0)
    elif y_high is not None:
        y_low, y_top, y_ticks = _count_axis(y_high)
    else:
        y_low, y_top, y_ticks = _share_axis([value for line in series for value in _values(line)])

    def x_at(x: float) -> float:
        return LEFT + (x - x_low) / span * (WIDTH - LEFT - RIGHT)

    def y_at(y: float) -> float:
        share = (y - y_low) / ((y_top - y_low) or 1)
        return TOP + (1 - max(0.0, min(1.0, share))) * (HEIGHT - TOP - BOTTOM)

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    for tick in y_ticks:
        label = f"{tick:.1f}" if y_high is None else f"{tick:g}"
        at = f"{y_at(tick):.1f}"
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{at}" y2="{at}"/>'
                     f'<text class="tick y-tick" x="{LEFT - 6}" y="{y_at(tick) + 4:.1f}" text-anchor="end">'
                     f'{label}</text>')
    for x in _x_ticks(x_low, x_high, tenths=diagonal):
        parts.append(f'<text class="tick x-tick" x="{x_at(x):.1f}" y="{HEIGHT - BOTTOM + 16}" '
                     f'text-anchor="middle">{x:g}</text>')
    parts.append(f'<text class="label" x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 6}" text-anchor="middle">'
                 f'{escape(x_label)}</text><text class="label" x="12" y="{TOP + (HEIGHT - TOP - BOTTOM) / 2}" '
                 f'transform="rotate(-90 12 {TOP + (HEIGHT - TOP - BOTTOM) / 2})" text-anchor="middle">'
                 f'{escape(y_label)}</text>')
    if diagonal:
        parts.append(f'<line class="diagonal" x1="{x_at(x_low):.1f}" y1="{y_at(0):.1f}" x2="{x_at(x_high):.1f}" '
                     f'y2="{y_at(1):.1f}"/>')
    styles = [index if line.style is None else line.style for index, line in enumerate(series)]
    for line, style in zip(series, styles):  # every band below every line
        if line.band and len(line.band) == len(line.points):
            upper = [f"{x_at(x):.1f},{y_at(high):.1f}" for (x, _), (_, high) in zip(line.points, line.band)]
            lower = [f"{x_at(x):.1f},{y_at(low):.1f}" for (x, _), (low, _) in zip(line.points, line.band)]
            parts.append(f'<polygon class="band" data-series="{escape(line.name)}" fill="{_colour(style)}" '
                         f'fill-opacity="{BAND_OPACITY}" points="{" ".join(upper + lower[::-1])}"/>')
    for line, style in zip(series, styles):
        parts.append(_series_drawn(line, style, x_at, y_at))
    for index, (line, style) in enumerate(zip(series, styles)):
        parts.append(_legend_entry(line.name, style, WIDTH - RIGHT + 10, TOP + 10 + index * 18))
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every text inside went through escape()


def _values(line: Series) -> list[float]:
    return [y for _, y in line.points if y is not None] + [v for band in line.band for v in band]


def _series_drawn(line: Series, style: int, x_at, y_at) -> str:
    colour, name = _colour(style), escape(line.name)
    faint = list(line.faint) + [False] * (len(line.points) - len(line.faint))
    notes = list(line.notes) + [""] * (len(line.points) - len(line.notes))
    drawn = [(x, y, is_faint, note) for (x, y), is_faint, note in zip(line.points, faint, notes) if y is not None]
    joined = [f"{x_at(x):.1f},{y_at(y):.1f}" for x, y, is_faint, _ in drawn if not is_faint]
    parts = [f'<g class="series-group" data-series="{name}">']
    if len(joined) > 1:
        path = " ".join(joined)
        parts.append(f'<polyline class="series" data-series="{name}" fill="none" stroke="{colour}" '
                     f'stroke-opacity="{LINE_OPACITY}"{_dash(style)} points="{path}"/>')
    for x, y, is_faint, note in drawn:
        parts.append(_marker(MARKERS[style % len(MARKERS)], x_at(x), y_at(y), FAINT if is_faint else colour,
                             faint=is_faint, series=name))
        if note:
            parts.append(f'<text class="note{" faint" if is_faint else ""}" x="{x_at(x) + 6:.1f}" '
                         f'y="{y_at(y) - 6:.1f}">{escape(note)}</text>')
    parts.append("</g>")
    return "".join(parts)


def _marker(shape: str, x: float, y: float, colour: str, *, faint: bool = False, series: str = "") -> str:
    """A point's marker; faint ones hollow. Each carries its shape in its class."""
    paint = f'fill="#ffffff" stroke="{colour}"' if faint else f'fill="{colour}" stroke="{colour}"'
    attributes = f'class="marker marker-{shape}{" faint" if faint else ""}" data-series="{series}" {paint}'
    r = 3.5
    if shape == "circle":
        return f'<circle {attributes} cx="{x:.1f}" cy="{y:.1f}" r="{r}"/>'
    if shape == "square":
        return f'<rect {attributes} x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" height="{2 * r}"/>'
    corners = {"triangle": [(0, -1.2), (1.1, 0.9), (-1.1, 0.9)],
               "triangle-down": [(0, 1.2), (1.1, -0.9), (-1.1, -0.9)],
               "diamond": [(0, -1.3), (1.3, 0), (0, 1.3), (-1.3, 0)]}.get(shape)
    if corners:
        points = " ".join(f"{x + dx * r:.1f},{y + dy * r:.1f}" for dx, dy in corners)
        return f'<polygon {attributes} points="{points}"/>'
    arms = ((-r, -r, r, r), (-r, r, r, -r)) if shape == "cross" else ((-r, 0, r, 0), (0, -r, 0, r))
    d = " ".join(f"M{x + a:.1f},{y + b:.1f} L{x + c:.1f},{y + e:.1f}" for a, b, c, e in arms)
    return f'<path {attributes} stroke-width="2" d="{d}"/>'


def _legend_entry(name: str, style: int, x: float, y: float) -> str:
    colour = _colour(style)
    return (f'<g class="legend-entry" data-series="{escape(name)}"><line x1="{x}" x2="{x + 22}" y1="{y}" y2="{y}" '
            f'stroke="{colour}" stroke-width="2"{_dash(style)}/>'
            + _marker(MARKERS[style % len(MARKERS)], x + 11, y, colour, series=escape(name))
            + f'<text class="legend" x="{x + 28}" y="{y + 4}">{escape(name)}</text></g>')


def _colour(style: int) -> str:
    return COLOURS[style % len(COLOURS)]


def _dash(style: int) -> str:
    dash = DASHES[style % len(DASHES)]
    return f' stroke-dasharray="{dash}"' if dash else ""


def _tenths(low: float, high: float) -> list[float]:
    return [round(tenth / 10, 1) for tenth in range(round(low * 10), round(high * 10) + 1)]


def _share_axis(values: list[float]) -> tuple[float, float, list[float]]:
    """From the tenth at or below the lowest value to the tenth at or above the highest, within 0 to 1,
    at least a tenth apart; a tick at every tenth."""
    if not values:
        return 0.0, 1.0, _tenths(0.0, 1.0)
    low = max(0.0, math.floor(min(values) * 10 + 1e-9) / 10)
    high = min(1.0, math.ceil(max(values) * 10 - 1e-9) / 10)
    if high - low < 0.1:
        low, high = (low, low + 0.1) if low < 0.9 else (0.9, 1.0)
    return low, high, _tenths(low, high)


def _count_axis(top: float) -> tuple[float, float, list[float]]:
    """From 0 to the first round step at or above `top`, a tick at each step (at most six)."""
    top = max(top, 1)
    step = _round_step(top / 5)
    high = math.ceil(top / step) * step
    return 0.0, float(high), [step * n for n in range(int(high / step) + 1)]


def _round_step(rough: float) -> float:
    """1, 2 or 5 times a power of ten, at or above `rough` (at least 1: counts are whole)."""
    power = 10 ** math.floor(math.log10(rough)) if rough > 0 else 1
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
    return max(1, step)


def _x_ticks(low: float, high: float, *, tenths: bool = False) -> list[float]:
    """Every tenth (of a share, or over a span under 1); else whole numbers at a round step, at most about
    ten."""
    if tenths or high - low < 1:
        return [round(low + n / 10, 6) for n in range(round((high - low) * 10) + 1)]
    step = _round_step((high - low) / 10)
    ticks, x = [], low
    while x <= high + 1e-9:
        ticks.append(round(x, 6))
        x += step
    return ticks
