"""Line charts without plotting libraries: PNG (zlib + struct, a tiny bitmap font for the tick labels) and an
HTML page with the same charts as inline SVG, for the soak report."""

from __future__ import annotations

import html
import math
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

COLORS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (255, 127, 14), (148, 103, 189), (140, 86, 75)]

# 3x5 glyphs, rows top to bottom, 3 bits each (MSB left)
_FONT = {
    "0": (7, 5, 5, 5, 7),
    "1": (2, 6, 2, 2, 7),
    "2": (7, 1, 7, 4, 7),
    "3": (7, 1, 7, 1, 7),
    "4": (5, 5, 7, 1, 1),
    "5": (7, 4, 7, 1, 7),
    "6": (7, 4, 7, 5, 7),
    "7": (7, 1, 1, 1, 1),
    "8": (7, 5, 7, 5, 7),
    "9": (7, 5, 7, 1, 7),
    ".": (0, 0, 0, 0, 2),
    "-": (0, 0, 7, 0, 0),
    "k": (4, 5, 6, 5, 5),
    "M": (5, 7, 7, 5, 5),
    "s": (0, 3, 6, 3, 6),
    " ": (0, 0, 0, 0, 0),
}


@dataclass
class Chart:
    title: str
    x: Sequence[float]
    lines: dict[str, Sequence[float]]
    x_label: str = "seconds"
    y_label: str = ""
    markers: list[tuple[float, str]] = field(default_factory=list)  # vertical lines (x, label), e.g. faults


class Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.w, self.h = width, height
        self.px = bytearray(b"\xff" * (width * height * 3))

    def set(self, x: int, y: int, color: tuple[int, int, int]) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i : i + 3] = bytes(color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: tuple[int, int, int], thick: int = 1) -> None:
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            for t in range(thick):
                self.set(x0, y0 + t, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(
        self, x: int, y: int, s: str, color: tuple[int, int, int] = (60, 60, 60), scale: int = 2
    ) -> None:
        for ch in s:
            glyph = _FONT.get(ch)
            if glyph is None:
                x += 4 * scale
                continue
            for row, bits in enumerate(glyph):
                for col in range(3):
                    if bits & (4 >> col):
                        for a in range(scale):
                            for b in range(scale):
                                self.set(x + col * scale + a, y + row * scale + b, color)
            x += 4 * scale

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3 : (y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return (
                struct.pack(">I", len(data))
                + kind
                + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
            )

        header = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 6))
            + chunk(b"IEND", b"")
        )


def _fmt(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:.3g}k"
    return f"{v:.3g}"


def _bounds(chart: Chart) -> tuple[float, float, float, float]:
    xs = list(chart.x) or [0.0, 1.0]
    ys = [v for vs in chart.lines.values() for v in vs if v is not None and math.isfinite(v)] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(0.0, min(ys)), max(ys)
    if x1 <= x0:
        x1 = x0 + 1
    if y1 <= y0:
        y1 = y0 + 1
    return x0, x1, y0, y1 * 1.05


def render_png(chart: Chart, width: int = 800, height: int = 300) -> bytes:
    c = Canvas(width, height)
    left, right, top, bottom = 70, 20, 15, 30
    pw, ph = width - left - right, height - top - bottom
    x0, x1, y0, y1 = _bounds(chart)

    def px(x: float) -> int:
        return left + round((x - x0) / (x1 - x0) * pw)

    def py(y: float) -> int:
        return top + ph - round((y - y0) / (y1 - y0) * ph)

    for i in range(5):
        y = y0 + (y1 - y0) * i / 4
        c.line(left, py(y), left + pw, py(y), (225, 225, 225))
        c.text(4, py(y) - 5, _fmt(y))
    for i in range(6):
        x = x0 + (x1 - x0) * i / 5
        c.text(px(x) - 10, top + ph + 8, _fmt(x))
    for mx, _label in chart.markers:
        if x0 <= mx <= x1:
            for y in range(top, top + ph, 4):
                c.set(px(mx), y, (170, 170, 170))
    c.line(left, top, left, top + ph, (0, 0, 0))
    c.line(left, top + ph, left + pw, top + ph, (0, 0, 0))
    for n, values in enumerate(chart.lines.values()):
        color = COLORS[n % len(COLORS)]
        prev = None
        for x, y in zip(chart.x, values, strict=False):
            if y is None or not math.isfinite(y):
                prev = None
                continue
            pt = (px(x), py(y))
            if prev is not None:
                c.line(prev[0], prev[1], pt[0], pt[1], color, thick=2)
            prev = pt
    return c.png()


def render_svg(chart: Chart, width: int = 800, height: int = 300) -> str:
    left, right, top, bottom = 70, 150, 25, 35
    pw, ph = width - left - right, height - top - bottom
    x0, x1, y0, y1 = _bounds(chart)

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + ph - (y - y0) / (y1 - y0) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="15" font-size="13" font-weight="bold">{html.escape(chart.title)}</text>',
    ]
    for i in range(5):
        y = y0 + (y1 - y0) * i / 4
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{left - 5}" y="{py(y) + 4:.1f}" text-anchor="end">{_fmt(y)}</text>')
    for i in range(6):
        x = x0 + (x1 - x0) * i / 5
        out.append(f'<text x="{px(x):.1f}" y="{top + ph + 15}" text-anchor="middle">{_fmt(x)}</text>')
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 3}" text-anchor="middle">{html.escape(chart.x_label)}</text>'
    )
    for mx, label in chart.markers:
        if x0 <= mx <= x1:
            out.append(
                f'<line x1="{px(mx):.1f}" x2="{px(mx):.1f}" y1="{top}" y2="{top + ph}" stroke="#aaa" '
                f'stroke-dasharray="3,3"><title>{html.escape(label)}</title></line>'
            )
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#000"/>')
    for n, (name, values) in enumerate(chart.lines.items()):
        r, g, b = COLORS[n % len(COLORS)]
        segments: list[list[str]] = [[]]
        for x, y in zip(chart.x, values, strict=False):
            if y is None or not math.isfinite(y):
                segments.append([])
                continue
            segments[-1].append(f"{px(x):.1f},{py(y):.1f}")
        for seg in segments:
            if seg:
                out.append(
                    f'<polyline fill="none" stroke="rgb({r},{g},{b})" stroke-width="1.5" points="{" ".join(seg)}"/>'
                )
        out.append(
            f'<rect x="{left + pw + 10}" y="{top + 14 * n}" width="10" height="10" fill="rgb({r},{g},{b})"/>'
            f'<text x="{left + pw + 24}" y="{top + 14 * n + 9}">{html.escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def write_report(
    directory: str | Path, title: str, charts: dict[str, Chart], summary_html: str = ""
) -> dict[str, Path]:
    """PNG per chart (`<name>.png`) and one `report.html` with all of them as SVG; returns the paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, chart in charts.items():
        p = d / f"{name}.png"
        p.write_bytes(render_png(chart))
        paths[name] = p
    body = "\n".join(f"<div>{render_svg(c)}</div>" for c in charts.values())
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body style='font-family:sans-serif'><h1>{html.escape(title)}</h1>{summary_html}{body}</body></html>"
    )
    paths["html"] = d / "report.html"
    paths["html"].write_text(page)
    return paths
