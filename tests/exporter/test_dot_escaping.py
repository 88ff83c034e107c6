"""Module paths, node names and tooltips reach Graphviz escaped: real ``dot`` draws them as
written (a backslash, a quote, an entity, a ``\\N`` escape, something like an HTML label)."""

from __future__ import annotations

import html
import re

import graphviz
import pytest
import torch
from torch import nn

from exporter import export
from exporter.graphs.dot import dot_text, dot_tooltip
from exporter.graphs.draw import side_by_side

# Names nn.Module.add_module accepts (it refuses "" and names with a dot).
ODD_NAMES = ("back\\", 'say"hi"', "&lt;", "\\N", "<b>", "a&b")


class OddlyNamed(nn.Module):
    def __init__(self):
        super().__init__()
        for name in ODD_NAMES:
            self.add_module(name, nn.Linear(4, 4))

    def forward(self, x):
        for name in ODD_NAMES:
            x = getattr(self, name)(x)
        return x


def texts(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg)]


def ids(svg: str) -> set[str]:
    return {html.unescape(t) for t in re.findall(r' id="([^"]*)"', svg)}


def tooltips(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'xlink:title="([^"]*)"', svg)]


@pytest.fixture(scope="module")
def oddly_named():
    session = export(OddlyNamed().eval(), torch.randn(2, 4))
    session.run()
    session.raise_for_status()
    return session


def test_oddly_named_modules_survive_the_export_with_their_names(oddly_named):
    modules = {n.module for n in oddly_named.graphs.onnx_optimized.nodes}
    assert modules == set(ODD_NAMES)


def test_collapsed_modules_are_drawn_and_identified_by_their_exact_names(oddly_named):
    view = side_by_side(oddly_named)
    assert view.svg is not None, view.message
    drawn = texts(view.svg)
    for name in ODD_NAMES:
        assert drawn.count(name) == 2  # a box on each side
        assert {f"fx-module-{name}", f"onnx-module-{name}"} <= ids(view.svg)


def test_expanded_modules_label_their_clusters_and_ops_with_their_exact_names(oddly_named):
    view = side_by_side(oddly_named, expand=ODD_NAMES)
    assert view.svg is not None, view.message
    drawn, element_ids, tips = texts(view.svg), ids(view.svg), tooltips(view.svg)
    for name in ODD_NAMES:
        assert f"{name} (Linear)" in drawn
        assert {f"fx-cluster-{name}", f"onnx-cluster-{name}"} <= element_ids
        assert any(f"module: {name}" in tip.splitlines() for tip in tips)


@pytest.mark.parametrize("text", [*ODD_NAMES, "\\\\", "\\l\\r\\n", "\\G\\E\\T\\H\\L", "&amp;", "&#38;", "x\\\"y",
                                  "<<b>x</b>>", "line one\nline two\\"])
def test_dot_text_and_tooltip_are_drawn_exactly_as_written(text):
    digraph = graphviz.Digraph(name="g")
    digraph.node("n", dot_text(text), id=dot_text(f"el-{text}"), tooltip=dot_tooltip(text))
    svg = digraph.pipe(format="svg", encoding="utf-8")
    assert texts(svg) == text.split("\n")
    assert f"el-{text}" in ids(svg)
    assert tooltips(svg) == [text]
