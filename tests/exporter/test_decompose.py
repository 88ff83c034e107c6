"""The decompose stage (exporter/pipeline/decompose.py): which decompositions run, in which
order, and what a re-export of the same program needs."""

from __future__ import annotations

import pytest
import torch

from exporter import compat
from exporter.pipeline.decompose import decompose
from exporter.pipeline.translations import onnx_registry
from test_torch_compat import Linear, item_in_scan_program


@pytest.fixture(scope="module")
def program():
    return torch.export.export(Linear().eval(), (torch.randn(3, 4),), dynamic_shapes={"x": {0: torch.export.Dim("n")}})


def test_decompose_gives_the_graph_run_decompositions_gives(program):
    registry = onnx_registry(compat.default_opset())
    table = compat.onnx_decomposition_table(registry)
    with compat.size_oblivious_capture():
        reference = program.run_decompositions(dict(table))
    ours = decompose(program, compat.default_opset())
    assert isinstance(ours, torch.export.ExportedProgram) and ours is not program

    def targets(ep):
        return [str(n.target) for n in ep.graph.nodes if n.op == "call_function" and "assert" not in str(n.target)]

    assert [t for t in targets(ours) if "prims.convert_element_type" not in t] == targets(reference)
    assert "aten.gelu.default" in targets(ours)  # has an ONNX implementation, so it is kept whole
    assert compat.onnx_decomposition_tables(registry) is compat.onnx_decomposition_tables(
        onnx_registry(compat.default_opset())
    )


def test_decompose_keeps_grouped_mm_whole_for_our_translation():
    class GroupedMatmul(torch.nn.Module):
        def forward(self, a, b, offs):
            return torch._grouped_mm(a, b, offs=offs)

    args = (torch.randn(6, 8, dtype=torch.bfloat16), torch.randn(2, 8, 8, dtype=torch.bfloat16),
            torch.tensor([2, 6], dtype=torch.int32))
    program = torch.export.export(GroupedMatmul(), args)  # the pinned torch (2.13) captures it on CPU
    targets = {n.target for n in decompose(program, 18).graph.nodes if n.op == "call_function"}
    assert torch.ops.aten._grouped_mm.default in targets


def test_decompose_decomposes_a_scan_over_item_twice_leaving_nothing_pending():
    program = item_in_scan_program()
    for _ in range(2):
        decomposed = decompose(program, 18)
        assert compat.program_shape_env(program).pending_fresh_unbacked_symbols == []
    assert any("scan" in str(node.target) for node in decomposed.graph.nodes)


class TranslatedWhole(torch.nn.Module):
    """Only ops torch.onnx translates whole (layer_norm, linear, gelu, reshape, add)."""

    def __init__(self):
        super().__init__()
        self.norm, self.linear = torch.nn.LayerNorm(8), torch.nn.Linear(8, 8)

    def forward(self, input):  # ``input``: a name a graph copy would rename
        y = torch.nn.functional.gelu(self.linear(self.norm(input)))
        return (input + y).reshape(input.shape[0], -1)


class BufferCounter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return x * 2


class Branching(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1, (x,))


def _onnx_ops(program):
    from exporter.pipeline.translations import onnx_registry

    model = compat.translate_to_onnx_ir(program, onnx_registry(18))
    return [node.op_type for node in model.graph]


def test_a_program_of_ops_translated_whole_is_copied_not_retraced_and_translates_alike(monkeypatch):
    program = torch.export.export(TranslatedWhole().eval(), (torch.randn(2, 4, 8),),
                                  dynamic_shapes={"input": {0: torch.export.Dim("batch")}})
    before = [(n.name, str(n.target)) for n in program.graph.nodes]
    copied = decompose(program, 18)
    monkeypatch.setattr(compat, "retrace_changes_graph", lambda *_, **__: True)
    retraced = decompose(program, 18)
    captured_calls = {n.name for n in program.graph.nodes if n.op == "call_function"}
    assert captured_calls <= {n.name for n in copied.graph.nodes}  # the captured graph's own nodes
    assert not captured_calls <= {n.name for n in retraced.graph.nodes}  # a retrace renames them
    assert _onnx_ops(copied) == _onnx_ops(retraced)
    assert [(n.name, str(n.target)) for n in program.graph.nodes] == before  # the captured program is untouched
    origins = {compat.fx_node_origins(n) for n in copied.graph.nodes if n.op == "call_function"}
    assert all(len(names) == 1 and names[0] in captured_calls for names in origins if names)


