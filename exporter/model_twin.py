"""A structural twin of the user's module: what every job runs or traces instead of the module.

``torch.export`` (non-strict) swaps each parameter and buffer for a fake tensor *on the module
objects* while it traces, ``torch.func.functional_call`` swaps weights the same way, and a
forward may rebind its own attributes; another thread calling the same module meanwhile (the
user's next notebook cell) sees all of it. :func:`twin_of` builds new module objects that share
nothing mutable with the user's, in about a millisecond per hundred modules, without copying
the weights:

- each module: a new object of the same class (``isinstance``/``type`` checks hold) whose
  ``__dict__`` is a shallow copy, with its own ``_parameters``/``_buffers``/``_modules`` dicts
  and hook dicts (hooks kept, but the exporter's own call recorder's, which observes the user's
  calls only); a module reached twice (shared or tied) is twinned once;
- parameters: new ``nn.Parameter`` objects over the same storage (``requires_grad`` and their
  own attributes kept, a separate ``_version`` counter); a tied weight stays tied;
- buffers and tensor attributes: cloned (buffers are small next to the weights: 0.1% of a
  tiny Llama's bytes), so a job's in-place write (batch norm's running statistics, a cache)
  never reaches the user's tensors; an alias between them (``original_inv_freq`` is
  ``inv_freq``) stays an alias in the twin; tracing tensors a trace left behind are shared;
- lists, dicts and sets in a module's ``__dict__``: copied (recursively), their tensors,
  modules and weak references mapped to the twin's (LSTM's ``_flat_weights``);
- a method bound to one of the modules, or a ``functools.partial`` holding one (a forward
  replaced on the instance: ``types.MethodType(f, module)``, accelerate's hooks): bound to the
  twin's module;
- anything else (a transformers ``config``, ``generation_config``, functions): shared, read-only.

A ``ScriptModule`` (C++ state) cannot be twinned this way: :func:`twin_of` returns it as it is
and :func:`is_twin` answers False, so a caller knows the run touches the user's object.
"""

from __future__ import annotations

import functools
import types
import weakref
from typing import Any

__all__ = ["is_twin", "twin_of", "user_module_of"]

_TWIN_OF = "_exporter_twin_of"  # on a twin root: a weak reference to the user's module

# nn.Module.__init__'s hook dicts: copied, so a hook added or removed on the twin stays there.
_HOOK_DICTS = (
    "_backward_pre_hooks", "_backward_hooks", "_forward_hooks", "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
    "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
)
_OWN = frozenset({"_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", *_HOOK_DICTS})


def twin_of(model: Any) -> Any:
    """A structural twin of ``model`` (see the module docstring); anything that is not an
    ``nn.Module``, or a module that cannot be twinned (TorchScript, a part that refuses to be
    copied), is returned as it is: the job then runs on the user's module, as
    ``torch.onnx.export`` does."""
    import torch

    if not isinstance(model, torch.nn.Module) or _untwinnable(model):
        return model
    memo: dict[int, Any] = {}
    pairs: list[tuple[Any, Any]] = []
    try:
        with torch.no_grad():
            root = _twin_module(model, memo, pairs)
            for original, twin in pairs:  # every module and parameter is in memo now
                _fill(original, twin, memo)
    except Exception:  # noqa: BLE001 - a tensor subclass that cannot be cloned...: the job runs as torch.onnx.export would
        return model
    object.__setattr__(root, _TWIN_OF, weakref.ref(model))
    return root


def is_twin(model: Any) -> bool:
    """Whether ``model`` is a twin made by :func:`twin_of`."""
    return callable(getattr(model, "__dict__", {}).get(_TWIN_OF))


def user_module_of(model: Any) -> Any:
    """The user's module a twin was made from (``model`` itself for anything else)."""
    ref = getattr(model, "__dict__", {}).get(_TWIN_OF)
    found = ref() if callable(ref) else None
    return model if found is None else found


def _untwinnable(model: Any) -> bool:
    import torch

    return any(isinstance(module, torch.jit.ScriptModule) for module in model.modules())


