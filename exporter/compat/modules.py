"""What the state of a ``torch.nn.Module`` is made of, through private classes and fields:
train/eval mode, parameter versions, tracing leftovers (fake and functional tensors)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .shared_patch import shared_patch

__all__ = ["module_state", "tensors_state", "trace_tensor_kind", "train_mode_dependent_modules", "unchanging_module_to"]


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


def _converts_nothing(module: Any, device: Any, dtype: Any) -> bool:
    """Whether ``module.to(device, dtype)`` would leave every parameter and buffer as it is
    (``Module.to`` casts only floating-point and complex tensors)."""
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        return False  # the original raises its own error
    for tensor in (*module.parameters(), *module.buffers()):
        if device is not None and tensor.device != device:
            return False
        if dtype is not None and (tensor.is_floating_point() or tensor.is_complex()) and tensor.dtype != dtype:
            return False
    return True


def _unless_unchanged(to: Any) -> Any:
    import torch

    def to_unless_unchanged(self: Any, *args: Any, **kwargs: Any) -> Any:
        device, dtype, _non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
        if memory_format is None and _converts_nothing(self, device, dtype):
            return self
        return to(self, *args, **kwargs)

    return to_unless_unchanged


@contextmanager
def unchanging_module_to() -> Iterator[None]:
    """Within: ``module.to(...)`` that would change no parameter or buffer returns the module
    untouched. A model that casts a submodule in forward (SwitchTransformers' router:
    ``self.classifier = self.classifier.to(self.dtype)``) otherwise fails every export: under
    tracing, ``Module._apply`` swaps each parameter for its traced copy and
    ``torch.utils.swap_tensors`` refuses a parameter that has weak references. Nests and
    overlaps across threads."""
    import torch

    with shared_patch(torch.nn.Module, "to", _unless_unchanged):
        yield