@pytest.mark.parametrize("module, args", [
    (BufferCounter(), (torch.randn(3),)),  # a mutation to functionalize
    (Branching(), (torch.randn(3),)),  # a higher-order op
    (torch.nn.BatchNorm1d(3).eval(), (torch.randn(2, 3),)),  # aten.batch_norm: decomposed for ONNX
], ids=["buffer-mutation", "cond", "decomposed-op"])
def test_a_program_the_retrace_changes_is_retraced(module, args):
    from exporter.pipeline.translations import onnx_registry

    program = torch.export.export(module, args)
    registry = onnx_registry(18)
    assert compat.retrace_changes_graph(program, registry, compat.onnx_decomposition_tables(registry))


def test_translated_whole_programs_need_no_retrace_and_reshape_only_when_its_decomposition_is_undone():
    from exporter.pipeline.translations import onnx_registry

    program = torch.export.export(TranslatedWhole().eval(), (torch.randn(2, 4, 8),))
    registry = onnx_registry(18)
    tables = compat.onnx_decomposition_tables(registry)
    assert compat.retrace_changes_graph(program, registry, tables)  # aten.reshape decomposes to a view
    assert not compat.retrace_changes_graph(program, registry, tables, undone=frozenset({torch.ops.aten.reshape.default}))


class OneMinusIntegerMask(torch.nn.Module):
    """``1.0 - attention_mask`` on an int64 mask, as XLNet and ProphetNet write it: torch's
    own rsub decomposition leaves a graph its type-promotion pass cannot run."""

    def forward(self, x, attention_mask):
        return x * (1.0 - attention_mask)[..., None]


@pytest.mark.parametrize("spec", ["static", "dynamic"])
def test_one_minus_an_integer_mask_exports_and_matches_eager(spec):
    from exporter import ExportOptions, export

    x, mask = torch.randn(2, 5, 3), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    dims = {"x": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}} if spec == "dynamic" else None
    session = export(OneMinusIntegerMask(), x, mask, options=ExportOptions(dynamic_shapes=dims))

    assert not [n for n in session.decomposed_program.graph.nodes if "rsub" in str(n.target)]
    assert session.verify().status == "passed"


@pytest.mark.parametrize(("values", "other", "alpha"), [
    (torch.tensor([0, 1, 5, -3]), 1.0, 1),
    (torch.tensor([0, 1, 255, 7], dtype=torch.uint8), 1, 1),
    (torch.tensor([0, 2, -7]), 2.5, 3),
    (torch.tensor([0, 2, -7], dtype=torch.int32), 4, 2),
])
def test_the_local_rsub_of_an_integer_tensor_gives_torchs_rsub_and_its_dtype(values, other, alpha):
    from exporter.pipeline.local_decompositions import rsub_scalar

    expected = torch.rsub(values, other, alpha=alpha)
    got = rsub_scalar(values, other, alpha)

    assert got.dtype == expected.dtype
    assert torch.equal(got, expected)


def test_one_minus_a_float_tensor_keeps_torchs_decomposition_and_its_graph():
    class OneMinus(torch.nn.Module):
        def forward(self, x):
            return 1.0 - x

    program = torch.export.export(OneMinus(), (torch.randn(2, 3),))
    targets = [str(n.target) for n in decompose(program, compat.default_opset()).graph.nodes if n.op == "call_function"]

    assert "aten.sub.Tensor" in targets and "aten.neg.default" not in targets


