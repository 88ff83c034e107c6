"""One test per private torch/onnxscript API used through exporter.compat.

When torch moves or changes one of them, the failing test here names it.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir
import pytest
import torch

from exporter import compat
from exporter.compat import key_path_to_str
from exporter.pipeline.decompose import decompose
from exporter.pipeline.translations import onnx_registry


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))


@pytest.fixture(scope="module")
def program():
    return torch.export.export(Linear().eval(), (torch.randn(3, 4),), dynamic_shapes={"x": {0: torch.export.Dim("n")}})


def test_tree_flatten_with_path_lists_leaves_with_key_paths():
    @dataclasses.dataclass
    class Pair:
        a: torch.Tensor
        b: int

    torch.export.register_dataclass(Pair)
    flat = compat.tree_flatten_with_path({"p": Pair(torch.ones(1), 3), "none": None, "l": [1, torch.ones(1)]})
    assert [key_path_to_str("in", path) for path, _ in flat] == ["in.p.a", "in.p.b", "in.none", "in.l.0", "in.l.1"]
    assert [type(leaf).__name__ for _, leaf in flat] == ["Tensor", "int", "NoneType", "int", "Tensor"]


def test_pytree_children_of_containers_and_leaves():
    assert compat.pytree_children(torch.ones(1)) is None
    assert compat.pytree_children(None) is None
    assert [k for k, _ in compat.pytree_children({"a": 1, "b": [2]})] == ["a", "b"]
    assert [k for k, _ in compat.pytree_children((5, 6))] == ["0", "1"]


def test_size_oblivious_capture_keeps_a_size_one_dim_dynamic():
    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    x = torch.randn(1, 3)
    shapes = {"x": {0: torch.export.Dim.AUTO}}
    plain = torch.export.export(Double(), (x,), dynamic_shapes=shapes)
    with compat.size_oblivious_capture():
        oblivious = torch.export.export(Double(), (x,), dynamic_shapes=shapes)
    plain_dim = next(n for n in plain.graph.nodes if n.op == "placeholder").meta["val"].shape[0]
    oblivious_dim = next(n for n in oblivious.graph.nodes if n.op == "placeholder").meta["val"].shape[0]
    assert isinstance(plain_dim, int) and plain_dim == 1
    assert isinstance(oblivious_dim, torch.SymInt)


def test_default_and_minimum_opsets_are_ints_in_a_sane_order():
    assert 18 <= compat.torchlib_min_opset() <= compat.default_opset() <= 25


def test_onnx_registry_is_built_once_per_opset():
    registry = compat.onnx_registry(compat.default_opset())
    assert registry is compat.onnx_registry(compat.default_opset())
    assert registry.opset_version == compat.default_opset()
    assert registry.is_registered(torch.ops.aten.gelu.default)


def test_onnx_registry_with_is_a_copy_where_the_given_translations_win_in_order():
    def first(*args, **kwargs):
        raise AssertionError("never called")

    def second(*args, **kwargs):
        raise AssertionError("never called")

    target = torch.ops.aten.gelu.default
    torchlib = compat.registered_translation(18, target)
    registry = compat.onnx_registry_with(18, ((target, first), (target, second)))
    assert registry is compat.onnx_registry_with(18, ((target, first), (target, second)))
    assert registry is not compat.onnx_registry(18)
    assert registry.get_decomps(target)[0].onnx_function is second
    assert compat.registered_translation(18, target) is torchlib is not None
    assert compat.onnx_registry(18).get_decomps(target)[0].onnx_function is torchlib


def test_decomposition_pieces_give_what_run_decompositions_gives_and_translate(program):
    registry = onnx_registry(compat.default_opset())
    table = compat.onnx_decomposition_table(registry)
    assert table is compat.onnx_decomposition_table(registry)
    tables = compat.onnx_decomposition_tables(registry)
    assert tables is compat.onnx_decomposition_tables(registry)
    with compat.size_oblivious_capture():
        reference = program.run_decompositions(dict(table))
        decomposed = compat.run_decompositions(program, tables)
    assert isinstance(decomposed, torch.export.ExportedProgram)
    assert decomposed is not program

    def targets(ep):
        return [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]

    assert targets(decomposed) == targets(reference)
    assert "aten.gelu.default" in targets(decomposed)  # has an ONNX implementation, so it is kept whole
    graph_module = decomposed.graph_module
    compat.insert_type_promotion_nodes(graph_module)
    graph_module = compat.remove_assertion_nodes(graph_module)
    compat.replace_graph_module(decomposed, graph_module)
    assert decomposed.graph_module is graph_module
    assert not any("assert" in t for t in targets(decomposed))
    model = compat.translate_to_onnx_ir(decomposed, registry)
    assert isinstance(model, ir.Model)
    assert [v.name for v in model.graph.inputs] == ["x"]


class CompositeOps(torch.nn.Module):
    """Ops with CompositeImplicitAutograd kernels: some kept whole for ONNX, some decomposed."""

    def forward(self, x):
        y = torch.nn.functional.layer_norm(x, (x.shape[-1],))
        z = torch.einsum("bij,bjk->bik", y, y.transpose(1, 2)).softmax(-1)
        w = torch.nn.functional.interpolate(x.unsqueeze(1), scale_factor=2, mode="nearest")
        return z, w, torch.nn.functional.gelu(x, approximate="tanh"), x.flatten(1).norm(dim=1), x.std(1), x @ x


def test_the_decomposition_tables_are_built_again_once_a_library_registers_more_ops():
    registry = onnx_registry(compat.default_opset())
    before = compat.onnx_decomposition_tables(registry)
    assert compat.onnx_decomposition_tables(registry) is before  # cached
    library = torch.library.Library("wb_compat_test", "DEF")  # noqa: TOR901 - a new op, as a library would
    library.define("twice(Tensor x) -> Tensor")
    library.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
    after = compat.onnx_decomposition_tables(registry)
    assert after is not before and compat.onnx_decomposition_tables(registry) is after
    full, _ = __import__("torch.export", fromlist=["exported_program"]).exported_program \
        ._split_decomp_table_to_cia_and_python_decomp(dict(compat.onnx_decomposition_table(registry)))
    assert torch.ops.wb_compat_test.twice.default in full  # the new op is in the table it was built from


def _own_kernel_ops(table):
    from exporter.compat.decompositions import _runs_its_own_cia_kernel

    return {op for op, fn in table.items() if _runs_its_own_cia_kernel(fn)}


def test_the_composite_table_leaves_out_only_entries_that_run_the_ops_own_kernel_and_decomposes_alike():
    from torch.export import exported_program

    registry = onnx_registry(compat.default_opset())
    full, _ = exported_program._split_decomp_table_to_cia_and_python_decomp(
        dict(compat.onnx_decomposition_table(registry)))
    ours, _ = compat.onnx_decomposition_tables(registry)
    own_kernel = _own_kernel_ops(full)
    assert len(own_kernel) > 100  # torch still lists them: the filter still recognises its entries
    assert set(ours) == set(full) - own_kernel and not own_kernel & set(ours)
    program = torch.export.export(CompositeOps().eval(), (torch.randn(2, 4, 4),),
                                  dynamic_shapes={"x": {0: torch.export.Dim("b")}})
    with compat.size_oblivious_capture():
        reference = program.run_decompositions(dict(compat.onnx_decomposition_table(registry)))
        decomposed = compat.run_decompositions(program, compat.onnx_decomposition_tables(registry))

    def targets(ep):
        return [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]

    assert targets(decomposed) == targets(reference)
    assert "aten.layer_norm.default" in targets(decomposed)  # kept whole: its marker entry stays


def test_optimize_convert_version_and_rename_axes_work_on_onnx_ir(program):
    registry = compat.onnx_registry(compat.default_opset())
    model = compat.translate_to_onnx_ir(decompose(program, compat.default_opset()), registry)
    symbol = model.graph.inputs[0].shape[0].value
    compat.rename_onnx_axes(model, {symbol: "rows"})
    assert model.graph.inputs[0].shape[0].value == "rows"
    assert model.graph.outputs[0].shape[0].value == "rows"
    nodes_before = len(model.graph)
    optimized = compat.optimize_onnx_ir(model)
    assert isinstance(optimized, ir.Model) and len(optimized.graph) <= nodes_before
    converted = compat.convert_onnx_version(optimized, 21)
    assert converted.opset_imports[""] == 21


def test_output_paths_follow_the_output_pytree():
    class Outputs(torch.nn.Module):
        def forward(self, x):
            return {"a": x + 1, "b": (x * 2, x - 1)}

    program = torch.export.export(Outputs(), (torch.randn(2),))
    assert compat.output_paths(program) == ["a", "b.0", "b.1"]


def test_draft_export_report_is_attached_to_the_program():
    class ItemBranch(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    program = torch.export.draft_export(ItemBranch(), (torch.ones(2),))
    report = compat.draft_export_report(program)
    assert report is not None and len(report.failures) >= 1


def test_building_a_registry_does_not_log_torch_warnings_about_missing_torchvision(caplog):
    import logging

    with caplog.at_level(logging.WARNING):
        registry = compat.onnx_registry.__wrapped__(21)
    assert registry.opset_version == 21
    assert not [r for r in caplog.records if "torchvision" in r.getMessage()]


def test_torch_dim_kinds_are_told_apart():
    dx = torch.export.Dim("dx", min=2)
    assert compat.torch_dim_kind(torch.export.Dim.AUTO) == "hint"
    assert compat.torch_dim_kind(2 * dx) == "derived"
    assert compat.torch_dim_kind(dx) == "dim"
    assert compat.torch_dim_kind("dx") is None and compat.torch_dim_kind(3) is None
    assert compat.dim_hint_policy(torch.export.Dim.DYNAMIC(min=3)) == ("DYNAMIC", 3, None)
    assert compat.dim_hint_policy(torch.export.Dim.STATIC)[0] == "STATIC"


def test_module_state_changes_with_mode_and_in_place_weight_edits():
    model = Linear()
    before = compat.module_state(model)
    assert compat.module_state(model) == before
    model.eval()
    after_eval = compat.module_state(model)
    assert after_eval != before
    with torch.no_grad():
        model.linear.weight.add_(1.0)
    assert compat.module_state(model) != after_eval
    assert compat.module_state(lambda x: x) == ()


def test_module_state_changes_when_a_buffer_is_written_or_a_submodule_swapped():
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(3).eval())
    before = compat.module_state(model)
    model[0].running_mean.add_(1.0)
    after_write = compat.module_state(model)
    assert after_write != before
    model[0] = torch.nn.BatchNorm1d(3).eval()
    assert compat.module_state(model) != after_write


def test_tensors_state_changes_with_an_in_place_write_to_any_leaf():
    x, y = torch.zeros(2), torch.zeros(3)
    inputs = ((x,), {"y": y, "n": 3})
    before = compat.tensors_state(inputs)
    assert compat.tensors_state(inputs) == before and len(before) == 2
    y.add_(1.0)
    assert compat.tensors_state(inputs) != before
    assert compat.tensors_state(((torch.zeros(2),), {"y": y, "n": 3})) != compat.tensors_state(inputs)  # another tensor


def test_size_expression_names_symbols_and_static_sizes(program):
    placeholder = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name == "x")
    rows, width = placeholder.meta["val"].shape
    assert compat.size_expression(rows).isidentifier()  # a symbol such as s77
    assert compat.size_expression(width) == "4"


def test_train_mode_dependent_modules_cover_dropout_and_batch_norm_variants():
    kinds = compat.train_mode_dependent_modules()
    for module in (torch.nn.Dropout(), torch.nn.Dropout2d(), torch.nn.BatchNorm1d(3), torch.nn.BatchNorm2d(3)):
        assert isinstance(module, kinds)
    assert not isinstance(torch.nn.Linear(2, 2), kinds)


def test_fx_node_origins_lead_decomposed_nodes_back_to_captured_nodes(program):
    from exporter.pipeline.translate import registry_opset, resolve_opset

    decomposed = decompose(program, registry_opset(resolve_opset(None)))
    captured = {n.name for n in program.graph.nodes}
    origins = {n.name: compat.fx_node_origins(n) for n in decomposed.graph.nodes if n.op == "call_function"}
    assert origins and all(names and set(names) <= captured for names in origins.values()), origins
    gelu = next(name for name in origins if name.startswith("gelu"))
    assert origins[gelu] == ("gelu",)


def test_condition_holds_on_proves_refutes_or_cannot_tell_with_torch_value_ranges():
    import sympy

    from torch.utils._sympy.functions import FloorDiv

    s = sympy.Symbol("s", integer=True, positive=True)
    assert compat.condition_holds_on(sympy.Ne(s, 1), s, 2, None) is True
    assert compat.condition_holds_on(sympy.Ne(FloorDiv(s - 1, 4) + 1, 1), s, 5, 1000) is True
    assert compat.condition_holds_on(sympy.Eq(s, 1), s, 2, 10) is False
    assert compat.condition_holds_on(sympy.Ne(s, 1), s, 0, 10) is None


def test_derived_dim_parts_reads_root_scale_and_offset_of_a_torch_derived_dim():
    dx = torch.export.Dim("dx", max=64)
    root, scale, offset = compat.derived_dim_parts(2 * dx + 1)
    assert root.__name__ == "dx" and (scale, offset) == (2, 1)
    assert compat.derived_dim_parts(dx - 1)[1:] == (1, -1)


# -- unbacked symbols left pending between traces (the decompose stage) ----------------------


class ItemInScan(torch.nn.Module):
    """A scan whose body slices by ``p.item()``: every fake re-run of it makes an unbacked symbol."""

    def forward(self, rows, lengths):
        def body(row, p):
            out = torch.zeros((row.shape[0],))
            torch._check(p.item() > 1)
            torch._check(p.item() < row.shape[0])
            out[: p.item()] = row[: p.item()]
            return (out,)

        return torch.ops.higher_order.scan(body, [], [rows, lengths], [])


def item_in_scan_program():
    dyn = torch.export.Dim.DYNAMIC
    return torch.export.export(ItemInScan(), (torch.randn(4, 6), torch.tensor([2, 3, 4, 5])), strict=False,
                               dynamic_shapes={"rows": {0: dyn, 1: dyn}, "lengths": {0: dyn}})


def test_program_shape_env_is_the_shape_env_of_the_programs_fake_inputs(program):
    env = compat.program_shape_env(program)
    assert isinstance(env, torch.fx.experimental.symbolic_shapes.ShapeEnv)
    placeholder = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name == "x")
    assert placeholder.meta["val"].shape[0].node.shape_env is env


def test_drop_leftover_unbacked_symbols_empties_the_pending_list_a_retrace_would_fail_on():
    program = item_in_scan_program()
    env = compat.program_shape_env(program)
    env.create_unbacked_symint()  # what torch.onnx's type-promotion pass leaves behind
    assert len(env.pending_fresh_unbacked_symbols) == 1
    assert compat.drop_leftover_unbacked_symbols(program) == 1
    assert env.pending_fresh_unbacked_symbols == []
    assert compat.drop_leftover_unbacked_symbols(program) == 0


def test_unbacked_symbols_discarded_leaves_no_new_symbol_pending():
    program = item_in_scan_program()
    env = compat.program_shape_env(program)
    with compat.unbacked_symbols_discarded(program):
        env.create_unbacked_symint()
    assert env.pending_fresh_unbacked_symbols == []
    env.create_unbacked_symint()  # outside the block symbols are tracked again
    assert len(env.pending_fresh_unbacked_symbols) == 1
    env.pending_fresh_unbacked_symbols.clear()



def test_copy_program_keeps_names_signature_and_provenance_and_leaves_the_original_alone():
    class Named(torch.nn.Module):
        def forward(self, input):
            return input * 2

    program = torch.export.export(Named(), (torch.randn(3),))
    copy = compat.copy_program(program)
    assert copy is not program and copy.graph_module is not program.graph_module
    assert [n.name for n in copy.graph.nodes] == [n.name for n in program.graph.nodes]
    assert [n.name for n in copy.graph.nodes if n.op == "placeholder"] == ["input"]  # not input_1
    [mul] = [n for n in copy.graph.nodes if n.op == "call_function"]
    assert compat.fx_node_origins(mul) == ("mul",)
    mul.target = torch.ops.aten.add.Tensor
    copy.graph_module.recompile()
    assert [str(n.target) for n in program.graph.nodes if n.op == "call_function"] == ["aten.mul.Tensor"]
    assert torch.equal(copy.module()(torch.ones(3)), torch.full((3,), 3.0))


def test_compat_scan_carries_a_state_and_stacks_outputs_and_exports_as_one_scan_node():
    def step(total, x):
        total = total + x
        return total, total * 2

    xs = torch.arange(6.0).reshape(3, 2)
    last, ys = compat.scan(step, torch.zeros(2), xs)
    assert torch.equal(last, xs.sum(0)) and torch.equal(ys, 2 * xs.cumsum(0))

    class Running(torch.nn.Module):
        def forward(self, xs):
            return compat.scan(step, torch.zeros(xs.shape[1]), xs)[1]

    program = torch.export.export(Running(), (xs,), dynamic_shapes={"xs": {0: torch.export.Dim("n")}})
    assert [n.target.name() for n in program.graph.nodes if n.op == "call_function" and "scan" in str(n.target)] == ["scan"]


def two_slices_model() -> ir.Model:
    """x[..., :8] and x[..., 8:16] of a [2, 16] input, as onnxscript's SlicesSplit rule rewrites them."""
    import onnx
    from onnx import TensorProto, helper

    def ints(name, values):
        return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)

    nodes = [helper.make_node("Slice", ["x", "zero", "eight", "last"], ["a"]),
             helper.make_node("Slice", ["x", "eight", "sixteen", "last"], ["b"]),
             helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Neg", ["b"], ["nb"])]
    graph = helper.make_graph(nodes, "two_slices", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("ra", "nb")],
                              [ints("zero", [0]), ints("eight", [8]), ints("sixteen", [16]), ints("last", [-1])])
    return ir.serde.deserialize_model(helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)]))


