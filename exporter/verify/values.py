"""Edge values: masks and ids at the values where exported models go wrong, at the example size.

A size sweep keeps each mask's pattern and draws ids inside the example's range, so it never
feeds a mask row with nothing to attend to, or the last id of a vocabulary. Those are values
real callers send (a fully padded sequence in a batch, the last token of a vocabulary) and
where a translation can differ from PyTorch without any error. :func:`edge_values` picks a few
cases, each changing one input of the example inputs:

- a *mask* (a bool tensor, or an integer tensor of 0s and 1s not read by an embedding):
  every key kept, every key masked, and one row with every key masked (a fully masked row),
  each unless the example already is that value. Which value keeps a key is read from the
  example (:func:`~exporter.cases.inputs.mask_kept_value`): 1 for an ``attention_mask``,
  False for a ``src_key_padding_mask``;
- *ids* (an integer tensor an ``nn.Embedding`` / ``aten.embedding`` reads, found in the
  captured program through view-like ops): all 0 and all ``rows - 1``, the last row of the
  embedding, never past it.

:func:`explain` turns a failing edge case into a plain finding: what differs, the likely cause
found from the program (an attention whose mask comes from that input), and the export option
that fixes it where there is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..artifacts import ExportArtifacts, ExportInputs
from ..cases import is_mask
from ..cases.inputs import mask_kept_value
from ..masked_attention import attention_nodes
from ..program_symbols import input_placeholders

__all__ = ["EdgeValue", "Explanation", "eager_returns_nan", "edge_values", "edge_value_inputs", "explain"]

# Ops through which an input's values reach an embedding unchanged (shape and dtype only).
_VIEW_LIKE = frozenset({
    "view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "expand", "slice", "select",
    "clone", "contiguous", "to", "_to_copy", "alias", "flatten", "permute", "transpose", "t",
    "repeat", "index_select", "lift_fresh_copy", "detach",
})
_MASK_KINDS = ("all_ones", "all_zeros", "row_zeros")
_FULLY_MASKED = ("all_zeros", "row_zeros")


@dataclass(frozen=True)
class EdgeValue:
    """One edge-value case: ``input`` (its path) set to a value of ``kind`` at the example size.

    ``kind``: ``all_ones``, ``all_zeros``, ``row_zeros`` (masks), ``ids_first``, ``ids_last``
    (ids; ``vocabulary`` is the embedding's row count). ``label`` says it for a person."""

    input: str
    kind: str
    label: str
    dtype: str
    vocabulary: int | None = None

    @property
    def name(self) -> str:
        """The case name: ``attention_mask: one row all False (a fully masked row)``."""
        return f"{self.input}: {self.label}"

    @property
    def masks_a_row(self) -> bool:
        """Whether some row of the mask keeps no key at all (all 0 for an ``attention_mask``, all
        True for a ``src_key_padding_mask``: see :func:`~exporter.cases.inputs.mask_kept_value`)."""
        return self.kind in _FULLY_MASKED


def _op_name(node: Any) -> str:
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    schema = getattr(target, "_schema", None)
    if schema is not None:
        name = schema.name.split("::")[-1]
    return name.split(".")[0]


def _embedding_rows(placeholder: Any) -> int | None:
    """Rows of the embedding that reads this placeholder (through view-like ops), if any."""
    stack, seen = [placeholder], set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for user in node.users:
            if user.op != "call_function":
                continue
            name = _op_name(user)
            if name == "embedding" and len(user.args) > 1 and user.args[1] is node:
                weight = getattr(user.args[0], "meta", {}).get("val")
                if weight is not None and len(weight.shape) == 2:
                    try:
                        return int(weight.shape[0])
                    except (TypeError, ValueError):  # a symbolic vocabulary: unknown
                        return None
            elif name in _VIEW_LIKE and user.args and user.args[0] is node:
                stack.append(user)
    return None


def _example_tensors(session: ExportInputs) -> dict[str, Any]:
    import torch

    values = session.inputs.values
    return {leaf.path: values[leaf.index] for leaf in session.inputs.leaves
            if leaf.index < len(values) and isinstance(values[leaf.index], torch.Tensor)}


def edge_values(session: ExportInputs, program: Any) -> tuple[EdgeValue, ...]:
    """The edge-value cases for a session's inputs (see the module docstring), in input order."""
    import torch

    placeholders = input_placeholders(program, session.inputs)
    cases: list[EdgeValue] = []
    for path, example in _example_tensors(session).items():
        if example.numel() == 0 or example.dtype.is_floating_point or example.is_complex():
            continue
        dtype = str(example.dtype).removeprefix("torch.")
        rows = _embedding_rows(placeholders[path]) if path in placeholders else None
        if rows is not None and example.dtype != torch.bool:
            for kind, value, label in (("ids_first", 0, "all 0 (the first id)"),
                                       ("ids_last", rows - 1, f"all {rows - 1} (the last id of a {rows}-row embedding)")):
                if not bool((example == value).all()):
                    cases.append(EdgeValue(path, kind, label, dtype, rows))
            continue
        if not is_mask(example):
            continue
        true, false = ("True", "False") if example.dtype == torch.bool else ("ones", "zeros")
        if not mask_kept_value(example):  # True / 1 masks a key here
            true, false = false, true
        one_row = example.dim() >= 1 and example.numel() // max(example.shape[-1], 1) > 1
        labels = {
            "all_ones": f"all {true}",
            "all_zeros": f"all {false} (every row fully masked)",
            "row_zeros": f"one row all {false} (a fully masked row)",
        }
        for kind in _MASK_KINDS:
            if kind == "row_zeros" and not one_row:
                continue  # a single row: the same as all zeros
            if torch.equal(_mask_value(example, kind), example):
                continue
            cases.append(EdgeValue(path, kind, labels[kind], dtype))
    return tuple(cases)


def _mask_value(example: Any, kind: str) -> Any:
    """``all_ones``: every key kept; ``all_zeros``: every key masked; ``row_zeros``: the
    example with every key of its first row masked (in the example's own values)."""
    import torch

    kept = mask_kept_value(example)
    if kind == "all_ones":
        return torch.full_like(example, kept)
    if kind == "all_zeros":
        return torch.full_like(example, 1 - kept)
    value = example.clone()
    rows = value.reshape(-1, value.shape[-1]) if value.dim() else value.reshape(1, 1)
    rows[0] = 1 - kept  # the first row of the batch: no position left
    return rows.reshape(example.shape)


def eager_returns_nan(edge: EdgeValue, expected: Any, at_example: Any) -> str | None:
    """Why a failing edge case is no case against the export, or None: it masks every key of a
    row and eager PyTorch itself returns NaN there (``nn.TransformerEncoder`` does), where it
    returned none with the example's mask. ``expected`` / ``at_example``: eager's output
    tensors for the edge case and at the example."""
    import torch

    def nan(outputs: Any) -> bool:
        return any(isinstance(t, torch.Tensor) and t.is_floating_point() and bool(t.isnan().any()) for t in outputs or ())

    if not edge.masks_a_row or not nan(expected) or nan(at_example):
        return None
    return ("eager PyTorch itself returns NaN with every key of a row masked, so there is nothing to compare "
            "the ONNX model's numbers with there")


def edge_value_inputs(session: ExportInputs, edge: EdgeValue) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The example ``(args, kwargs)`` with ``edge.input`` set to the edge value."""
    import torch

    bound = session.inputs
    leaf = next(leaf for leaf in bound.leaves if leaf.path == edge.input)
    example = bound.values[leaf.index]
    if edge.kind in _MASK_KINDS:
        value = _mask_value(example, edge.kind)
    else:
        fill = 0 if edge.kind == "ids_first" else int(edge.vocabulary or 1) - 1
        value = torch.full_like(example, fill)
    leaves = list(bound.values)
    leaves[leaf.index] = value
    return bound.rebuild(leaves)


@dataclass(frozen=True)
class Explanation:
    """What :func:`explain` concludes about a failing edge case: ``message`` says what
    differs in plain words, ``cause`` why, ``fix`` what to do, ``options`` the export options
    that fix it."""

    message: str
    cause: str | None = None
    fix: str | None = None
    options: tuple[tuple[str, Any], ...] = ()


class Located(Protocol):
    """Where a divergence was located (a :class:`~exporter.verify.divergence.Divergence`): which
    case, and which stage's output first differed."""

    @property
    def case(self) -> str: ...

    @property
    def stage(self) -> str: ...


def explain(edge: EdgeValue, session: ExportArtifacts, divergence: Located | None = None) -> Explanation:
    """A failing edge case in plain words. The cause comes from the program, not from the
    model's name: a fully masked row that reaches a masked ``scaled_dot_product_attention``
    (or a softmax); a divergence located in the captured program for this case rules the
    translation out."""
    if edge.masks_a_row:
        found = _attention_reading(session, edge.input)
        # A divergence already in the captured program is not the translation's doing.
        in_capture = divergence is not None and divergence.case == edge.name and divergence.stage == "capture"
        if found and not in_capture:
            attention = found[0]
            rows = session.options.fully_masked_rows
            where = f" ({attention.source})" if attention.source else ""
            if rows != "zero":
                returns = "the mean of v" if attention.mask_dtype == "bool" else "NaN"
                filled = "the lowest float value, not -inf," if attention.mask_dtype == "bool" else "-inf"
                return Explanation(
                    f"onnxruntime returns {returns} where PyTorch returns 0 for a fully masked row",
                    f"the ONNX translation of scaled_dot_product_attention{where} adds {filled} at masked keys, "
                    f"so the softmax over a row whose keys are all masked gives "
                    + ("equal weights (the mean of v)" if attention.mask_dtype == "bool" else "NaN (0/0)")
                    + "; PyTorch's attention returns 0 for such a row",
                    'export with ExportOptions(fully_masked_rows="zero") (the default), e.g. '
                    'session.with_options(fully_masked_rows="zero"): the ONNX model then returns 0 '
                    "for fully masked rows, as PyTorch does",
                    (("fully_masked_rows", "zero"),),
                )
            return Explanation(
                "onnxruntime differs from PyTorch with a fully masked row",
                f"{edge.input} reaches scaled_dot_product_attention{where}; its fully masked rows are "
                "already set to 0 (fully_masked_rows='zero'), so the difference comes from elsewhere: "
                "see the first divergence",
            )
        if _softmax_reading(session, edge.input):
            return Explanation(
                "onnxruntime differs from PyTorch with a fully masked row",
                f"{edge.input} reaches a softmax: over a row whose every score is masked (-inf or the "
                "lowest float), PyTorch and onnxruntime disagree on the row's weights (NaN, 0 or equal "
                "weights); make the model zero such rows itself, e.g. "
                "torch.where(mask.any(-1, keepdim=True), out, 0)",
            )
    if edge.kind == "ids_last":
        return Explanation(
            f"onnxruntime differs from PyTorch at the last id of the embedding ({(edge.vocabulary or 1) - 1})",
            f"{edge.input} indexes a {edge.vocabulary}-row embedding; an index computed from it "
            "(a gather, a one-hot, a clamp) differs at the vocabulary edge: see the first divergence",
        )
    return Explanation(f"onnxruntime differs from PyTorch with this {'mask' if edge.kind in _MASK_KINDS else 'id'} value")


def _attention_reading(session: ExportArtifacts, path: str) -> list[Any]:
    try:
        program = session.decomposed_program
        paths = {node.name: path_ for path_, node in input_placeholders(program, session.inputs).items()}
        return [a for a in attention_nodes(program, paths) if path in a.inputs]
    except Exception:  # noqa: BLE001 - an explanation never fails verify
        return []


def _softmax_reading(session: ExportArtifacts, path: str) -> bool:
    try:
        program = session.decomposed_program
        start = input_placeholders(program, session.inputs).get(path)
        if start is None:
            return False
        stack, seen = [start], set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            if node.op == "call_function" and _op_name(node) in ("_softmax", "softmax", "_safe_softmax"):
                return True
            stack.extend(node.users)
        return False
    except Exception:  # noqa: BLE001
        return False
