"""Draws docs/benchmarks-following.svg from the JSON that follow_bench and live_bench print.

Run: `python -m bench.plot follow.json live.json docs/benchmarks-following.svg`. Two panels,
both against the number of claims followed (log scale): Kubernetes bytes per idle minute for
each way of following (log scale; 0 is drawn at the bottom edge), and freshness p95 (a Pod's
phase in kubesim to an open page and to the API long-poll). Plain SVG, no plotting library.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

WIDTH, HEIGHT = 420, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 50
COLOURS = ["#c0392b", "#2471a3", "#1e8449", "#7d3c98"]


def sizes_of(report: dict[str, Any]) -> list[int]:
    return sorted(int(key[2:]) for key in report if key.startswith("N="))


def bytes_series(follow: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    scale = 60 / follow.get("seconds", 60)
    series: dict[str, list[tuple[int, float]]] = {}
    for size in sizes_of(follow):
        for way in ("poll-1s", "naive-5s", "informer"):
            moved = follow[f"N={size}"][way]["bytes"] * scale
            series.setdefault(way, []).append((size, moved))
    return series


def freshness_series(live: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = {}
    for size in sizes_of(live):
        for where in ("page", "api"):
            for state in ("running", "succeeded"):
                p95 = live[f"N={size}"][where][state].get("p95_ms")
                if p95 is not None:
                    series.setdefault(f"{where} {state}", []).append((size, p95))
    return series


def panel(
    title: str, unit: str, series: dict[str, list[tuple[int, float]]], log_y: bool, x0: int
) -> str:
    xs = [x for points in series.values() for x, _ in points]
    ys = [y for points in series.values() for _, y in points if y > 0 or not log_y]
    low_x, high_x = math.log10(min(xs)), math.log10(max(xs))
    if log_y:
        low_y = float(math.floor(math.log10(min(ys))))
        high_y = float(math.ceil(math.log10(max(ys))))
    else:
        step = nice_step(max(ys))
        low_y, high_y = 0.0, math.ceil(max(ys) * 1.1 / step) * step

    def at(x: float, y: float) -> tuple[float, float]:
        fx = (math.log10(x) - low_x) / ((high_x - low_x) or 1)
        value = math.log10(y) if log_y and y > 0 else (low_y if log_y else y)
        fy = (value - low_y) / ((high_y - low_y) or 1)
        plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
        return x0 + LEFT + fx * plot_w, TOP + (1 - fy) * plot_h

    parts = [f'<text x="{x0 + WIDTH / 2}" y="20" text-anchor="middle">{title}</text>']
    left, top = at(min(xs), 10**high_y if log_y else high_y)
    right, bottom = at(max(xs), 10**low_y if log_y else low_y)
    parts.append(
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
        'fill="none" stroke="#888"/>'
    )
    for x in sorted(set(xs)):
        px, _ = at(x, 1)
        parts.append(f'<text x="{px}" y="{bottom + 16}" text-anchor="middle">{x:,}</text>')
    parts.append(
        f'<text x="{(left + right) / 2}" y="{bottom + 34}" text-anchor="middle">'
        "claims followed</text>"
    )
    ticks = (
        [10**e for e in range(int(low_y), int(high_y) + 1)]
        if log_y
        else [high_y * i / 4 for i in range(5)]
    )
    for tick in ticks:
        _, py = at(min(xs), tick)
        label = _short(tick) + unit
        parts.append(f'<text x="{left - 6}" y="{py + 4}" text-anchor="end">{label}</text>')
    for index, (name, points) in enumerate(series.items()):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(f"{at(x, y)[0]:.1f},{at(x, y)[1]:.1f}" for x, y in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts.append(
            f'<text x="{left + 8}" y="{top + 16 + 14 * index}" fill="{colour}">{name}</text>'
        )
    return "\n".join(parts)


def nice_step(top: float) -> float:
    """A round tick step giving four to eight ticks up to top."""
    base = 10 ** math.floor(math.log10(top / 4))
    return next(base * m for m in (1, 2, 2.5, 5, 10) if top / (base * m) <= 8)


def _short(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def main() -> None:
    follow_path, live_path, out = sys.argv[1:4]
    follow = json.loads(Path(follow_path).read_text())
    live = json.loads(Path(live_path).read_text())
    body = panel("Kubernetes bytes per idle minute", "B", bytes_series(follow), True, 0)
    body += panel(
        "Freshness p95 (Pod phase to client)", " ms", freshness_series(live), False, WIDTH
    )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * WIDTH}" height="{HEIGHT}" '
        f'font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" '
        f'fill="white"/>\n{body}\n</svg>\n'
    )
    Path(out).write_text(svg)


if __name__ == "__main__":
    main()