def test_op_filtered_rewrite_rules_rewrite_exactly_as_onnxscripts_rules_and_leave_them_untouched():
    from onnxscript import rewriter

    library = list(rewriter._DEFAULT_REWRITE_RULES)
    linear = compat.linear_rewrite_rules(library)
    one_op = [i for i, rule in enumerate(library) if rule._target_pattern.output_nodes[0].op_identifier() is not None]
    assert any(not library[i]._target_pattern.has_single_output_node for i in one_op)  # SlicesSplit: two Slices
    assert len(one_op) > len(library) // 2 and len(linear) == len(library)
    assert all(linear[i] is not library[i] for i in one_op) and all("try_rewrite" not in vars(r) for r in library)
    assert all(linear[i] is library[i] for i in range(len(library)) if i not in one_op)

    from exporter import Session

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.linear = torch.nn.LayerNorm(16), torch.nn.Linear(16, 16)

        def forward(self, x):
            half = x[..., :8] * x[..., 8:]
            return self.linear(self.norm(x)).relu() + half.sum(-1, keepdim=True)

    import transformers

    torch.manual_seed(0)
    bert = transformers.BertModel(transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                          intermediate_size=64, vocab_size=100)).eval()
    ids = {"input_ids": torch.randint(0, 100, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.long)}
    translated = [Session(Block(), (torch.randn(2, 16),), {}).stage_output("translate"),
                  Session(bert, (), ids).stage_output("translate")]
    for model in (two_slices_model(), *translated):
        by_library, by_linear = model.clone(), model.clone()
        modified = rewriter.RewritePass(library)(by_library).modified
        assert rewriter.RewritePass(linear)(by_linear).modified == modified
        assert ir.serde.serialize_model(by_linear).SerializeToString() == \
            ir.serde.serialize_model(by_library).SerializeToString()


