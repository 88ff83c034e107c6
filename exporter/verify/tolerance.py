"""Tolerances per dtype, and comparing one onnxruntime output with the eager one."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..errors import Status
from .channels import channel_scale


@dataclass(frozen=True)
class Tolerance:
    """Element-wise ``|actual - expected| <= atol + rtol * |expected| + scale * channel``.

    ``channel`` is the element's channel scale (:mod:`exporter.verify.channels`): the largest
    ``|expected|`` of the slices it lies in, the quietest of them, never another channel's. The
    ``scale`` term (``None``: the same as ``rtol``; ``0``: off) is the slack of an element near
    zero that is the difference of terms of its channel's size: it carries their rounding
    error, not its own. Helium's hidden states of magnitude ~1 differ by 6.7e-5 on elements
    near 1e-4 (relative 0.47) and are float noise; ``fc(x) * [1e4, 1, 1, ...]`` off by 0.5 on
    the small channels is not, and one large channel no longer hides it (it did when the slack
    was scaled by the whole output's largest value).

    With the default tolerances (:data:`DEFAULT_TOLERANCES`), ``atol`` is the slack of an
    output of magnitude 1 or more; a smaller output is compared at its own scale, ``atol``
    times its largest ``|expected|`` (float32 rounding is relative: an output of 1e-3 is no
    noisier than one of 1). An output within ``atol`` of 0 everywhere is compared that way and
    named ``vacuous``: verify cannot say it was verified (see
    :func:`exporter.verify.findings.vacuous`). Tolerances given are applied as given: ``atol``
    absolute, as Optimum's ``validate_model_outputs`` (``np.allclose(ref, onnx, atol=...)``,
    1e-5 by default, 1e-4 to 1e-3 for many architectures) and ``torch.testing.assert_close``
    (``atol + rtol * |expected|``, float32: 1e-5, 1.3e-6) apply theirs."""

    rtol: float
    atol: float
    scale: float | None = None

    @property
    def output_scale(self) -> float:
        return self.rtol if self.scale is None else self.scale

    def atol_for(self, peak: float, relative: bool) -> float:
        """The absolute term for an output whose largest finite ``|expected|`` is ``peak``:
        ``atol``, times ``peak`` when ``relative`` and ``peak < 1`` (see the class docstring)."""
        if not relative or peak >= 1.0 or peak == 0.0:  # all zeros: no scale of its own
            return self.atol
        return max(self.atol * peak, _SMALLEST_NORMAL)

    def __str__(self) -> str:
        scaled = f" + {self.output_scale:g}*channel|expected|" if self.output_scale else ""
        return f"rtol={self.rtol:g} atol={self.atol:g}{scaled}"


DEFAULT_TOLERANCES: Mapping[str, Tolerance] = MappingProxyType(
    {
        "float64": Tolerance(1e-6, 1e-7),
        "float32": Tolerance(1e-4, 1e-5),
        "float16": Tolerance(1e-2, 1e-3),
        "bfloat16": Tolerance(2e-2, 1e-2),
    }
)
_EXACT = Tolerance(0.0, 0.0)
_SMALLEST_NORMAL = 1.1754943508222875e-38  # float32's: below it onnxruntime may flush to zero
MIN_CHANNEL = 2  # elements a slice needs to scale its elements (see exporter.verify.channels)


def tolerance_for(dtype: str, overrides: Mapping[str, Tolerance] | Tolerance | None = None) -> Tolerance:
    """The tolerance for a dtype name (``float32``), with user overrides applied."""
    if isinstance(overrides, Tolerance):
        return overrides
    if overrides and dtype in overrides:
        value = overrides[dtype]
        return value if isinstance(value, Tolerance) else Tolerance(*value)
    return DEFAULT_TOLERANCES.get(dtype, _EXACT)


@dataclass(frozen=True)
class OutputCheck:
    """One output of one case: ``pass`` / ``fail`` (values differ) / ``shape_mismatch`` /
    ``dtype_mismatch`` / ``missing``."""

    case: str
    output: str
    status: Status
    max_abs: float | None = None
    max_rel: float | None = None
    mismatched: int = 0
    expected_shape: tuple[int, ...] | None = None
    actual_shape: tuple[int, ...] | None = None
    dtype: str = ""
    tolerance: Tolerance | None = None
    # The largest absolute slack an element got or could get: atol (times the output's own
    # scale, see Tolerance) + scale * max|expected| (the channel of the largest value).
    atol_applied: float | None = None
    worst: tuple[tuple[tuple[int, ...], float, float, float], ...] = ()  # (index, expected, got, allowed)
    scaled_only: int = 0  # elements beyond atol + rtol*|expected| that pass thanks to the output scale
    nonfinite_actual: int = 0  # NaN / Inf elements in the onnxruntime output
    nonfinite_expected: int = 0  # ... and in the eager one
    # Passed as float32 rounding (:mod:`.rounding`): onnxruntime's and eager's largest distance
    # from the float64 outputs, in that order.
    rounding: tuple[float, float] | None = None
    peak: float | None = None  # the largest finite |expected|
    relative_atol: bool = False  # the default atol, scaled to an output below 1 (see Tolerance)

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    @property
    def vacuous(self) -> bool:
        """A floating output compared with the default tolerance whose every value is within
        its ``atol`` of 0: an ONNX model returning zeros would pass it at an absolute tolerance,
        so verify cannot call it verified (compared at its own scale, it can still fail)."""
        tol = self.tolerance
        return (self.relative_atol and tol is not None and tol.atol > 0 and self.peak is not None
                and self.status in ("pass", "fail") and self.peak <= tol.atol)

    def elements_text(self) -> str:
        """The worst elements: ``[0, 3]: expected 0.12, got 0.31 (|diff| 0.19 > allowed 1.3e-05)``."""
        return "; ".join(
            f"{list(index)}: expected {want:.4g}, got {got:.4g} (|diff| {abs(got - want):.3g} > allowed {allowed:.3g})"
            for index, want, got, allowed in self.worst
        )

    def describe(self) -> str:
        if self.status == "shape_mismatch":
            return f"output {self.output!r}: shape {list(self.actual_shape or ())} instead of {list(self.expected_shape or ())}"
        if self.status == "missing":
            return f"output {self.output!r} is missing"
        if self.status in ("dtype_mismatch", "error"):
            return f"output {self.output!r}: {self.dtype}"
        text = (f"output {self.output!r}: max abs diff {self.max_abs:.3g}, max rel diff {self.max_rel:.3g} "
                f"({self.mismatched} elements beyond {self.tolerance}"
                + (f", atol applied {self.atol_applied:.3g}" if self.atol_applied is not None else "") + ")")
        return text + (f"; worst: {self.elements_text()}" if self.worst else "")


def _to_numpy(value: Any, like: Any = None) -> Any:
    """A numpy array of an eager tensor or an onnxruntime output. Dtypes numpy lacks go
    through torch: bfloat16 and the float8 formats become float32; onnxruntime hands them
    over as raw bits (a 2-byte void for bfloat16, uint8 for float8), read as ``like`` (the
    eager output's torch dtype) says."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16 or _is_float8(value.dtype):
            value = value.float()
        return value.numpy()
    array = np.asarray(value)
    if array.dtype.kind == "V" and array.dtype.itemsize == 2:  # bfloat16 from onnxruntime
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16).float().numpy()
    if like is not None and _is_float8(like) and array.dtype.itemsize == 1:
        return torch.from_numpy(array.view(np.uint8).copy()).view(like).float().numpy()
    return array