def _twin_module(module: Any, memo: dict[int, Any], pairs: list[tuple[Any, Any]]) -> Any:
    """The new object for ``module`` with its parameters, buffers and children twinned; the
    rest of its ``__dict__`` is filled by :func:`_fill` once the whole tree is known."""
    known = memo.get(id(module))
    if known is not None:
        return known
    twin = object.__new__(type(module))  # not cls.__new__: GraphModule's makes a new class
    memo[id(module)] = twin
    pairs.append((module, twin))
    own = vars(twin)
    parameters = module._parameters.copy()  # same dict type, own dict
    for name, param in parameters.items():
        if param is not None:
            parameters[name] = _twin_parameter(param, memo)
    own["_parameters"] = parameters
    buffers = module._buffers.copy()
    for name, buffer in buffers.items():
        if buffer is not None:
            buffers[name] = _twin_tensor(buffer, memo)
    own["_buffers"] = buffers
    children = module._modules.copy()
    for name, child in children.items():
        if child is not None:
            children[name] = _twin_module(child, memo, pairs)
    own["_modules"] = children
    return twin


def _twin_parameter(param: Any, memo: dict[int, Any]) -> Any:
    import torch

    known = memo.get(id(param))
    if known is not None:
        return known
    if type(param) is not torch.nn.Parameter:  # a subclass may need its own constructor's arguments
        memo[id(param)] = param
        return param
    # ``.data``: the same storage under a new version counter, so a twin's in-place write is
    # seen by preserved() on the twin, and the user's optimizer steps are not.
    twin = torch.nn.Parameter(param.data, requires_grad=param.requires_grad)
    if vars(param):
        vars(twin).update(vars(param))
    memo[id(param)] = twin
    return twin


def _twin_tensor(tensor: Any, memo: dict[int, Any]) -> Any:
    """A buffer or tensor attribute: cloned once (aliases stay aliases)."""
    from .compat import trace_tensor_kind

    known = memo.get(id(tensor))
    if known is not None:
        return known
    if trace_tensor_kind(tensor) is not None:  # a FakeTensor an earlier trace left: no data to copy
        twin = tensor
    else:
        try:
            twin = tensor.detach().clone()
        except RuntimeError:  # a subclass without storage
            twin = tensor
        else:
            if tensor.requires_grad:
                twin.requires_grad_(True)
    memo[id(tensor)] = twin
    return twin


def _fill(module: Any, twin: Any, memo: dict[int, Any]) -> None:
    """The rest of ``twin.__dict__``: hook dicts and the flag set copied, tensors cloned,
    containers copied with their contents mapped, anything else shared."""
    own = vars(twin)
    for name, value in dict(vars(module)).items():  # a copy: the user's thread may add to it
        if name in ("_parameters", "_buffers", "_modules"):
            continue
        if name in _HOOK_DICTS:
            copied = value.copy()
            for key, hook in list(copied.items()):
                if getattr(getattr(hook, "__self__", None), "observes_user_calls_only", False):
                    del copied[key]
            own[name] = copied
        elif name == "_non_persistent_buffers_set":
            own[name] = set(value)
        else:
            own[name] = _mapped(value, memo)


def _mapped(value: Any, memo: dict[int, Any]) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        known = memo.get(id(value))
        if known is not None:
            return known
        return value if isinstance(value, torch.nn.Parameter) else _twin_tensor(value, memo)
    if isinstance(value, torch.nn.Module):
        return memo.get(id(value), value)  # a module outside the tree is not the model's: shared
    kind = type(value)
    if kind is list:
        return [_mapped(item, memo) for item in value]
    if kind is tuple:
        items = tuple(_mapped(item, memo) for item in value)
        return value if all(a is b for a, b in zip(items, value)) else items
    if kind is dict:
        return {key: _mapped(item, memo) for key, item in dict(value).items()}
    if kind is set:
        return {_mapped(item, memo) for item in set(value)}
    if kind is weakref.ref:
        referent = value()
        twin = memo.get(id(referent)) if referent is not None else None
        return weakref.ref(twin) if twin is not None else value
    if kind is types.MethodType:  # ``module.forward = types.MethodType(f, module)``: bound to the twin
        owner = memo.get(id(value.__self__))
        return types.MethodType(value.__func__, owner) if owner is not None else value
    if kind is functools.partial:  # accelerate's hooks: ``module.forward = partial(new_forward, module)``
        args = tuple(_mapped(arg, memo) for arg in value.args)
        keywords = {key: _mapped(arg, memo) for key, arg in value.keywords.items()}
        return functools.partial(_mapped(value.func, memo), *args, **keywords)
    return value
