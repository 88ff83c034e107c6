"""Bind example args/kwargs to ``forward``'s signature and name every tensor leaf.

A leaf path joins the parameter name with the pytree keys below it: ``x``,
``inputs.mask``, ``cache.0.key``. These paths name the ONNX graph inputs and key the dim spec.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .axis import Axis
from .compat import (
    UnsupportedCacheLayer,
    key_path_to_str,
    kv_cache_leaf_names,
    prepare_kv_cache_pytree,
    tree_flatten_with_path,
    tree_replace_leaves,
)
from .errors import SpecError

__all__ = ["BoundInputs", "Leaf", "axis_label", "bind_inputs", "onnx_input_names"]


@dataclass(frozen=True)
class Leaf:
    """One tensor the model receives."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    index: int  # position among all pytree leaves of the inputs (= the exported program's user input)

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class BoundInputs:
    """Example inputs bound to the signature: ``args`` for what was passed positionally,
    ``kwargs`` (in signature order, whatever order they were given in) for the rest."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    leaves: tuple[Leaf, ...]
    parameter_names: tuple[str, ...]  # every bound parameter, in signature order
    leaf_paths_of_non_tensors: tuple[str, ...] = ()
    # forward's own parameter names that received a value, in signature order: like
    # ``parameter_names`` but with ``*args`` and ``**kwargs`` each under their own name
    # (the top-level keys torch.export expects in a ``dynamic_shapes`` dict).
    signature_names: tuple[str, ...] = ()
    var_positional: str | None = None  # the ``*args`` parameter, if it received values
    var_keyword: str | None = None  # the ``**kwargs`` parameter, if it received values
    unbound: tuple[str, ...] = ()  # forward's parameters left to their defaults
    values: tuple[Any, ...] = ()  # every pytree leaf value, in order: ``Leaf.index`` indexes it
    # ONNX names other than the path, by path: tensors of a transformers KV cache read
    # ``past_key_values.0.key`` (the onnxruntime-genai / Optimum convention) whatever the parameter.
    onnx_defaults: tuple[tuple[str, str], ...] = ()

    def leaf(self, path: str) -> Leaf:
        for leaf in self.leaves:
            if leaf.path == path:
                return leaf
        raise KeyError(path)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(leaf.path for leaf in self.leaves)

    def rebuild(self, leaves: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` shaped like :attr:`args` / :attr:`kwargs` with every pytree leaf
        replaced by ``leaves`` (in :attr:`values` order, which ``Leaf.index`` indexes)."""
        leaves = list(leaves)
        tops, start = [], 0
        for top in list(self.args) + list(self.kwargs.values()):
            count = len(tree_flatten_with_path(top))
            tops.append(tree_replace_leaves(top, leaves[start:start + count]))
            start += count
        return tuple(tops[: len(self.args)]), dict(zip(self.kwargs, tops[len(self.args):]))

    def by_parameter(self) -> dict[str, Any]:
        """Every bound value keyed by its parameter name, in signature order."""
        values = dict(zip(self.parameter_names[: len(self.args)], self.args))
        values.update(self.kwargs)
        return values

    def by_signature(self) -> dict[str, Any]:
        """Every bound value keyed by forward's own parameter names, as torch.export binds
        them: ``*args`` as one tuple, ``**kwargs`` as one dict."""
        values = self.by_parameter()
        if not self.signature_names:  # built by hand: no variadic parameters
            return values
        out: dict[str, Any] = {}
        for name in self.signature_names:
            if name == self.var_positional:
                out[name] = tuple(v for k, v in values.items() if k.startswith(name + "."))
            elif name == self.var_keyword:
                own = set(self.signature_names)
                out[name] = {
                    k: v for k, v in values.items()
                    if k not in own and not (self.var_positional and k.startswith(self.var_positional + "."))
                }
            else:
                out[name] = values[name]
        return out


def onnx_input_names(bound: BoundInputs, input_names: Any = None) -> dict[str, str]:
    """The ONNX graph input name of every tensor leaf, by leaf path: the path itself
    (``x``, ``inputs.mask``; a transformers KV cache's tensors read ``past_key_values.0.key``),
    or, as in torch.onnx.export, the ``input_names`` given to the
    flattened inputs in order (leaves past the last name keep their paths)."""
    names = tuple(input_names or ())
    if len(names) > len(bound.leaves):
        raise SpecError(
            f"input_names has {len(names)} names but forward was given {len(bound.leaves)} tensors "
            f"({', '.join(leaf.path for leaf in bound.leaves)})",
            hint="give one name per tensor input, in order",
        )
    defaults = dict(bound.onnx_defaults)
    out = {leaf.path: defaults.get(leaf.path, leaf.path) for leaf in bound.leaves}
    out.update({leaf.path: name for leaf, name in zip(bound.leaves, names)})
    taken: dict[str, str] = {}
    for path, name in out.items():
        if name in taken:
            raise SpecError(
                f"input_names would give inputs {taken[name]!r} and {path!r} the same ONNX name {name!r}",
                hint=f"name every input, in order: input_names={[leaf.path for leaf in bound.leaves]!r} "
                "with your names, each used once",
            )
        taken[name] = path
    return out