def _bert_and_gpt2(kind):
    import transformers

    torch.manual_seed(0)
    if kind == "bert":
        model = transformers.BertModel(transformers.BertConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=100))
    else:
        model = transformers.GPT2Model(transformers.GPT2Config(
            n_embd=32, n_layer=1, n_head=2, vocab_size=100, use_cache=False, bos_token_id=0, eos_token_id=0))
    kwargs = {"input_ids": torch.randint(0, 100, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.long)}
    names = {0: "batch", 1: "seq"}
    return model.eval(), kwargs, {"input_ids": names, "attention_mask": names}


def _whisper_encoder():
    """Whisper's encoder from a tiny config: its 30 s of 80 mel bins, a dynamic batch."""
    import transformers

    torch.manual_seed(0)
    config = transformers.WhisperConfig(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64)
    encoder = transformers.WhisperModel(config).get_encoder().eval()
    return encoder, {"input_features": torch.randn(2, 80, 3000)}, {"input_features": {0: "batch"}}


def _zoo_case(kind):
    if kind in ("bert", "gpt2"):
        return _bert_and_gpt2(kind)
    if kind == "whisper_encoder":
        return _whisper_encoder()
    from exporter.sweep.zoo import load_case

    case = load_case("transformers", kind)
    assert not case.args
    if kind == "vit":  # its height and width are static (position embeddings), its batch is not
        return case.model, {"pixel_values": case.kwargs["pixel_values"]}, {"pixel_values": {0: "batch"}}
    return case.model, case.kwargs, case.dynamic_shapes


def _copy_and_retrace(model, args, kwargs, names, monkeypatch):
    """The same export through decompose's copy path (asserted taken) and through the retrace."""
    from exporter import ExportOptions, Session

    retraces = []
    run_decompositions = compat.run_decompositions
    monkeypatch.setattr(compat, "run_decompositions", lambda *a, **k: retraces.append(1) or run_decompositions(*a, **k))
    copied = Session(model, args, kwargs, ExportOptions(dynamic_shapes=names))
    assert copied.run().ok, copied.failed_stage
    taken = not retraces
    monkeypatch.setattr(compat, "retrace_changes_graph", lambda *_, **__: True)
    retraced = Session(model, args, kwargs, ExportOptions(dynamic_shapes=names))
    assert retraced.run().ok and retraces
    return copied, retraced, taken


@pytest.mark.parametrize("kind", ["bert", "gpt2", "llama", "qwen2", "t5", "vit", "whisper_encoder"])
def test_a_transformers_model_takes_the_copy_path_with_the_onnx_ops_and_outputs_of_the_retrace(kind, monkeypatch):
    """Dropout, ``to``, ``__and__``, ``contiguous``, ``min``, T5's in-place ``add_``, ViT's
    ``flatten``, same-shape reshapes and the ``-1`` sizes are done on a copy as the retrace
    does them (the issue's list: BERT, GPT-2, Llama, Qwen2, T5, ViT, Whisper's encoder) (GPT-2's symbolic ``view(-1, 32)`` stays as written, as the retrace leaves it;
    Llama's dead ``arange`` goes): no retrace, the same optimized ONNX ops in the same order,
    the same outputs at another size."""
    import numpy as np

    model, kwargs, names = _zoo_case(kind)
    copied, retraced, taken = _copy_and_retrace(model, (), kwargs, names, monkeypatch)
    assert taken
    _assert_retrace_ops_or_fewer_reshapes(copied, retraced, fewer=kind == "whisper_encoder")
    other = {name: _another_size(value, names[name]) for name, value in kwargs.items()}
    for got, want in zip(copied.run_onnx(**other), retraced.run_onnx(**other), strict=True):
        np.testing.assert_array_equal(got, want)


