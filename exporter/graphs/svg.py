"""Layout with Graphviz's ``dot`` (one process per graph, in parallel) and the sides put next
to each other in one SVG document, with the stylesheet of the drawing's CSS classes
(:mod:`exporter.graphs.dot`). A missing ``dot`` is :class:`DotMissing`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["DotMissing", "layout_svgs", "side_by_side_svg", "STYLE"]

STYLE = """
.wb-selected > polygon, .wb-selected > path, .wb-selected > ellipse { stroke: #d62728; stroke-width: 3px; }
.wb-contains-selected > polygon { stroke: #d62728; stroke-dasharray: 4 2; }
.wb-op:hover > polygon, .wb-op:hover > path, .wb-module:hover > polygon { stroke: #1f77b4; stroke-width: 2px; }
"""

_GAP = 24.0


class DotMissing(RuntimeError):
    """Graphviz's ``dot`` (Debian package ``graphviz``) or the ``graphviz`` Python package
    is not installed."""


def layout_svgs(digraphs: Sequence[Any]) -> list[str]:
    """Lay each graph out with ``dot`` (in parallel: one process each) and return the SVGs."""
    try:
        import graphviz
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise DotMissing("the graphviz Python package is not installed: pip install graphviz") from exc

    def run(digraph: Any) -> str:
        return digraph.pipe(format="svg", engine="dot", encoding="utf-8")

    try:
        with ThreadPoolExecutor(max_workers=max(len(digraphs), 1)) as pool:
            return list(pool.map(run, digraphs))
    except graphviz.ExecutableNotFound as exc:
        raise DotMissing(
            "Graphviz's dot program was not found on PATH: install it (Debian/Ubuntu: apt-get install graphviz; "
            "conda: conda install graphviz)"
        ) from exc


_SIZE = re.compile(r'<svg\s+width="([\d.]+)pt"\s+height="([\d.]+)pt"')


def _strip_prolog(svg: str) -> str:
    return svg[svg.index("<svg"):]


def side_by_side_svg(svgs: Sequence[str], *, style: str = STYLE) -> str:
    """Place SVG documents next to each other, left to right, in one SVG document (each kept
    whole as a nested ``<svg>``, its ids and classes unchanged)."""
    parts: list[str] = []
    x = 0.0
    height = 0.0
    for svg in svgs:
        body = _strip_prolog(svg)
        match = _SIZE.search(body)
        if match is None:
            raise ValueError("not an SVG document from Graphviz (no width/height in pt)")
        w, h = float(match.group(1)), float(match.group(2))
        # in user units (1 unit = 1 pt in the outer viewBox), placed at x
        body = body[: match.start()] + f'<svg x="{x:.0f}" y="0" width="{w:g}" height="{h:g}"' + body[match.end():]
        parts.append(body)
        x += w + _GAP
        height = max(height, h)
    width = max(x - _GAP, 0.0)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" class="wb-graphs" '
        f'width="{width:.0f}pt" height="{height:.0f}pt" viewBox="0 0 {width:.0f} {height:.0f}">\n'
        f"<style>{style}</style>\n" + "\n".join(parts) + "\n</svg>"
    )
