"""Small charts written straight to SVG text: panels of points, lines and reference rules on a
linear or log2 axis, with the legend as HTML beside them.

Why our own: the report used to draw through Vega-Lite in a JavaScript engine (vl-convert), and
starting that engine cost most of `scm-xl report`'s CPU time. These charts need little: points,
straight segments, a few ticks. What they draw is plain SVG with no script and no external
reference, so the page stays one offline file.

Why the legend is HTML: the browser lays its words out, so legend texts never collide with each
other or with the plot, and they wrap on a narrow screen instead of shrinking with the drawing.
Every series has its own colour *and* marker (and, for lines, dash) where two factors meet, so
the legend tells them apart in print and for colour-blind readers too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Iterable, Literal, Sequence

FONT = "system-ui, -apple-system, 'Segoe UI', 'Noto Sans CJK SC', 'PingFang SC', 'Microsoft YaHei', sans-serif"
# One panel's drawing units. Shown at 100% of its column: about 1.2x on a desktop's half width,
# 0.85x on a 390 px phone, so the 13-unit tick labels stay 11 px or more.
WIDTH, HEIGHT = 420, 270
TICK_FONT, TITLE_FONT, RULE_FONT = 13, 14, 12
CHAR_WIDTH = 0.6  # a character's width as a share of the font size (digits; for the margins)
# Colour-blind-safe (Okabe-Ito without its yellow, then Tol's dark hues); a sequential ramp
# (viridis) beyond that many levels.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#332288", "#882255",
           "#117733", "#555555")
VIRIDIS = ("#440154", "#3b528b", "#21918c", "#5ec962", "#b5a300")  # the last darkened to read on white
MARKERS = ("circle", "square", "triangle", "diamond", "triangle-down", "plus", "star", "cross")
DASHES = ("", "7 4", "2 3", "10 3 2 3", "4 2 4 6")
NEUTRAL = "#444444"

Marker = Literal["circle", "square", "triangle", "diamond", "triangle-down", "plus", "star", "cross", "swatch",
                 "none"]


def colours(count: int) -> list[str]:
    """`count` distinct colours: the palette, or the ramp sampled evenly beyond it."""
    if count <= len(PALETTE):
        return list(PALETTE[:count])
    return [_ramp(i / max(count - 1, 1)) for i in range(count)]


def _ramp(t: float) -> str:
    span = (len(VIRIDIS) - 1) * t
    i = min(int(span), len(VIRIDIS) - 2)
    f = span - i
    a, b = (tuple(int(c[k:k + 2], 16) for k in (1, 3, 5)) for c in (VIRIDIS[i], VIRIDIS[i + 1]))
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))


def marker(i: int) -> Marker:
    return MARKERS[i % len(MARKERS)]  # type: ignore[return-value]


def dash(i: int) -> str:
    return DASHES[i % len(DASHES)]


@dataclass(frozen=True)
class Style:
    colour: str
    marker: Marker = "circle"
    dash: str = ""  # the line's stroke-dasharray; "" is solid
    filled: bool = True


@dataclass(frozen=True)
class Series:
    """Points (kind "points", each with an optional hover text) or one polyline (kind "line")."""
    style: Style
    points: Sequence[tuple[float, float]]
    kind: Literal["points", "line"] = "points"
    tips: Sequence[str] = ()


@dataclass(frozen=True)
class Rule:
    """A horizontal reference line across the panel, labelled at its left end."""
    y: float
    label: str
    style: Style


@dataclass(frozen=True)
class Axis:
    title: str  # with its unit
    log2: bool = False
    ticks: Sequence[float] = ()  # a log2 axis's ticks: the measured levels
    zero: bool = True  # a linear axis starts at 0


@dataclass(frozen=True)
class Panel:
    title: str | None
    series: Sequence[Series]
    rules: Sequence[Rule] = ()
    diagonal: bool = False  # the y = x line
    # Panels of one figure drawn with `share_y` off share a y scale when they name the same group
    # (the same metric at two prompt levels); "" is a scale of its own.
    y_group: str = ""


@dataclass(frozen=True)
class LegendEntry:
    label: str
    style: Style
    line: bool = False  # draw the line through the key


@dataclass(frozen=True)
class LegendGroup:
    title: str | None
    entries: Sequence[LegendEntry] = field(default_factory=list)


# ---------------------------------------------------------------------------- scales

@dataclass(frozen=True)
class Scale:
    low: float
    high: float
    log2: bool
    ticks: tuple[float, ...]
    step: float  # a linear axis's tick step (for the labels' decimals); 0 on log2

    def unit(self, value: float) -> float:
        """The value's place on the axis, 0 at `low` and 1 at `high`."""
        if self.log2:
            return (math.log2(value) - math.log2(self.low)) / (math.log2(self.high) - math.log2(self.low))
        return (value - self.low) / (self.high - self.low)

    def label(self, value: float) -> str:
        if self.log2 or self.step == 0:
            return _plain(value)
        decimals = max(0, -math.floor(math.log10(self.step) + 1e-9))
        return f"{value:.{decimals}f}"