def test_a_linear_multi_output_rule_never_matches_a_node_of_another_op_type():
    from onnxscript import rewriter

    rule = next(r for r in rewriter._DEFAULT_REWRITE_RULES if not r._target_pattern.has_single_output_node)
    (linear,) = compat.linear_rewrite_rules([rule])
    model = two_slices_model()
    tried = []
    rule.match = lambda *args, **kwargs: tried.append(args[2].op_type)  # the library's matcher, spied on
    try:
        for node in list(model.graph):
            linear.try_rewrite(model, model.graph, node)
    finally:
        del rule.match
    assert tried == ["Slice", "Slice"]


class SmallConvNet(torch.nn.Module):
    """Convolutions, batch norm, pooling and a reshape by ``x.shape[0]`` (a constant once the
    batch is static)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.norm(self.conv(x)))
        return self.head(h.mean((2, 3)).reshape(x.shape[0], -1))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic batch"])
def test_constant_folding_skips_inference_only_where_the_outputs_are_known_and_folds_the_same(monkeypatch, dynamic):
    from onnxscript.optimizer import _constant_folding

    from exporter import ExportOptions, Session

    spec = {"x": {0: "batch"}} if dynamic else None
    translated = Session(SmallConvNet().eval(), (torch.randn(2, 3, 8, 8),), {},
                         ExportOptions(dynamic_shapes=spec)).stage_output("translate")
    inferred = []
    library_inference = _constant_folding.FoldConstantsPass._do_inference
    monkeypatch.setattr(_constant_folding.FoldConstantsPass, "_do_inference",
                        lambda self, node: inferred.append(node.op_type) or library_inference(self, node))
    ours_class = compat.onnxscript_optimizer_parts()["FoldConstantsPass"]
    results = []
    for fold_class in (_constant_folding.FoldConstantsPass, ours_class):
        inferred.clear()
        model = translated.clone()
        modified = fold_class(shape_inference=True, input_size_limit=1024, output_size_limit=1024)(model).modified
        results.append((ir.to_proto(model).SerializeToString(), modified, list(inferred)))
    (library_bytes, library_modified, by_library), (our_bytes, our_modified, by_us) = results
    assert our_bytes == library_bytes and our_modified == library_modified
    if dynamic:  # every output carries the symbolic batch: inference still runs on each node
        assert by_us == by_library
    else:  # the translation knew most outputs' shapes: inference only where it did not
        assert 0 < len(by_library) and len(by_us) <= len(by_library) // 2, (by_us, by_library)


def test_translation_reuses_op_signatures_and_gives_the_same_model_and_leaves_onnx_ir_as_it_was(monkeypatch):
    from onnx_ir import schemas
    from torch.onnx._internal.exporter import _core

    from exporter import Session

    library_method = schemas.OpSignature.__dict__["from_op_schema"]
    built = []
    library_build = schemas.OpSignature.from_op_schema
    monkeypatch.setattr(schemas.OpSignature, "from_op_schema",
                        classmethod(lambda cls, schema: built.append(schema.name) or library_build(schema)))
    spied = schemas.OpSignature.__dict__["from_op_schema"]
    program = Session(SmallConvNet().eval(), (torch.randn(2, 3, 8, 8),), {}).stage_output("decompose")
    registry = onnx_registry(18)
    by_library = _core._exported_program_to_onnx_program(program, registry=registry).model
    per_op = len(built)
    built.clear()
    ours = compat.translate_to_onnx_ir(program, registry)
    assert ir.to_proto(ours).SerializeToString() == ir.to_proto(by_library).SerializeToString()
    assert len(built) < per_op  # each schema built once at most (none when an earlier test built them)
    assert schemas.OpSignature.__dict__["from_op_schema"] is spied  # what was there before is back
    monkeypatch.undo()
    assert schemas.OpSignature.__dict__["from_op_schema"] is library_method


class SameDtypes(torch.nn.Module):
    def forward(self, x, mask):
        return torch.where(mask > 0, x * 2.0, x.sum(-1, keepdim=True)), mask.shape[0] * mask


class FloatPlusSize(torch.nn.Module):
    def forward(self, x, mask):
        return x + x.shape[0]


class LongPlusFloat(torch.nn.Module):
    def forward(self, x, mask):
        return x + mask


class IntTrueDivision(torch.nn.Module):
    def forward(self, x, mask):
        return x * (mask / 2)


class FloatTimesSize(torch.nn.Module):
    def forward(self, x, mask):
        return mask * x.shape[0] * 0.5


@pytest.mark.parametrize(("module", "casts"), [(SameDtypes(), False), (LongPlusFloat(), True), (IntTrueDivision(), True),
                                               (FloatTimesSize(), True), (FloatPlusSize(), True)])
def test_type_promotion_is_skipped_only_where_torch_s_pass_would_change_nothing(module, casts):
    """``type_promotion_needed`` asks the pass's own rules of the recorded values: False only
    where running the pass leaves the graph as it was; the skipping pass gives torch's graph."""
    from torch.onnx._internal.exporter import _fx_passes

    x, mask = torch.randn(3, 4), torch.ones(3, 4, dtype=torch.long)
    batch = torch.export.Dim("batch")
    program = torch.export.export(module, (x, mask), dynamic_shapes=({0: batch}, {0: batch}))

    def graph_of(insert):
        graph_module = compat.copy_program(program).graph_module
        insert(graph_module)
        return [n.format_node() for n in graph_module.graph.nodes]

    before = [n.format_node() for n in program.graph.nodes]
    with torch.no_grad():
        torch_s = graph_of(_fx_passes.insert_type_promotion_nodes)
    assert compat.type_promotion_needed(program.graph_module) is casts
    assert (torch_s != before) is casts
    assert graph_of(compat.insert_type_promotion_nodes) == torch_s


