"""What the state of a ``torch.nn.Module`` is made of, through private classes and fields:
train/eval mode, parameter versions, tracing leftovers (fake and functional tensors)."""

from __future__ import annotations

from typing import Any

__all__ = ["module_state", "tensors_state", "trace_tensor_kind", "train_mode_dependent_modules"]


def module_state(model: Any) -> tuple[Any, ...]:
    """A cheap fingerprint of what a capture of ``model`` depends on besides its code: the
    train/eval mode of every submodule and the identity and in-place version counter
    (``Tensor._version``) of every parameter and buffer. ``model.eval()``, swapping a
    submodule or ``load_state_dict`` all change it."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return ()
    modes: list[bool] = []
    tensors: list[Any] = []
    for module in model.modules():  # one walk (parameters() and buffers() walk the tree again each)
        modes.append(module.training)
        tensors.extend(module._parameters.values())
        tensors.extend(module._buffers.values())
    return tuple(modes), tuple((id(t), t._version) for t in tensors if t is not None)


def tensors_state(values: Any) -> tuple[Any, ...]:
    """The identity and in-place version counter (``Tensor._version``) of every tensor among
    the pytree leaves of ``values``: an in-place write into one of them changes it."""
    import torch
    from torch.utils import _pytree

    return tuple((id(t), t._version) for t in _pytree.tree_leaves(values) if isinstance(t, torch.Tensor))


def train_mode_dependent_modules() -> tuple[type, ...]:
    """Module classes whose output depends on train/eval mode (every dropout and batch norm
    variant, through their private base classes)."""
    import torch

    return (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm)


def trace_tensor_kind(value: Any) -> str | None:
    """What kind of tracing leftover a tensor is: ``"FakeTensor"`` (torch._subclasses), a
    ``"FunctionalTensor"`` (functionalization's wrapper), ``"functional tensor"`` (a C++
    functional wrapper), ``"meta tensor"``; None for a real tensor. A trace that stores
    such a tensor on a module leaves the module unusable for the next run or export."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    if not isinstance(value, torch.Tensor):
        return None
    if isinstance(value, FakeTensor):
        return "FakeTensor"
    if isinstance(value, FunctionalTensor):
        return "FunctionalTensor"
    if torch._is_functional_tensor(value):
        return "functional tensor"
    if value.device.type == "meta":
        return "meta tensor"
    return None