def _plain(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def _nice_step(span: float, count: int = 5) -> float:
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * power >= raw:
            return factor * power
    return 10 * power


def linear_scale(values: Iterable[float], *, zero: bool = True) -> Scale:
    """The data's range (from 0 when `zero`), 4% of it spare at each free end so no mark sits on
    the frame, and round ticks inside it: no empty stretch out to the next round number."""
    data = [v for v in values if math.isfinite(v)]
    low, high = (min(data), max(data)) if data else (0.0, 1.0)
    if zero:
        low, high = min(low, 0.0), max(high, 0.0)
    if high <= low:
        pad = abs(high) * 0.1 or 1.0
        low, high = (low if zero and low == 0 else low - pad), high + pad
    spare = (high - low) * 0.04
    low, high = (low if zero and low == 0 else low - spare), (high if zero and high == 0 else high + spare)
    step = _nice_step(high - low)
    first = math.ceil(low / step - 1e-9)
    ticks = tuple(k * step for k in range(first, math.floor(high / step + 1e-9) + 1))
    return Scale(low, high, False, ticks, step)


def log2_scale(values: Iterable[float], ticks: Sequence[float]) -> Scale:
    data = [v for v in values if v > 0] + [t for t in ticks if t > 0]
    low, high = (min(data), max(data)) if data else (1.0, 2.0)
    span = math.log2(high) - math.log2(low)
    pad = max(span * 0.06, 0.25)
    shown = tuple(sorted({float(t) for t in ticks if t > 0})) or (low, high)
    return Scale(low / 2 ** pad, high * 2 ** pad, True, shown, 0.0)


def scale_for(axis: Axis, values: Iterable[float]) -> Scale:
    return log2_scale(values, axis.ticks) if axis.log2 else linear_scale(values, zero=axis.zero)


# ---------------------------------------------------------------------------- drawing

def _n(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def marker_path(kind: Marker, x: float, y: float, r: float = 4.5) -> str:
    """The SVG path data of one marker centred on (x, y)."""
    if kind == "circle":
        return f"M{_n(x - r)},{_n(y)}a{_n(r)},{_n(r)} 0 1,0 {_n(2 * r)},0a{_n(r)},{_n(r)} 0 1,0 {_n(-2 * r)},0Z"
    if kind in ("square", "swatch"):
        s = r * 0.88
        return f"M{_n(x - s)},{_n(y - s)}h{_n(2 * s)}v{_n(2 * s)}h{_n(-2 * s)}Z"
    if kind == "triangle":
        return f"M{_n(x)},{_n(y - 1.2 * r)}L{_n(x + 1.1 * r)},{_n(y + 0.8 * r)}L{_n(x - 1.1 * r)},{_n(y + 0.8 * r)}Z"
    if kind == "triangle-down":
        return f"M{_n(x)},{_n(y + 1.2 * r)}L{_n(x + 1.1 * r)},{_n(y - 0.8 * r)}L{_n(x - 1.1 * r)},{_n(y - 0.8 * r)}Z"
    if kind == "diamond":
        d = 1.25 * r
        return f"M{_n(x)},{_n(y - d)}L{_n(x + d)},{_n(y)}L{_n(x)},{_n(y + d)}L{_n(x - d)},{_n(y)}Z"
    if kind == "star":
        points = []
        for k in range(10):
            radius = 1.3 * r if k % 2 == 0 else 0.55 * r
            angle = math.pi / 2 + k * math.pi / 5
            points.append(f"{_n(x + radius * math.cos(angle))},{_n(y - radius * math.sin(angle))}")
        return "M" + "L".join(points) + "Z"
    if kind == "plus":
        d = 1.15 * r
        return f"M{_n(x - d)},{_n(y)}H{_n(x + d)}M{_n(x)},{_n(y - d)}V{_n(y + d)}"
    if kind == "cross":
        d = 0.95 * r
        return f"M{_n(x - d)},{_n(y - d)}L{_n(x + d)},{_n(y + d)}M{_n(x - d)},{_n(y + d)}L{_n(x + d)},{_n(y - d)}"
    return ""


def _stroke_only(kind: Marker) -> bool:
    return kind in ("plus", "cross")


def _marker_attrs(style: Style) -> str:
    if _stroke_only(style.marker):
        return f'fill="none" stroke="{style.colour}" stroke-width="2"'
    if style.filled:
        return f'fill="{style.colour}" fill-opacity="0.9" stroke="#fff" stroke-width="0.6"'
    return f'fill="#fff" stroke="{style.colour}" stroke-width="1.6"'


def _dash_attr(pattern: str) -> str:
    return f' stroke-dasharray="{pattern}"' if pattern else ""


def _text_width(text: str, size: float) -> float:
    # CJK characters are about a full em wide, others about CHAR_WIDTH of it
    return sum(size if ord(ch) > 0x2e80 else size * CHAR_WIDTH for ch in text)


BOLD = 1.12  # a bold title's width against the regular estimate


def title_lines(title: str | None, width: float = WIDTH - 36) -> list[str]:
    """A panel title as the lines it is drawn on: broken after ", " (else at a space, else
    anywhere) so no line is wider than `width` units at TITLE_FONT, bold."""
    if not title:
        return []

    def fits(text: str) -> bool:
        return _text_width(text, TITLE_FONT) * BOLD <= width

    lines: list[str] = []
    rest = title
    while not fits(rest):
        cut = 0
        for mark, keep in ((", ", 1), ("，", 1), (" ", 0)):
            at = [i for i in range(len(rest)) if rest.startswith(mark, i) and fits(rest[:i + keep])]
            if at:
                cut = at[-1] + keep
                break
        if not cut:  # no break inside the width: as many characters as fit
            cut = 1
            while cut < len(rest) and fits(rest[:cut + 1]):
                cut += 1
        lines.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        lines.append(rest)
    return lines


TITLE_LINE = TITLE_FONT + 4  # a title line's height


def panel_svg(panel: Panel, x_axis: Axis, y_axis: Axis, xs: Scale, ys: Scale, *, title_rows: int = 0) -> str:
    """One panel as an <svg> element; `title_rows` lines kept for the title (at least its own), so
    the panels of one figure put their plots at the same height."""
    titled = title_lines(panel.title)
    rows = max(title_rows, len(titled))
    extra = max(rows - 1, 0) * TITLE_LINE  # the drawing grows by the title's extra lines
    height = HEIGHT + extra
    top = (30 if rows else 12) + extra
    y_labels = [ys.label(t) for t in ys.ticks]
    left = 24 + max(_text_width(t, TICK_FONT) for t in y_labels) + 8
    right, bottom = 14, 46
    w, h = WIDTH - left - right, height - top - bottom

    def px(v: float) -> float:
        return left + xs.unit(v) * w

    def py(v: float) -> float:
        return top + (1 - ys.unit(v)) * h

    label = panel.title or y_axis.title
    out = [f'<svg class="panel" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
           f'width="{WIDTH}" height="{height}" role="img" aria-label="{escape(label)}" '
           f'font-family="{escape(FONT)}" font-size="{TICK_FONT}" fill="#1a202c">']
    if titled:
        # centred on the plot where it fits there, else on the drawing
        centre = left + w / 2 if all(_text_width(t, TITLE_FONT) * BOLD / 2 <= min(left + w / 2, WIDTH - left - w / 2)
                                     - 4 for t in titled) else WIDTH / 2
        spans = "".join(f'<tspan x="{_n(centre)}" dy="{0 if i == 0 else TITLE_LINE}">{escape(t)}</tspan>'
                        for i, t in enumerate(titled))
        out.append(f'<text class="panel-title" x="{_n(centre)}" y="18" text-anchor="middle" '
                   f'font-size="{TITLE_FONT}" font-weight="600">{spans}</text>')
    # grid, frame and tick labels
    out.append('<g class="grid" stroke="#e3e7ec" stroke-width="1">')
    for t in ys.ticks:
        out.append(f'<line x1="{_n(left)}" x2="{_n(left + w)}" y1="{_n(py(t))}" y2="{_n(py(t))}"/>')
    for t in xs.ticks:
        out.append(f'<line x1="{_n(px(t))}" x2="{_n(px(t))}" y1="{_n(top)}" y2="{_n(top + h)}"/>')
    out.append("</g>")
    out.append(f'<rect x="{_n(left)}" y="{_n(top)}" width="{_n(w)}" height="{_n(h)}" fill="none" stroke="#b8c0cc"/>')
    out.append('<g class="axis y" text-anchor="end" fill="#5a6472">')
    for t, text in zip(ys.ticks, y_labels):
        out.append(f'<text x="{_n(left - 5)}" y="{_n(py(t) + TICK_FONT * 0.35)}">{escape(text)}</text>')
    out.append('</g><g class="axis x" text-anchor="middle" fill="#5a6472">')
    last_end = -math.inf
    for t in xs.ticks:
        text = xs.label(t)
        half = _text_width(text, TICK_FONT) / 2
        if px(t) - half < last_end + 4:  # a label that would touch the one before is left out
            continue
        last_end = px(t) + half
        out.append(f'<text x="{_n(px(t))}" y="{_n(top + h + TICK_FONT + 4)}">{escape(text)}</text>')
    out.append("</g>")
    out.append(f'<text class="axis-title x" x="{_n(left + w / 2)}" y="{height - 8}" text-anchor="middle" '
               f'font-size="{TITLE_FONT}">{escape(x_axis.title)}</text>')
    out.append(f'<text class="axis-title y" transform="translate(15,{_n(top + h / 2)}) rotate(-90)" '
               f'text-anchor="middle" font-size="{TITLE_FONT}">{escape(y_axis.title)}</text>')
    # marks: the y = x line and rules under the lines, the lines under the points
    if panel.diagonal:
        low, high = max(xs.low, ys.low), min(xs.high, ys.high)
        out.append(f'<g class="mark-rule"><line x1="{_n(px(low))}" y1="{_n(py(low))}" x2="{_n(px(high))}" '
                   f'y2="{_n(py(high))}" stroke="#888" stroke-dasharray="4 4"/></g>')
    if panel.rules:
        out.append('<g class="mark-rule">')
        taken: list[float] = []  # the baselines of the labels placed so far
        for rule in sorted(panel.rules, key=lambda r: -r.y):
            y = py(rule.y)
            out.append(f'<line x1="{_n(left)}" x2="{_n(left + w)}" y1="{_n(y)}" y2="{_n(y)}" '
                       f'stroke="{rule.style.colour}" stroke-width="2"{_dash_attr(rule.style.dash)}/>')
            # above its line, else below it, clear of the other labels and lines; a label with no free
            # place is left to the legend, which names every rule
            lines_at = [py(other.y) for other in panel.rules if other is not rule]
            for base in (y - 5, y + RULE_FONT + 3):
                if (base - RULE_FONT >= top and base <= top + h
                        and all(abs(base - t) > RULE_FONT + 2 for t in taken)
                        and not any(base - RULE_FONT - 1 <= at <= base + 2 for at in lines_at)):
                    taken.append(base)
                    out.append(f'<text x="{_n(left + 4)}" y="{_n(base)}" font-size="{RULE_FONT}" '
                               f'fill="{rule.style.colour}" stroke="#fff" stroke-width="3" paint-order="stroke">'
                               f'{escape(rule.label)}</text>')
                    break
        out.append("</g>")
    lines = [s for s in panel.series if s.kind == "line" and len(s.points) > 1]
    if lines:
        out.append('<g class="mark-line" fill="none" stroke-width="2">')
        for s in lines:
            d = "M" + "L".join(f"{_n(px(x))},{_n(py(y))}" for x, y in s.points)
            out.append(f'<path d="{d}" stroke="{s.style.colour}"{_dash_attr(s.style.dash)}/>')
        out.append("</g>")
    dots = [s for s in panel.series if s.kind == "points" and s.points]
    if dots:
        out.append('<g class="mark-symbol">')
        for s in dots:
            attrs = _marker_attrs(s.style)
            for i, (x, y) in enumerate(s.points):
                tip = f"<title>{escape(s.tips[i])}</title>" if i < len(s.tips) else ""
                out.append(f'<path d="{marker_path(s.style.marker, px(x), py(y))}" {attrs}>{tip}</path>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def legend_html(groups: Sequence[LegendGroup]) -> str:
    """The legend as HTML: each entry its key (the same marker, colour and dash as drawn) and its words."""
    out = ['<div class="legend">']
    for group in groups:
        if not group.entries:
            continue
        out.append('<div class="legend-group">')
        if group.title:
            out.append(f'<span class="legend-title">{escape(group.title)}</span>')
        for entry in group.entries:
            style = entry.style
            key = ['<svg class="key" xmlns="http://www.w3.org/2000/svg" width="30" height="14" viewBox="0 0 30 14" '
                   'aria-hidden="true">']
            if entry.line:
                key.append(f'<path d="M1,7H29" stroke="{style.colour}" stroke-width="2" fill="none"'
                           f'{_dash_attr(style.dash)}/>')
            if style.marker == "swatch":
                # a bar of the colour: unlike any marker, so a colour key never reads as a model's marker
                key.append(f'<rect x="3" y="4.5" width="24" height="5" rx="2.5" fill="{style.colour}"/>')
            elif style.marker != "none":
                key.append(f'<path d="{marker_path(style.marker, 15, 7)}" {_marker_attrs(style)}/>')
            key.append("</svg>")
            out.append(f'<span class="legend-item" data-key="{escape(signature(entry))}">{"".join(key)}'
                       f'{escape(entry.label)}</span>')
        out.append("</div>")
    out.append("</div>")
    return "".join(out)


def signature(entry: LegendEntry) -> str:
    """What the eye tells apart in a legend key: colour, marker, fill and dash."""
    style = entry.style
    return "|".join((style.colour, style.marker, "filled" if style.filled else "hollow",
                     (style.dash or "solid") if entry.line else "-"))


def figure(panels: Sequence[Panel], x_axis: Axis, y_axis: Axis, legend: Sequence[LegendGroup], *,
           share_y: bool = True) -> str:
    """The panels (a shared x scale; a shared y scale unless `share_y` is off) and their legend."""

    def values(panel: Panel, axis: Literal["x", "y"]) -> list[float]:
        out = [p[0 if axis == "x" else 1] for s in panel.series for p in s.points]
        if axis == "y":  # a rule and room for its label above it
            out += [r.y * 1.1 if r.y > 0 else r.y for r in panel.rules]
        return out

    xs = scale_for(x_axis, [v for p in panels for v in values(p, "x")])
    shared = scale_for(y_axis, [v for p in panels for v in values(p, "y")])
    if any(p.diagonal for p in panels):  # y = x: one scale for both axes
        xs = shared = linear_scale([v for p in panels for v in values(p, "x") + values(p, "y")])
    grouped: dict[str, Scale] = {}
    for group in {p.y_group for p in panels if p.y_group}:
        grouped[group] = scale_for(y_axis, [v for p in panels if p.y_group == group for v in values(p, "y")])

    def y_scale(panel: Panel) -> Scale:
        if share_y:
            return shared
        return grouped[panel.y_group] if panel.y_group else scale_for(y_axis, values(panel, "y"))

    rows = max((len(title_lines(p.title)) for p in panels), default=0)
    drawn = [panel_svg(p, x_axis, y_axis, xs, y_scale(p), title_rows=rows) for p in panels]
    return f'<div class="panels">{"".join(drawn)}</div>{legend_html(legend)}'
