"""TensorFlow "SAME" padding computed from the symbolic size instead of branching on it.

transformers' MobileNetV1 and MobileNetV2 (``tf_padding=True``, the default) pad before each
convolution with ``apply_tf_padding(features, conv_layer)``, which branches on the example
size (``if in_height % stride_height == 0``; V2 also reads ``int(features.shape[-2])``). The
export keeps the branch the example took: MobileNetV1 gives a wrong output shape at an odd
size (``[2, 256, 1, 1]`` instead of ``[2, 256, 2, 2]`` at 33x33), MobileNetV2's capture refuses
dynamic height/width ("the model's code makes it the constant 32"). timm's ``pad_same`` has
the same idiom. The replacement computes the same padding without a branch:
``(size - 1) % stride + 1`` is the stride when it divides the size and the remainder
otherwise, so the padding is ``max(kernel - ((size - 1) % stride + 1), 0)``, a symbolic
expression the ONNX model computes from the input's shape (a ``Pad`` with computed pads).
"""

from __future__ import annotations

from typing import Any

from .base import Patch, PatchTarget, function_targets, source_of

__all__ = ["TfSamePadding"]

FUNCTION = "apply_tf_padding"


def _same_padding(size: Any, kernel: int, stride: int) -> Any:
    """TensorFlow's SAME padding along one axis (``kernel - stride`` when ``stride`` divides
    ``size``, else ``kernel - size % stride``, at least 0), without a branch on ``size`` (an int
    or a SymInt): the padded size is ``(ceil(size / stride) - 1) * stride + kernel``, so the
    convolution's output size stays the simple ``ceil(size / stride)`` layer after layer."""
    import torch

    pad = ((size + stride - 1) // stride - 1) * stride + kernel - size
    return pad if kernel >= stride else torch.sym_max(pad, 0)


def apply_tf_padding(features: Any, conv_layer: Any) -> Any:
    """TensorFlow "SAME" padding for ``conv_layer``, symbolic in the input's height and width."""
    return _padded(features, conv_layer, (1, 1))


def apply_tf_padding_dilated(features: Any, conv_layer: Any) -> Any:
    """TensorFlow "SAME" padding for ``conv_layer``, symbolic in the input's height and width,
    each side scaled by the convolution's dilation (MobileNetV2's variant)."""
    return _padded(features, conv_layer, conv_layer.dilation)


def _padded(features: Any, conv_layer: Any, dilation: tuple[int, int]) -> Any:
    import torch

    stride_height, stride_width = conv_layer.stride
    kernel_height, kernel_width = conv_layer.kernel_size
    dilation_height, dilation_width = dilation
    pad_along_height = _same_padding(features.shape[-2], kernel_height, stride_height)
    pad_along_width = _same_padding(features.shape[-1], kernel_width, stride_width)
    pad_left = pad_along_width // 2
    pad_top = pad_along_height // 2
    padding = (
        pad_left * dilation_width,
        (pad_along_width - pad_left) * dilation_width,
        pad_top * dilation_height,
        (pad_along_height - pad_top) * dilation_height,
    )
    return torch.nn.functional.pad(features, padding, "constant", 0.0)


def _is_tf_same_padding(source: str) -> bool:
    """The branch on the size: ``in_height % stride_height == 0`` (transformers' MobileNets)."""
    return "in_height % stride_height == 0" in source and "in_width % stride_width == 0" in source


class TfSamePadding(Patch):
    name = "tf_same_padding"
    idiom = ("TensorFlow 'SAME' padding that branches on the input size (`if in_height % stride_height == 0:` "
             "in `apply_tf_padding`)")
    symptom = ("the padding of the example size is baked in: wrong output shapes at other sizes, or height and "
               "width made static")

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return function_targets(model, FUNCTION, _rewrite)


def _rewrite(function: Any) -> tuple[Any, str, str] | None:
    source = source_of(function)
    if not _is_tf_same_padding(source):
        return None
    replacement = apply_tf_padding_dilated if "dilation" in source else apply_tf_padding
    return replacement, source, "\n\n".join(source_of(f) for f in (replacement, _padded, _same_padding))