def _assert_retrace_ops_or_fewer_reshapes(copied, retraced, *, fewer):
    """The optimized ONNX ops in the same order; with ``fewer``, the copy may lack a
    ``Reshape`` the retrace keeps (Whisper's encoder: a reshape of the attention output to
    its own shape, which the copy path drops and the optimizer cannot prove a no-op)."""
    import difflib

    mine = [n.op_type for n in copied.model_proto.graph.node]
    theirs = [n.op_type for n in retraced.model_proto.graph.node]
    if not fewer:
        assert mine == theirs
        return
    changes = [(tag, theirs[j1:j2]) for tag, _, _, j1, j2 in
               difflib.SequenceMatcher(a=mine, b=theirs, autojunk=False).get_opcodes() if tag != "equal"]
    assert changes and all(tag == "insert" and set(ops) == {"Reshape"} for tag, ops in changes), changes


def _another_size(example, axes):
    """An input like ``example`` with each named axis one longer: ids below 50, masks of ones."""
    shape = [size + 1 if axis in axes else size for axis, size in enumerate(example.shape)]
    if example.is_floating_point():
        return torch.randn(shape)
    return torch.ones(shape, dtype=example.dtype) if example.max() <= 1 else torch.randint(0, 50, shape)


class Reshapes(torch.nn.Module):
    """A reshape of a contiguous input (its ``-1`` stays), of a transposed one (its ``-1``
    is the static 2), and a ``contiguous`` of each."""

    def forward(self, x):
        batch, seq, _ = x.shape
        heads = x.reshape(batch, seq, -1, 4).transpose(1, 2)
        merged = heads.reshape(batch, -1, seq, 4)
        return merged.contiguous() * 2, x.contiguous().reshape(batch, seq, 2, -1) + 1


class SymbolicReshape(torch.nn.Module):
    """A reshape of a transposed input whose ``-1`` stands for batch*seq: an expression only
    the retrace writes."""

    def forward(self, x):
        return x.transpose(0, 1).reshape(-1, 8) * 2


class SelfAttention(torch.nn.Module):
    """``nn.MultiheadAttention``'s packed projection: an ``unflatten`` of a (seq, batch, 3E)
    tensor, which the retrace writes as a ``view`` with the graph's own ``sym_size`` nodes."""

    def __init__(self):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


