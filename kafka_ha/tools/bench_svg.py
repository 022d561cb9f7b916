"""Small SVG charts for docs/benchmarks.md: grouped bars and lines, standard library only.

The output is deterministic (coordinates rounded, no timestamps or random ids) so that a
re-rendered page can be compared with the committed one byte for byte.
"""
from __future__ import annotations

import math
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 44, 64
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
# Colour-blind-safe (Tableau 10).
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1"]
FONT = 'font-family="sans-serif"'


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top``: steps of 1, 2, 2.5 or 5 times a power of ten.

    >>> nice_ticks(9.54)
    [0, 2, 4, 6, 8, 10]
    >>> nice_ticks(0.7)
    [0, 0.2, 0.4, 0.6, 0.8]
    >>> nice_ticks(0)
    [0, 1]
    """
    if top <= 0:
        return [0, 1]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    n = math.ceil(top / step - 1e-9)
    return [_clean(i * step) for i in range(n + 1)]


def _clean(v: float) -> float | int:
    v = round(v, 10)
    return int(v) if v == int(v) else v


def number(v: float) -> str:
    """A value as a label: at most three significant digits, no trailing zeros.

    >>> number(9.541), number(1234.5), number(0.05), number(3.0)
    ('9.54', '1234', '0.05', '3')
    """
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _text(x: float, y: float, s: str, anchor: str = "middle", size: int = 12, extra: str = "") -> str:
    return (f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}" {FONT} font-size="{size}"{extra}>'
            f"{escape(s)}</text>")


def _frame(title: str, ticks: list[float], y_label: str, x_label: str) -> list[str]:
    """The chart's background, title, horizontal grid with the y ticks, and axis labels."""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img">',
           f"<title>{escape(title)}</title>",
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           _text(WIDTH / 2, 22, title, size=14, extra=' font-weight="bold"')]
    for t in ticks:
        y = TOP + PLOT_H * (1 - t / ticks[-1])
        out.append(f'<line x1="{LEFT}" y1="{_f(y)}" x2="{LEFT + PLOT_W}" y2="{_f(y)}" '
                   f'stroke="#ddd"/>')
        out.append(_text(LEFT - 6, y + 4, number(t), anchor="end"))
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + PLOT_H}" stroke="#333"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP + PLOT_H}" x2="{LEFT + PLOT_W}" y2="{TOP + PLOT_H}" '
               f'stroke="#333"/>')
    out.append(_text(16, TOP + PLOT_H / 2, y_label,
                     extra=f' transform="rotate(-90 16 {_f(TOP + PLOT_H / 2)})"'))
    out.append(_text(LEFT + PLOT_W / 2, HEIGHT - 30, x_label))
    return out


def _legend(names: list[str]) -> list[str]:
    """The series' names in a row under the x-axis label."""
    out, x = [], LEFT
    for i, name in enumerate(names):
        out.append(f'<rect x="{x}" y="{HEIGHT - 18}" width="12" height="12" '
                   f'fill="{PALETTE[i % len(PALETTE)]}"/>')
        out.append(_text(x + 16, HEIGHT - 8, name, anchor="start"))
        x += 28 + 7 * len(name)
    return out


def _y(value: float, top: float) -> float:
    return TOP + PLOT_H * (1 - value / top)


def _top(series: dict[str, list[float | None]]) -> list[float]:
    return nice_ticks(max((v for vs in series.values() for v in vs if v is not None), default=0))


def bar_chart(title: str, categories: list[str], series: dict[str, list[float | None]],
              x_label: str, y_label: str) -> str:
    """Grouped bars: one group per category, one bar per series, each labelled with its value."""
    ticks = _top(series)
    out = _frame(title, ticks, y_label, x_label)
    group_w = PLOT_W / max(1, len(categories))
    bar_w = group_w * 0.8 / max(1, len(series))
    for c, category in enumerate(categories):
        left = LEFT + c * group_w + group_w * 0.1
        for s, (name, values) in enumerate(series.items()):
            value = values[c]
            if value is None:
                continue
            x, y = left + s * bar_w, _y(value, ticks[-1])
            out.append(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(bar_w * 0.92)}" '
                       f'height="{_f(TOP + PLOT_H - y)}" fill="{PALETTE[s % len(PALETTE)]}">'
                       f"<title>{escape(f'{name}, {category}: {number(value)}')}</title></rect>")
            out.append(_text(x + bar_w * 0.46, y - 3, number(value), size=10))
        out.append(_text(LEFT + c * group_w + group_w / 2, TOP + PLOT_H + 16, category))
    return "\n".join(out + _legend(list(series)) + ["</svg>"]) + "\n"


def line_chart(title: str, xs: list[float], series: dict[str, list[float | None]],
               x_label: str, y_label: str) -> str:
    """One line per series over numeric x values (linear scale), each point marked."""
    ticks = _top(series)
    out = _frame(title, ticks, y_label, x_label)
    lo, hi = min(xs), max(xs)

    def x_of(v: float) -> float:
        return LEFT + PLOT_W * (0.5 if hi == lo else 0.04 + 0.92 * (v - lo) / (hi - lo))
    for v in xs:
        out.append(_text(x_of(v), TOP + PLOT_H + 16, number(v)))
    for s, (name, values) in enumerate(series.items()):
        colour = PALETTE[s % len(PALETTE)]
        points = [(x_of(x), _y(v, ticks[-1]), x, v) for x, v in zip(xs, values) if v is not None]
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                   + " ".join(f"{_f(px)},{_f(py)}" for px, py, _, _ in points) + '"/>')
        for px, py, x, v in points:
            out.append(f'<circle cx="{_f(px)}" cy="{_f(py)}" r="3.5" fill="{colour}">'
                       f"<title>{escape(f'{name} at {number(x)}: {number(v)}')}</title></circle>")
    return "\n".join(out + _legend(list(series)) + ["</svg>"]) + "\n"