def _is_float8(dtype: Any) -> bool:
    return "float8" in str(dtype)


def _as_complex(got: Any, want: Any) -> Any:
    """torch.onnx writes a complex tensor as a real one with a trailing dim of 2."""
    import numpy as np

    if want.dtype.kind == "c" and got.dtype.kind != "c" and got.shape == (*want.shape, 2):
        return got[..., 0].astype(np.float64) + 1j * got[..., 1].astype(np.float64)
    return got


def _dtype_name(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return str(value.dtype).removeprefix("torch.")
    return str(getattr(value, "dtype", "unknown"))


def compare(case: str, name: str, actual: Any, expected: Any,
            tolerances: Mapping[str, Tolerance] | Tolerance | None = None) -> OutputCheck:
    """Compare one onnxruntime output with the eager one under the dtype's tolerance."""
    dtype = _dtype_name(expected)
    tol = tolerance_for(dtype, tolerances)
    try:
        return _compare(case, name, actual, expected, dtype, tol, not is_given(dtype, tolerances))
    except Exception as exc:  # noqa: BLE001 - verify never raises for a model's outputs
        return OutputCheck(case, name, Status.ERROR, dtype=f"{dtype}: could not compare ({type(exc).__name__}: {exc})", tolerance=tol)


def is_given(dtype: str, tolerances: Mapping[str, Tolerance] | Tolerance | None) -> bool:
    """Whether the tolerance for ``dtype`` was given by the caller (applied as given) rather
    than taken from :data:`DEFAULT_TOLERANCES`."""
    return isinstance(tolerances, Tolerance) or bool(tolerances and dtype in tolerances)


def allowance(magnitude: Any, diff: Any, tol: Tolerance, relative: bool) -> tuple[Any, Any, float, float]:
    """The difference allowed per element, for ``magnitude`` (``|expected|`` as float64, 0 where
    not finite) and ``diff`` (``|actual - expected|``): ``(allowed, base, peak, atol)``, where
    ``allowed = atol + rtol*|expected| + scale*channel`` (:class:`Tolerance`), ``base`` the same
    without the channel term, ``peak`` the largest ``magnitude`` and ``atol`` the absolute term
    applied. The channel term is looked up only where ``diff`` exceeds ``base``: elsewhere the
    element passes whatever it is, and ``allowed`` holds ``base``."""
    peak = float(magnitude.max()) if magnitude.size else 0.0
    atol = tol.atol_for(peak, relative)
    base = atol + tol.rtol * magnitude
    return _with_channels(base, magnitude, diff, tol), base, peak, atol


def _with_channels(allowed: Any, magnitude: Any, diff: Any, tol: Tolerance) -> Any:
    """``allowed`` (``atol + rtol*|want|``) plus ``scale * channel`` where ``diff`` exceeds it."""
    import numpy as np

    if not tol.output_scale:
        return allowed
    over = np.flatnonzero(diff > allowed)
    if not over.size:
        return allowed
    out = allowed.astype(np.float64, copy=True).reshape(-1)
    out[over] += tol.output_scale * channel_scale(magnitude, over, MIN_CHANNEL)
    return out.reshape(allowed.shape)


def first_difference(case: str, output_names: Sequence[str], actual: Sequence[Any], expected: Sequence[Any],
                     tolerances: Mapping[str, Tolerance] | Tolerance | None = None) -> OutputCheck | None:
    """The first output pair (in order, up to the shorter list) that :func:`compare` does not
    pass, or None; outputs past ``output_names`` are named by their index."""
    for i, (got, want) in enumerate(zip(actual, expected)):
        check = compare(case, output_names[i] if i < len(output_names) else str(i), got, want, tolerances)
        if not check.ok:
            return check
    return None


def _compare(case: str, name: str, actual: Any, expected: Any, dtype: str, tol: Tolerance, relative: bool) -> OutputCheck:
    other = _other_dtype(actual, expected)
    if other is not None:
        return OutputCheck(case, name, Status.DTYPE_MISMATCH, dtype=f"onnxruntime gives {other}, eager PyTorch {dtype}",
                           tolerance=tol)
    want, got = _as_arrays(actual, expected)
    if got.shape != want.shape:
        return OutputCheck(case, name, Status.SHAPE_MISMATCH, expected_shape=tuple(want.shape), actual_shape=tuple(got.shape), dtype=dtype, tolerance=tol)
    return (_finite_pass(case, name, want, got, dtype, tol, relative)
            or _general_check(case, name, want, got, dtype, tol, relative))


def _general_check(case: str, name: str, want: Any, got: Any, dtype: str, tol: Tolerance, relative: bool = True) -> OutputCheck:
    """The rule, element by element, for any pair of one shape: NaN, infinities, complex values,
    failures with their worst elements."""
    w, g = _widened(want, got)
    with _ignoring_float_errors():
        diff, finite = _differences(w, g)
        allowed, base, peak, atol = allowance(finite, diff, tol, relative)
        bad = diff > allowed
        scaled_only = int(((diff > base) & ~bad).sum())
        rel = _relative(diff, w)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    mismatched = int(bad.sum())
    return OutputCheck(
        case, name, Status.PASS if mismatched == 0 else Status.FAIL, max_abs, max_rel, mismatched,
        tuple(want.shape), tuple(got.shape), dtype, tol, atol + tol.output_scale * peak,
        _worst(w, g, diff, allowed, bad, want.shape) if mismatched else (),
        scaled_only, _nonfinite(g), _nonfinite(w), peak=peak, relative_atol=relative,
    )


def _finite_pass(case: str, name: str, want: Any, got: Any, dtype: str, tol: Tolerance, relative: bool = True) -> OutputCheck | None:
    """The check of a real pair that passes with every element finite (the usual case), in
    about a third of the array passes of :func:`_general_check`; None for anything else (the
    general rule then decides). Its numbers equal the general rule's: the same float64
    operations on the same elements (the ufuncs cast to float64 as they read); on a passing
    pair ``scaled_only`` is simply the count beyond ``atol + rtol*|w|``."""
    import numpy as np

    if want.size == 0 or want.dtype.kind not in "biuf" or got.dtype.kind not in "biuf" or np.uint64 in (want.dtype, got.dtype):
        return None
    shape = tuple(want.shape)
    want, got = want.reshape(-1), got.reshape(-1)  # a 0-d pair too is an array, not a numpy scalar
    with _ignoring_float_errors():  # inf - inf, an overflow: the general rule decides, silently
        diff = np.subtract(got, want, dtype=np.float64)
        np.abs(diff, out=diff)
        max_abs = float(diff.max())
        if not math.isfinite(max_abs):  # a NaN or an infinity on either side (or an overflow)
            return None
        magnitude_of = np.abs(want, dtype=np.float64)
        peak = float(magnitude_of.max())
        atol = tol.atol_for(peak, relative)
        limit = atol + tol.output_scale * peak
        scaled_only = 0
        # Every element's allowed difference is at least atol: within it, no element-wise test.
        if max_abs > atol:
            if max_abs > limit and np.count_nonzero(diff > limit + tol.rtol * magnitude_of):
                return None  # beyond even the largest channel's slack: fails
            base = tol.rtol * magnitude_of
            base += atol
            over = np.flatnonzero(diff > base)
            if over.size:
                if not tol.output_scale:
                    return None
                channel = channel_scale(magnitude_of.reshape(shape), over, MIN_CHANNEL)
                if np.count_nonzero(diff[over] > base[over] + tol.output_scale * channel):
                    return None
                scaled_only = int(over.size)
        nonzero = magnitude_of > 0
        if nonzero.all():
            max_rel = float((diff / magnitude_of).max())
        elif np.count_nonzero(diff[~nonzero]):
            max_rel = math.inf
        else:
            max_rel = float(np.divide(diff, magnitude_of, out=np.zeros_like(diff), where=nonzero).max())
    return OutputCheck(case, name, Status.PASS, max_abs, max_rel, 0, shape, shape, dtype, tol, limit, (), scaled_only,
                       peak=peak, relative_atol=relative)


def _other_dtype(actual: Any, expected: Any) -> str | None:
    """The dtype of onnxruntime's output when it is not eager's (None when it is, or is eager's
    as onnxruntime hands it over: bfloat16 / float8 as float32 or as their bits, complex as a
    real tensor of its precision); None too when ``expected`` is not a tensor."""
    import numpy as np
    import torch

    if not isinstance(expected, torch.Tensor):
        return None
    if isinstance(actual, torch.Tensor):
        return None if actual.dtype == expected.dtype else str(actual.dtype).removeprefix("torch.")
    got = np.asarray(actual).dtype
    if expected.dtype == torch.bfloat16 or _is_float8(expected.dtype):
        return None if got in (np.float32, np.uint8) or (got.kind == "V" and got.itemsize == 2) else got.name
    want = torch.empty(0, dtype=expected.dtype).numpy().dtype
    if got == want or (want.kind == "c" and got == np.dtype(f"float{want.itemsize * 4}")):
        return None
    return got.name


def _ignoring_float_errors() -> Any:
    import numpy as np

    return np.errstate(invalid="ignore", over="ignore", divide="ignore")


def _as_arrays(actual: Any, expected: Any) -> tuple[Any, Any]:
    """(expected, actual) as numpy arrays, a complex output unpacked (see :func:`_as_complex`)."""
    want = _to_numpy(expected)
    return want, _as_complex(_to_numpy(actual, like=getattr(expected, "dtype", None)), want)


def _widened(want: Any, got: Any) -> tuple[Any, Any]:
    """Both sides as float64 (complex128 when either is complex): the type differences are taken in."""
    import numpy as np

    if want.dtype.kind == "c" or got.dtype.kind == "c":  # complex: |difference| of complex values
        return want.astype(np.complex128), got.astype(np.complex128)
    if want.dtype.kind in "fc" or got.dtype.kind in "fc":
        return want.astype(np.float64), got.astype(np.float64)
    w = want.astype(np.int64) if want.dtype != bool else want
    g = got.astype(np.int64) if got.dtype != bool else got
    return w.astype(np.float64), g.astype(np.float64)


def _differences(w: Any, g: Any) -> tuple[Any, Any]:
    """``|g - w|`` per element (0 where both are NaN or the same infinity; inf where one side
    is NaN), and ``|w|`` where ``w`` is finite (0 elsewhere)."""
    import numpy as np

    both_nan = np.isnan(w) & np.isnan(g)
    same_inf = np.isinf(w) & (w == g)
    diff = np.where(both_nan | same_inf, 0.0, np.abs(g - w))
    diff = np.where(np.isnan(diff), np.inf, diff)
    diff = diff.real if np.iscomplexobj(diff) else diff
    return diff, np.abs(np.where(np.isfinite(w), w, 0.0))


def _relative(diff: Any, w: Any) -> Any:
    import numpy as np

    denom = np.abs(w)
    return np.where(denom > 0, diff / np.where(denom > 0, denom, 1.0), np.where(diff > 0, np.inf, 0.0))


def _worst(w: Any, g: Any, diff: Any, allowed: Any, bad: Any, shape: tuple[int, ...]) -> tuple[tuple[tuple[int, ...], float, float, float], ...]:
    """The three elements furthest beyond their allowed difference: (index, expected, got, allowed)."""
    import numpy as np

    worst: list[tuple[tuple[int, ...], float, float, float]] = []
    excess = np.where(bad, diff - allowed, -np.inf).ravel()
    for flat in np.argsort(-excess, kind="stable")[:3]:
        if not np.isfinite(excess[flat]) and excess[flat] < 0:
            break
        index = tuple(int(i) for i in np.unravel_index(int(flat), shape)) if shape else ()
        worst.append((index, float(np.real(w.ravel()[flat])), float(np.real(g.ravel()[flat])), float(allowed.ravel()[flat])))
    return tuple(worst)


def _nonfinite(values: Any) -> int:
    """NaN / Inf elements of a float64 or complex128 array."""
    import numpy as np

    return int(values.size - np.count_nonzero(np.isfinite(values)))