def axis_label(path: str, axis: int) -> str:
    """How messages name an input axis: ``x.shape[0]`` (:attr:`exporter.axis.Axis.label`)."""
    return Axis(path, axis).label


def _signature(model: Any) -> inspect.Signature:
    forward = getattr(model, "forward", model)
    try:
        return inspect.signature(forward)
    except (TypeError, ValueError) as exc:
        raise SpecError(
            f"cannot read the signature of {type(model).__name__}.forward: {exc}",
            hint="export a torch.nn.Module whose forward has a Python signature",
        ) from exc


def _check_keyword_names(signature: inspect.Signature, kwargs: Mapping[str, Any]) -> None:
    """A keyword forward does not take is named as such (``inspect``'s bind reports the
    missing parameter first, which reads as if the value were lost)."""
    parameters = signature.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    taken = {name for name, p in parameters.items() if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    unknown = [name for name in kwargs if name not in taken]
    if unknown:
        listed = ", ".join(parameters)
        raise SpecError(
            f"forward has no parameter {unknown[0]!r} (forward({listed}))",
            hint=f"pass the example as one of forward's parameters: {listed}",
        )


def bind_inputs(model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> BoundInputs:
    """Bind ``args``/``kwargs`` to ``model.forward`` and list its tensor leaves.

    Keyword arguments may come in any order; they are returned in signature order so the
    exported program (and the ONNX inputs) do not depend on the order the user typed them.
    """
    import torch

    caches = prepare_kv_cache_pytree(model, args, kwargs)  # a transformers DynamicCache flattens by layer
    signature = _signature(model)
    _check_keyword_names(signature, kwargs)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        parameters = ", ".join(signature.parameters)
        raise SpecError(
            f"the example inputs do not match forward({parameters}): {exc}",
            hint="pass one example value per required parameter of forward, "
            "positionally or by name",
        ) from exc

    positional: list[Any] = []
    keyword: dict[str, Any] = {}
    names: list[str] = []
    var_positional = var_keyword = None
    for position, (name, value) in enumerate(bound.arguments.items()):
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            var_positional = name
        elif kind is inspect.Parameter.VAR_KEYWORD:
            var_keyword = name
        # What the user passed positionally stays positional, so the exported program's
        # module() can be called the same way; keywords follow in signature order.
        if kind is inspect.Parameter.POSITIONAL_ONLY or (
            kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and position < len(args)
        ):
            positional.append(value)
            names.append(name)
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            positional.extend(value)
            names.extend(f"{name}.{i}" for i in range(len(value)))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            keyword.update(value)
            names.extend(value)
        else:
            keyword[name] = value
            names.append(name)

    leaves: list[Leaf] = []
    others: list[str] = []
    flat: list[Any] = []
    onnx_defaults: dict[str, str] = {}
    for name, value in zip(names, list(positional) + list(keyword.values())):
        try:
            if caches:
                onnx_defaults.update(kv_cache_leaf_names(name, value))
            flat_value = tree_flatten_with_path(value)
        except UnsupportedCacheLayer as exc:
            raise SpecError(
                str(exc) + " (state besides its tensors)",
                hint=f"export with a cache of {exc.expected}s (DynamicCache() without a config that asks for "
                "sliding windows), or without the cache (use_cache=False)",
            ) from exc
        for key_path, leaf in flat_value:
            path = key_path_to_str(name, key_path)
            if isinstance(leaf, torch.Tensor):
                shape = tuple(int(d) for d in leaf.shape)
                leaves.append(Leaf(path, shape, str(leaf.dtype).removeprefix("torch."), len(flat)))
            else:
                others.append(path)
            flat.append(leaf)
    return BoundInputs(
        tuple(positional),
        keyword,
        tuple(leaves),
        tuple(names),
        tuple(others),
        signature_names=tuple(bound.arguments),
        var_positional=var_positional,
        var_keyword=var_keyword,
        unbound=tuple(
            name for name, p in signature.parameters.items()
            if name not in bound.arguments
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        ),
        values=tuple(flat),
        onnx_defaults=tuple(onnx_defaults.items()),
    )
