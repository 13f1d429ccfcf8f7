"""Server-side SVG charts of evaluation reports, drawn with pygal (no JavaScript, nothing loaded at run time).

Each function returns one chart as a ``data:image/svg+xml;base64,...`` URI for an ``<img>`` with an ``alt`` text: an
image is announced by screen readers from its ``alt`` and needs no inline script. pygal's own tooltip script is turned
off (``js=[]``): it would be fetched from a CDN; its inline config script is removed.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pygal
from pygal.style import Style

_STYLE = Style(
    background="white",
    plot_background="white",
    foreground="#1f2933",
    foreground_strong="#1f2933",
    foreground_subtle="#52606d",
    colors=("#1f5fbf", "#c2410c", "#15803d", "#7c3aed", "#b91c1c", "#0e7490", "#a16207", "#be185d"),
    font_family="system-ui, sans-serif",
    title_font_size=15,
    label_font_size=11,
    major_label_font_size=11,
    legend_font_size=11,
)


@dataclass(frozen=True)
class Chart:
    """One rendered chart: ``src`` for ``<img src>``, ``alt`` describing it in words."""

    src: str
    alt: str
    title: str


_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S)


def _render(chart: Any, title: str, alt: str) -> Chart:
    # pygal always writes an inline config <script> for its tooltips; it would not run in an <img>, and the page
    # needs none: drop it so the SVG is plain drawing.
    svg = _SCRIPT.sub("", chart.render(is_unicode=True))
    return Chart("data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii"), alt, title)


def _config(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": title,
        "style": _STYLE,
        "js": [],
        "disable_xml_declaration": True,
        "width": 720,
        "height": 340,
        "legend_at_bottom": True,
        "truncate_legend": 60,
        **extra,
    }


def recall_curve(curves: Mapping[str, Sequence[tuple[int, float]]], title: str = "Recall@K") -> Chart:
    """Recall@K per result, K on a log scale (``curves``: ``{label: [(K, recall in 0..1)]}``)."""
    chart = pygal.XY(**_config(title, x_title="K (log2)", y_title="Recall", range=(0, 1), dots_size=3))
    for label, points in curves.items():
        chart.add(label, [(math.log2(k), v) for k, v in points])
    ks = sorted({k for pts in curves.values() for k, _ in pts})
    chart.x_labels = [math.log2(k) for k in ks]
    chart.x_value_formatter = lambda x: str(round(2**x))
    alt = "; ".join(
        f"{label}: " + ", ".join(f"R@{k}={v:.2f}" for k, v in points) for label, points in curves.items()
    )
    return _render(chart, title, f"{title}. {alt}" if alt else f"{title}: no data")


def grouped_bars(groups: Sequence[str], series: Mapping[str, Sequence[float]], title: str, y_title: str) -> Chart:
    """Vertical bars: one group per ``groups`` entry (categories or measures), one bar per series."""
    chart = pygal.Bar(**_config(title, y_title=y_title, x_label_rotation=20 if len(groups) > 5 else 0))
    chart.x_labels = list(groups)
    for label, values in series.items():
        chart.add(label, [round(v, 4) for v in values])
    alt = "; ".join(
        f"{label}: " + ", ".join(f"{g}={v:.3f}" for g, v in zip(groups, values, strict=False))
        for label, values in series.items()
    )
    return _render(chart, title, f"{title}. {alt}")


def latency_histogram(latencies: Mapping[str, Sequence[float]], title: str = "Latency per query (ms)") -> Chart:
    """Histogram of per-query latencies (milliseconds), one series per result, 12 shared bins."""
    values = [v for vs in latencies.values() for v in vs]
    chart = pygal.Histogram(**_config(title, x_title="milliseconds", y_title="queries"))
    if values:
        lo, hi = min(values), max(values)
        width = (hi - lo) / 12 or 1.0
        for label, vs in latencies.items():
            counts = [0] * 12
            for v in vs:
                counts[min(int((v - lo) / width), 11)] += 1
            chart.add(label, [(c, lo + i * width, lo + (i + 1) * width) for i, c in enumerate(counts)])
    alt = "; ".join(
        f"{label}: {len(vs)} queries, {min(vs):.1f}-{max(vs):.1f} ms" for label, vs in latencies.items() if vs
    )
    return _render(chart, title, f"{title}. {alt}" if alt else f"{title}: no per-query latencies in this report")