class TinyConvNet(torch.nn.Module):
    """The torchvision/timm idioms: eval batch norm, in-place activations (on a batch norm's
    output and on a convolution's), ``chunk``, an in-place eval dropout, global average
    pooling and ``flatten`` (whose batch size no earlier node computes)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 1)
        self.acts = torch.nn.ModuleList([torch.nn.ReLU(inplace=True), torch.nn.Hardswish(inplace=True),
                                         torch.nn.SiLU(inplace=True)])
        self.dropout = torch.nn.Dropout(0.2, inplace=True)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        x = self.acts[0](self.norm(self.conv(x)))
        left, right = x.chunk(2, dim=1)  # ShuffleNet's channel split
        x = torch.cat([left, right * 2], dim=1)
        x = self.acts[2](self.acts[1](self.conv2(x)))
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(self.dropout(x))


def _tiny_conv_net():
    torch.manual_seed(0)
    model = TinyConvNet()
    model.norm.running_mean.uniform_(-1, 1)
    model.norm.running_var.uniform_(0.5, 2)
    return model.eval()


@pytest.mark.parametrize(("model", "copied_path"), [(Reshapes(), True), (SymbolicReshape(), False),
                                                    (SelfAttention().eval(), True), (_tiny_conv_net(), True)])
def test_reshapes_attention_and_conv_net_idioms_follow_the_retrace_on_the_copy_path(model, copied_path, monkeypatch):
    import numpy as np

    image = isinstance(model, TinyConvNet)
    names = {"x": {0: "batch"} if image else {0: "batch", 1: "seq"}}
    example, other = (torch.randn(2, 3, 8, 8), torch.randn(5, 3, 8, 8)) if image else (torch.randn(2, 3, 8), torch.randn(4, 5, 8))
    copied, retraced, taken = _copy_and_retrace(model, (example,), {}, names, monkeypatch)
    assert taken == copied_path
    assert [n.op_type for n in copied.model_proto.graph.node] == [n.op_type for n in retraced.model_proto.graph.node]
    x = other
    wanted = model(x)
    for got, want in zip(copied.run_onnx(x), wanted if isinstance(wanted, tuple) else (wanted,), strict=True):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_undoing_the_retrace_work_leaves_the_captured_program_as_it_was():
    from exporter.pipeline.decompose import undo_retrace_work

    model, kwargs, names = _bert_and_gpt2("bert")
    from exporter import ExportOptions, Session

    program = Session(model, (), kwargs, ExportOptions(dynamic_shapes=names)).exported_program
    before = [(n.name, str(n.target), str(n.args)) for n in program.graph.nodes]
    copy = compat.copy_program(program)
    assert undo_retrace_work(copy.graph_module)
    targets = {str(n.target) for n in copy.graph.nodes}
    assert not targets & {"aten.dropout.default", "aten.__and__.Tensor", "aten._assert_tensor_metadata.default"}
    assert [(n.name, str(n.target), str(n.args)) for n in program.graph.nodes] == before


class ReturnsItsConversions(torch.nn.Module):
    """Outputs that are a ``to`` keeping the dtype, one changing it, and an eval dropout: the
    signature names the outputs after those nodes."""

    def __init__(self):
        super().__init__()
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, x, mask):
        return x.to(torch.float32), mask.to(torch.float32), self.dropout(x * 2)


def test_outputs_that_are_conversions_or_an_eval_dropout_take_the_copy_path_named_and_computed_as_retraced(monkeypatch):
    """The signature names such outputs after the node they become (here one is the input
    itself), as the retrace does."""
    import numpy as np

    model = ReturnsItsConversions().eval()
    x, mask = torch.randn(2, 3), torch.ones(2, 3, dtype=torch.long)
    names = {"x": {0: "batch"}, "mask": {0: "batch"}}
    copied, retraced, taken = _copy_and_retrace(model, (x, mask), {}, names, monkeypatch)
    assert taken
    assert [o.name for o in copied.model_proto.graph.output] == [o.name for o in retraced.model_proto.graph.output]
    assert [n.op_type for n in copied.model_proto.graph.node] == [n.op_type for n in retraced.model_proto.graph.node]
    x, mask = torch.randn(4, 3), torch.zeros(4, 3, dtype=torch.long)
    for got, want in zip(copied.run_onnx(x, mask), model(x, mask), strict=True):
        np.testing.assert_allclose(got, want.numpy())


class NoGradTable(torch.nn.Module):
    """A lookup under ``@torch.no_grad()``, as transformers' sinusoidal position tables are."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(16, 4))

    @torch.no_grad()
    def forward(self, ids):
        return self.table.index_select(0, ids.view(-1)) * 2  # THE LOOKUP LINE


def test_nodes_inlined_from_a_no_grad_subgraph_keep_the_models_source_line_not_generated_code():
    import inspect

    from exporter.frames import source_of_stack

    program = torch.export.export(NoGradTable().eval(), (torch.arange(6).view(2, 3),))
    assert "wrap_with_set_grad_enabled" in str(program.graph)  # the subgraph this is about
    decomposed = decompose(program, compat.default_opset())
    lines, start = inspect.getsourcelines(NoGradTable.forward)
    lookup_line = start + next(i for i, text in enumerate(lines) if "THE LOOKUP LINE" in text)
    traces = {node.name: node.meta.get("stack_trace") for node in decomposed.graph.nodes
              if node.op == "call_function" and "aten" in str(node.target)}
    assert traces, "no aten node in the decomposed graph"
    for name, trace in traces.items():
        assert "<eval_with_key>" not in trace, name
        assert f"test_decompose.py:{lookup_line} in forward" in source_of_stack(trace), name
