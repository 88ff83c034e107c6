"""Graph data and the FX↔ONNX mapping, on real exports of small models with known lowerings."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from exporter import ExportOptions, export
from exporter.graphs import Graph, GraphNode, ValueInfo, graphs_of, map_nodes, normalize_module_path



class LinearNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        return self.out(torch.relu(self.norm(self.lin(x)))) * 2


@pytest.fixture(scope="module")
def net3d():
    """Linear on a 3-D input: MatMul + Add in ONNX; a named dynamic batch dim."""
    session = export(LinearNormNet().eval(), torch.randn(2, 3, 8), options=ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    session.run()
    session.raise_for_status()
    return session


@pytest.fixture(scope="module")
def net2d():
    """Linear on a 2-D input: one Gemm in ONNX."""
    session = export(LinearNormNet().eval(), torch.randn(2, 8))
    session.run()
    session.raise_for_status()
    return session


def entries_of(mapping, fx_node):
    return sorted((mapping[o].onnx_op for o in mapping.onnx_nodes_of(fx_node)))


def test_linear_on_3d_input_maps_matmul_and_add_to_the_linear_fx_node(net3d):
    mapping = net3d.graphs.mapping
    assert entries_of(mapping, "linear") == ["Add", "MatMul"]
    assert entries_of(mapping, "linear_1") == ["Add", "MatMul"]
    frame = mapping.to_frame()
    rows = frame[frame.fx_nodes == "linear"]
    assert set(rows.module) == {"lin"} and set(rows.origin) == {"fx"}
    assert all("test_graphs.py" in s and "self.out(torch.relu" in s for s in rows.source)


def test_linear_on_2d_input_maps_one_gemm_to_the_linear_fx_node(net2d):
    mapping = net2d.graphs.mapping
    assert entries_of(mapping, "linear") == ["Gemm"]


def test_layer_norm_maps_to_one_layer_normalization_in_its_module(net3d):
    mapping = net3d.graphs.mapping
    (name,) = mapping.onnx_nodes_of("layer_norm")
    entry = mapping[name]
    assert (entry.onnx_op, entry.module, entry.origin) == ("LayerNormalization", "norm", "fx")
    assert entry.fx_captured == ("layer_norm",)


def test_weight_transposes_folded_by_the_optimizer_are_listed_as_removed(net3d):
    removed = net3d.graphs.mapping.removed_frame()
    transposes = removed[removed.onnx_op == "Transpose"]
    assert sorted(transposes.fx_nodes) == ["linear", "linear_1"]
    assert set(transposes.fate) == {"folded"}


def test_mapping_frame_has_the_documented_columns_and_full_coverage(net3d):
    mapping = net3d.graphs.mapping
    frame = mapping.to_frame()
    assert list(frame.columns)[:6] == ["onnx_node", "onnx_op", "fx_nodes", "module", "source", "origin"]
    assert len(frame) == len(net3d.graphs.onnx_optimized)
    assert mapping.coverage == 1.0
    assert "coverage 100.0%" in mapping.summary()


def test_decomposed_fx_nodes_lead_back_to_captured_nodes(net3d):
    g = net3d.graphs
    mul = next(n.name for n in g.fx_decomposed if n.op == "aten.mul.Tensor")
    (onnx_mul,) = g.mapping.onnx_nodes_of(mul)
    assert g.mapping[onnx_mul].fx_captured == ("mul",)
    assert "mul" in g.fx and g.fx["mul"].op == "aten.mul.Tensor"


def test_node_frames_show_shapes_with_the_users_dim_names_modules_and_sources(net3d):
    g = net3d.graphs
    for kind in ("fx", "fx_decomposed", "onnx", "onnx_optimized"):
        frame = g[kind].to_frame()
        assert list(frame.columns) == ["name", "op", "inputs", "outputs", "module", "source"]
        assert len(frame) == len(g[kind])
    fx = g.fx.to_frame().set_index("name")
    assert fx.loc["linear", "outputs"] == "linear: float32[batch, 3, 16]"
    assert fx.loc["linear", "inputs"] == "x, p_lin_weight, p_lin_bias"
    assert fx.loc["layer_norm", "module"] == "norm" and fx.loc["relu", "module"] == ""
    onnx = g.onnx_optimized.to_frame().set_index("name")
    assert onnx.loc["node_layer_norm", "outputs"] == "layer_norm: float32[batch, 3, 16]"
    assert g.onnx_optimized.inputs[0].describe() == "x: float32[batch, 3, 8]"
    assert "test_graphs.py" in onnx.loc["node_layer_norm", "source"]


def test_unoptimized_model_has_fewer_graph_nodes_after_optimization(net3d):
    g = net3d.graphs
    assert len(g.onnx_optimized) < len(g.onnx)
    assert g.onnx.op_counts()["Transpose"] == 2 and g.onnx_optimized.op_counts()["Transpose"] == 0


def test_modules_frame_aligns_node_counts_and_ops_per_module(net3d):
    frame = net3d.graphs.modules_frame().set_index("module")
    assert frame.loc["lin", "module_class"] == "Linear"
    assert (frame.loc["lin", "fx_nodes"], frame.loc["lin", "onnx_nodes"]) == (1, 2)
    assert frame.loc["lin", "onnx_ops"] in ("Add, MatMul", "MatMul, Add")
    assert frame.loc["norm", "fx_ops"] == "aten.layer_norm"
    assert frame.loc["norm", "onnx_ops"] == "LayerNormalization"
    assert frame.loc["", "module_class"] == "LinearNormNet"


def test_optimize_false_maps_every_node_straight_to_fx(net3d):
    session = net3d.with_options(optimize=False)
    g = session.graphs
    assert len(g.onnx_optimized) == len(g.onnx)
    assert set(g.mapping.to_frame().origin) == {"fx"} and not g.mapping.removed


def test_graph_by_unknown_kind_names_the_kinds(net3d):
    with pytest.raises(ValueError, match="fx_decomposed"):
        net3d.graphs["onnx_final"]
    with pytest.raises(KeyError, match="no node 'nosuch'"):
        net3d.graphs.fx["nosuch"]


@pytest.fixture(scope="module")
def attention_block():
    from exporter.examples import demo_block

    model, args, kwargs, dims = demo_block()
    session = export(model, *args, options=ExportOptions(dynamic_shapes=dims), **kwargs)
    session.run()
    session.raise_for_status()
    return session


def test_attention_block_maps_sdpa_to_its_onnx_subgraph(attention_block):
    g = attention_block.graphs
    ops = entries_of(g.mapping, "scaled_dot_product_attention")
    assert {"MatMul", "Softmax"} <= set(ops)
    assert all(g.mapping[o].module == "attn" for o in g.mapping.onnx_nodes_of("scaled_dot_product_attention"))
    assert g.mapping.coverage == 1.0


def test_nodes_created_by_the_optimizer_map_to_the_fx_nodes_they_replaced(attention_block):
    g = attention_block.graphs
    created = [e for e in g.mapping.entries if e.origin == "optimizer"]
    assert created, "the optimizer fuses the qkv split: expected at least one node it created"
    for entry in created:
        assert entry.onnx_node not in g.onnx
        assert entry.fx_nodes and all(f in g.fx_decomposed for f in entry.fx_nodes), entry
        assert entry.module is not None and entry.module.startswith("attn")
    fused = g.mapping.removed_frame()
    assert fused.fate.str.startswith("fused into").any()


def test_map_nodes_marks_nodes_without_metadata_unmapped_and_new_ones_optimizer():
    """Pure data: a node kept without metadata is unmapped; a new node whose output value
    existed before takes the FX origins of the nodes that computed it."""
    t = ValueInfo
    before = Graph("onnx", (
        GraphNode("a", "Mul", ("x", "c"), (t("m"),)),
        GraphNode("b", "Add", ("m", "d"), (t("y"),)),
        GraphNode("z", "Relu", ("y",), (t("r"),)),
    ), (t("x"),), (t("r"),))
    after = Graph("onnx_optimized", (
        GraphNode("fused", "FusedMulAdd", ("x", "c", "d"), (t("y"),)),
        GraphNode("z", "Relu", ("y",), (t("r"),)),
    ), (t("x"),), (t("r"),))
    fx = Graph("fx_decomposed", (GraphNode("mul", "aten.mul.Tensor", ("x",), (t("mul"),), module="blk"),
                                 GraphNode("add", "aten.add.Tensor", ("mul",), (t("add"),), module="blk.inner")))
    mapping = map_nodes(after, before, {"a": "mul", "b": "add", "z": None}, fx)
    assert mapping["fused"].origin == "optimizer" and set(mapping["fused"].fx_nodes) == {"mul", "add"}
    assert mapping["fused"].module == "blk"  # the modules' common ancestor
    assert mapping["z"].origin == "unmapped" and mapping.coverage == 0.5
    assert {r.onnx_node: r.fate for r in mapping.removed} == {"a": "fused into fused", "b": "fused into fused"}


def test_strict_style_module_paths_become_dotted_paths():
    assert normalize_module_path("L['self'].encoder.layer[0].attention") == "encoder.layer.0.attention"
    assert normalize_module_path("encoder.layer.0") == "encoder.layer.0"
    assert normalize_module_path("") == ""


@pytest.fixture(scope="module")
def bert():
    import transformers
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                                     vocab_size=100, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, 100, (2, 8))
    session = export(model, input_ids=ids, attention_mask=torch.ones(2, 8, dtype=torch.long))
    session.run()
    session.raise_for_status()
    return session


def test_two_layer_bert_maps_at_least_95_percent_of_onnx_nodes(bert):
    g = bert.graphs
    assert g.mapping.coverage >= 0.95, g.mapping.summary()
    query = g.mapping.to_frame().query("module == 'encoder.layer.0.attention.self.query'")
    assert sorted(query.onnx_op) == ["Add", "MatMul"]
    frame = g.modules_frame(depth=3).set_index("module")
    assert {"embeddings", "encoder.layer.0", "encoder.layer.1", "pooler"} <= set(frame.index)
    assert frame.loc["encoder.layer.0", "module_class"] == "BertLayer"
    assert frame.loc["encoder.layer.0", "onnx_nodes"] > 20


def test_session_graphs_are_built_once_and_match_graphs_of(net3d):
    assert net3d.graphs is net3d.graphs
    assert net3d.graphs.onnx_optimized.names == graphs_of(net3d).onnx_optimized.names
    assert "onnx_optimized" in repr(net3d.graphs)


def _node(name, op, inputs, dtype="float32", module=""):
    return GraphNode(name, op, tuple(inputs), (ValueInfo(name, dtype, (2,)),), module)


def test_top_level_mask_plumbing_is_folded_into_one_box_and_model_computation_is_not():
    from exporter.graphs.plumbing import PLUMBING, PLUMBING_CLASS, fold_plumbing, plumbing_nodes

    graph = Graph("fx", (
        _node("size", "aten.sym_size.int", ["mask"], "SymInt"),
        _node("range", "aten.arange.default", ["size"], "int64"),
        _node("as_float", "aten._to_copy.default", ["mask"]),  # a float cast of an int input: plumbing
        _node("scaled", "aten.mul.Tensor", ["x"]),  # float work on a float input: the model's
        _node("embed", "aten.linear.default", ["scaled", "weight"], module="embed"),
        _node("masked", "aten.add.Tensor", ["embed", "as_float"]),  # reads a module's output
        _node("late_size", "aten.sym_size.int", ["masked"], "SymInt"),
    ), (ValueInfo("x", "float32", (2,)), ValueInfo("mask", "int64", (2,))), (ValueInfo("masked"),))
    assert plumbing_nodes(graph) == {"size", "range", "as_float"}
    folded = fold_plumbing(graph)
    assert [n.module for n in folded.nodes] == [PLUMBING] * 3 + ["", "embed", "", ""]
    assert folded.module_classes[PLUMBING] == PLUMBING_CLASS and fold_plumbing(folded) is folded
    alone = Graph("fx", graph.nodes[:4], graph.inputs)  # no module at all: its top level is the model
    assert fold_plumbing(alone) is alone and fold_plumbing(graph) is folded  # computed once


def test_shapes_say_question_mark_for_unnamed_dims_and_sources_are_short():
    from exporter.graphs.model import short_source

    assert ValueInfo("v", "int64", (None, "seq", 2)).type_text() == "int64[?, seq, 2]"
    assert (short_source("/usr/lib/python3/site-packages/transformers/models/bert/modeling_bert.py:95 in f: a(b)")
            == "transformers/models/bert/modeling_bert.py:95 in f: a(b)")
    assert short_source("/somewhere/else/model.py:12 in forward: x / y") == "model.py:12 in forward: x / y"
    assert short_source("Cell In[3], line 4 in forward: x") == "Cell In[3], line 4 in forward: x"


def test_error_overlay_paints_errors_relative_to_the_tolerance_and_says_what_it_shows():
    from exporter.graphs import IntermediateComparison, IntermediateRow
    from exporter.graphs.overlay import WORST_RATIO, error_legend, error_overlay, tolerance_colour

    def row(name, status, error=None, allowed=None):
        return IntermediateRow(name, "Add", (), None, None, status, max_abs=error, atol_applied=allowed)

    passing = IntermediateComparison("example", "passed", (row("a", "pass", 1e-6, 1e-5), row("b", "not compared"),
                                                           row("c", "pass", 0.0, 0.0)))
    overlay = error_overlay(passing)
    assert overlay.ratios == {"a": pytest.approx(0.1), "c": 0.0} and overlay.over == ()
    assert overlay.summary() == "error: all 2 compared nodes within tolerance (max error 1e-06) on case example"
    failing = IntermediateComparison("min", "failed", (row("a", "fail", 3e-5, 1e-5), row("m", "mismatch")))
    overlay = error_overlay(failing)
    assert overlay.ratios == {"a": pytest.approx(3.0), "m": WORST_RATIO} and overlay.over == ("a", "m")
    assert overlay.summary() == "error: 2 of 2 compared nodes exceed the tolerance on case min"
    green, red = tolerance_colour(1.0), tolerance_colour(3.0)
    assert int(green[3:5], 16) > int(green[1:3], 16) and int(red[1:3], 16) > int(red[3:5], 16)
    legend = error_legend([1e-5, 0.0, 2e-4], case="min", rule="float32: rtol=0.0001 atol=1e-05").to_dict()
    assert legend["units"] == "× tolerance" and legend["case"] == "min"
    assert legend["tolerance"] == "float32: rtol=0.0001 atol=1e-05; allowed abs error per node 1e-05 … 0.0002"