def test_as_if_exporting_sets_torch_compilers_flags_records_who_asked_and_restores_them_after_an_error():
    def is_helper() -> bool:  # a one-line is_* helper, as transformers wraps the query
        return torch.compiler.is_exporting()

    def model_code() -> bool:
        return is_helper() and torch.compiler.is_compiling()

    with pytest.raises(RuntimeError), compat.as_if_exporting() as asked:
        assert model_code() is True
        raise RuntimeError("a model that raises")
    assert [line for file, line in asked] == [model_code.__code__.co_firstlineno + 1]
    assert all(file == __file__ for file, _ in asked)
    assert torch.compiler.is_exporting() is False and torch.compiler.is_compiling() is False
    assert torch.compiler._is_exporting_flag is False and torch.compiler._is_compiling_flag is False


def test_tolerant_constraint_solver_records_what_sympy_could_not_solve_and_restores_the_solver(monkeypatch):
    from torch.fx.experimental.symbolic_shapes import DimConstraints

    message = "The inequality, Eq(x/16 - 4*(((x/8)//8)), 0), cannot be solved using\nsolve_univariate_inequality."

    def gives_up(self):
        raise NotImplementedError(message)

    monkeypatch.setattr(DimConstraints, "solve", gives_up)
    with compat.tolerant_constraint_solver() as outer, compat.tolerant_constraint_solver() as inner:
        DimConstraints.solve(object())  # returns: the export goes on with what was solved
    assert inner == [" ".join(message.split())] and outer == []
    assert DimConstraints.solve is gives_up  # restored once the last user left
    with pytest.raises(NotImplementedError):
        DimConstraints.solve(object())


def test_unchanging_module_to_returns_the_module_when_nothing_would_change_and_restores_to():
    original = torch.nn.Module.to
    linear = torch.nn.Linear(2, 2)
    weight = linear.weight
    with compat.unchanging_module_to(), compat.unchanging_module_to():
        assert linear.to(torch.float32) is linear and linear.to("cpu", torch.float32) is linear
        assert linear.weight is weight
        assert linear.to(dtype=torch.float64).weight.dtype == torch.float64  # a real change goes through
        with pytest.raises(TypeError, match="floating point or complex"):
            linear.to(torch.int64)  # torch's own error
    assert torch.nn.Module.to is original
