"""The product's one chart helper: a line chart drawn as SVG on the server (no build step, no script),
y from 0 to 1 (or to a count's top), each series a line with its points, an optional band around it, and an optional
diagonal (for a reliability diagram). Pages show the numbers in a table beside every chart."""

from dataclasses import dataclass, field
from typing import Optional, Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 480, 280
LEFT, RIGHT, TOP, BOTTOM = 48, 120, 12, 40
COLOURS = ("#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#57606a")


@dataclass
class Series:
    name: str
    points: Sequence[tuple[float, Optional[float]]]  # (x, y); y None: a gap
    band: Sequence[tuple[float, float]] = field(default_factory=list)  # (low, high) per point


def line_chart(series: Sequence[Series], *, x_label: str, y_label: str, x_range: tuple[float, float],
               title: str, diagonal: bool = False, y_high: float = 1.0) -> SafeString:
    """The chart; y runs from 0 to `y_high` (1 for shares and rates, a count's top otherwise)."""
    x_low, x_high = x_range
    span = (x_high - x_low) or 1
    y_high = y_high or 1.0

    def x_at(x: float) -> float:
        return LEFT + (x - x_low) / span * (WIDTH - LEFT - RIGHT)

    def y_at(y: float) -> float:
        return TOP + (1 - max(0.0, min(1.0, y / y_high))) * (HEIGHT - TOP - BOTTOM)

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    for share in (0, 0.25, 0.5, 0.75, 1):
        tick = share * y_high
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y_at(tick):.1f}" y2="{y_at(tick):.1f}"/>'
                     f'<text class="tick" x="{LEFT - 6}" y="{y_at(tick) + 4:.1f}" text-anchor="end">{tick:.3g}</text>')
    for x in _x_ticks(x_low, x_high):
        parts.append(f'<text class="tick" x="{x_at(x):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{x:g}</text>')
    parts.append(f'<text class="label" x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 6}" text-anchor="middle">'
                 f'{escape(x_label)}</text><text class="label" x="12" y="{TOP + (HEIGHT - TOP - BOTTOM) / 2}" '
                 f'transform="rotate(-90 12 {TOP + (HEIGHT - TOP - BOTTOM) / 2})" text-anchor="middle">'
                 f'{escape(y_label)}</text>')
    if diagonal:
        parts.append(f'<line class="diagonal" x1="{x_at(x_low):.1f}" y1="{y_at(0):.1f}" x2="{x_at(x_high):.1f}" '
                     f'y2="{y_at(1):.1f}"/>')
    for index, line in enumerate(series):
        colour = COLOURS[index % len(COLOURS)]
        known = [(x, y) for x, y in line.points if y is not None]
        if line.band and len(line.band) == len(line.points):
            upper = [f"{x_at(x):.1f},{y_at(high):.1f}" for (x, _), (_, high) in zip(line.points, line.band)]
            lower = [f"{x_at(x):.1f},{y_at(low):.1f}" for (x, _), (low, _) in zip(line.points, line.band)]
            parts.append(f'<polygon class="band" fill="{colour}" points="{" ".join(upper + lower[::-1])}"/>')
        if known:
            path = " ".join(f"{x_at(x):.1f},{y_at(y):.1f}" for x, y in known)
            parts.append(f'<polyline class="series" stroke="{colour}" points="{path}"/>')
            parts.extend(f'<circle cx="{x_at(x):.1f}" cy="{y_at(y):.1f}" r="2.5" fill="{colour}"/>' for x, y in known)
        parts.append(f'<text class="legend" x="{WIDTH - RIGHT + 10}" y="{TOP + 14 + index * 16}" fill="{colour}">'
                     f'{escape(line.name)}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every text inside went through escape()


def _x_ticks(low: float, high: float) -> list[float]:
    if high - low <= 10:
        step = 1 if high - low >= 1 else 0.1
    else:
        step = max(1, round((high - low) / 8))
    ticks, x = [], low
    while x <= high + 1e-9:
        ticks.append(round(x, 6))
        x += step
    return ticks
