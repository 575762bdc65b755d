"""The chart helper draws charts a person can read, checked on the SVG's structure: each series its own
colour, marker and dash, named in a legend; bands lighter than lines and under all of them; a y axis
fitted to the values with a tick at every tenth (0 to 1 for a reliability diagram, round steps for
counts); small bins drawn hollow, off the line, with their counts."""

import xml.etree.ElementTree as ET

from apps.charts import Series, line_chart

SVG = "{http://www.w3.org/2000/svg}"
SELECTORS = ["random", "execution", "judge", "hybrid", "oracle"]


def parsed(chart: str) -> ET.Element:
    return ET.fromstring(str(chart))


def all_of(svg: ET.Element, tag: str, kind: str = "") -> list[ET.Element]:
    return [e for e in svg.iter(f"{SVG}{tag}") if not kind or kind in e.get("class", "").split()]


def five_selectors() -> str:
    """best@k from 0.21 to 0.33, as a small dataset's are, each with a band (0.16 to 0.37)."""
    series = []
    for n, name in enumerate(SELECTORS):
        values = [0.21 + 0.01 * n, 0.25 + 0.01 * n, 0.29 + 0.01 * n]
        series.append(Series(name, list(zip((1, 2, 3), values)), band=[(v - 0.05, v + 0.04) for v in values]))
    return line_chart(series, x_label="k", y_label="best@k", x_range=(1, 3), title="best@k")


def test_each_series_has_its_colour_marker_and_legend_entry():
    svg = parsed(five_selectors())
    lines = all_of(svg, "polyline", "series")
    assert [line.get("data-series") for line in lines] == SELECTORS
    assert len({line.get("stroke") for line in lines}) == 5
    assert len({line.get("stroke-dasharray", "") for line in lines}) == 5
    shapes = {}
    for group in [g for g in svg.iter(f"{SVG}g") if g.get("class") == "series-group"]:
        for marker in group:
            if "marker" in marker.get("class", "").split():
                shapes.setdefault(group.get("data-series"), set()).add(marker.get("class").split()[1])
    assert all(len(found) == 1 for found in shapes.values()) and len(set.union(*shapes.values())) == 5
    legend = [e for e in svg.iter(f"{SVG}g") if e.get("class") == "legend-entry"]
    assert [e.find(f"{SVG}text").text for e in legend] == SELECTORS
    # Each legend entry shows its series' colour and marker.
    for entry, line in zip(legend, lines):
        assert entry.find(f"{SVG}line").get("stroke") == line.get("stroke")


def test_bands_are_lighter_than_lines_and_drawn_beneath_every_line():
    svg = parsed(five_selectors())
    drawn = [e for e in svg.iter() if e.get("class") in ("band", "series")]
    bands = [e for e in drawn if e.get("class") == "band"]
    lines = [e for e in drawn if e.get("class") == "series"]
    assert len(bands) == 5 and drawn[:5] == bands  # every band before the first line
    assert max(float(b.get("fill-opacity")) for b in bands) < min(float(line.get("stroke-opacity")) for line in lines)


def test_the_y_axis_is_fitted_to_the_values_with_a_tick_at_every_tenth():
    svg = parsed(five_selectors())
    ticks = [float(t.text) for t in all_of(svg, "text", "y-tick")]
    # Values 0.21-0.33 with bands 0.16-0.37: from 0.1 to 0.4, not 0 to 1.
    assert ticks == [0.1, 0.2, 0.3, 0.4]
    heights = [float(line.get("y1")) for line in all_of(svg, "line", "grid")]
    top, bottom = min(heights), max(heights)
    for line in all_of(svg, "polyline", "series"):
        assert all(top <= float(point.split(",")[1]) <= bottom for point in line.get("points").split())
    # A reliability diagram runs 0 to 1 on both axes, a tick at every tenth.
    diagram = parsed(line_chart([Series("judge", [(0.35, 0.2), (0.85, 0.9)])], x_label="P(YES)",
                                y_label="share resolved", x_range=(0, 1), diagonal=True, title="calibration"))
    assert [float(t.text) for t in all_of(diagram, "text", "y-tick")] == [n / 10 for n in range(11)]
    assert [float(t.text) for t in all_of(diagram, "text", "x-tick")] == [n / 10 for n in range(11)]
    # Counts run from 0 at round steps.
    counts = parsed(line_chart([Series("reviews", [(1, 3), (2, 47)])], x_label="week", y_label="reviews",
                               x_range=(1, 2), title="reviews", y_high=47))
    assert [t.text for t in all_of(counts, "text", "y-tick")] == ["0", "10", "20", "30", "40", "50"]
    assert [t.text for t in all_of(counts, "text", "x-tick")] == ["1", "2"]


def test_faint_points_are_hollow_off_the_line_and_every_point_carries_its_note():
    svg = parsed(line_chart([Series("judge", [(0.15, 0.0), (0.45, 0.5), (0.85, 0.8)], notes=["1", "12", "2"],
                                    faint=[True, False, True])], x_label="P(YES)", y_label="share",
                            x_range=(0, 1), diagonal=True, title="calibration"))
    group = next(g for g in svg.iter(f"{SVG}g") if g.get("class") == "series-group")
    markers = [m for m in group if "marker" in m.get("class", "")]
    assert ["faint" in m.get("class") for m in markers] == [True, False, True]
    assert all(m.get("fill") == "#ffffff" for m in markers if "faint" in m.get("class"))
    assert [t.text for t in group.iter(f"{SVG}text")] == ["1", "12", "2"]
    # One point left on the line: no line drawn through the hollow ones.
    assert all_of(svg, "polyline", "series") == []
