"""Export time of ``exporter.export()`` relative to a bare ``torch.onnx.export(dynamo=True)`` on
torchvision and timm classifiers (random weights): a first export with a dynamic batch and with
dynamic batch/height/width, and (``--respec``) a re-export after a changed dim spec
(``session.with_dims(...)``: batch/height/width -> batch only, batch -> all static) against a
bare ``torch.onnx.export`` with the changed spec.

Run: ``python benchmarks/vision_export.py [--repeats N] [--models resnet50,timm:convnext_atto] [--respec]``

Needs torchvision and timm, which do not import beside this project's CPU torch 2.13 (PyPI's
torchvision wants its own torch build): run it in a separate environment, e.g. ``python -m
venv /tmp/tv && /tmp/tv/bin/pip install torch==2.14.1 torchvision==0.29.1 timm onnxscript
onnxruntime pandas tqdm`` and ``PYTHONPATH=. /tmp/tv/bin/python benchmarks/vision_export.py``.

Both contenders run in this one process on one torch thread, alternating (exporter first in
even repeats), each on a model built before its clock starts, after one untimed export of
each model by both (one-time kernel and decomposition-table costs). A row that fails in
either contender is reported, not timed. The ratio per row is the median of the per-repeat
ratios; the summary line gives the median and quartiles over rows (issue 38's target: the
median <= 0.6).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from export_overhead import bare_torch_export, quiet_stdout, silence_third_party_noise, torch_dims_for

DEFAULT_MODELS = (
    "resnet50", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "regnet_y_400mf", "densenet121",
    "shufflenet_v2_x0_5", "swin_t", "timm:resnet18", "timm:convnext_atto", "timm:vit_tiny_patch16_224",
    "timm:efficientnet_b0", "timm:mobilenetv3_small_100", "timm:regnety_002", "timm:deit_tiny_patch16_224",
)
SPECS = {"batch": {0: "batch"}, "batch_hw": {0: "batch", 2: "height", 3: "width"}}
RESPEC = {"batch_hw": "batch", "batch": "static"}  # the spec a re-export changes each one to
SPECS["static"] = {}
TARGET = 0.6
RESPEC_TARGET = 0.35


def build(name: str) -> Any:
    import torch

    torch.manual_seed(0)
    if name.startswith("timm:"):
        import timm

        return timm.create_model(name[len("timm:"):], pretrained=False).eval()
    import torchvision

    return getattr(torchvision.models, name)().eval()


def export_seconds(name: str, axes: dict[int, str], exporter: bool) -> float:
    import torch

    from exporter import ExportOptions, export

    model, x = build(name), torch.randn(2, 3, 224, 224)
    spec = [axes]
    if exporter:
        start = time.perf_counter()
        with quiet_stdout():
            session = export(model, x, options=ExportOptions(dynamic_shapes=spec))
        seconds = time.perf_counter() - start
        session.raise_for_status()
        return seconds
    dims = torch_dims_for(model, (x,), {}, spec)
    start = time.perf_counter()
    with quiet_stdout():
        bare_torch_export(model, (x,), {}, dims)
    return time.perf_counter() - start


def median_ratio(seconds: Callable[[bool], float], repeats: int) -> float | str:
    """The median per-repeat ratio exporter / torch of ``seconds(exporter)``, after one
    untimed call of each, or why the row was not timed."""
    try:
        seconds(True)
        seconds(False)
    except Exception as exc:  # noqa: BLE001 - a row either exporter cannot do is reported, not timed
        return f"not timed: {type(exc).__name__}: {str(exc).splitlines()[0][:90]}"
    ratios = []
    for index in range(repeats):
        order = (True, False) if index % 2 == 0 else (False, True)
        timed = {contender: seconds(contender) for contender in order}
        ratios.append(timed[True] / timed[False])
    return statistics.median(ratios)


def respec_seconds(name: str, axes: dict[int, str], changed: dict[int, str], exporter: bool) -> float:
    """Seconds of a re-export with ``changed`` axes: the exporter's ``with_dims`` after a first
    export with ``axes`` (untimed), or a bare torch.onnx.export with ``changed``."""
    if not exporter:
        return export_seconds(name, changed, False)
    import torch

    from exporter import ExportOptions, export

    model, x = build(name), torch.randn(2, 3, 224, 224)
    with quiet_stdout():
        first = export(model, x, options=ExportOptions(dynamic_shapes=[axes]))
    first.raise_for_status()
    start = time.perf_counter()
    with quiet_stdout():
        session = first.with_dims([changed])
        session.run()
    seconds = time.perf_counter() - start
    session.raise_for_status()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--specs", default="batch,batch_hw")
    parser.add_argument("--respec", action="store_true", help="time re-exports after a changed spec instead")
    options = parser.parse_args()
    try:
        import timm  # noqa: F401
        import torchvision  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - say how to get an environment where they import
        print(f"torchvision/timm do not import here ({type(exc).__name__}: {exc}); see this script's docstring")
        return 2
    silence_third_party_noise()
    import torch

    torch.set_num_threads(1)
    ratios: list[float] = []
    kind = "re-export" if options.respec else "first export"
    print(f"{'model':<32} {'spec':<17} {kind} ratio (exporter / torch.onnx.export, median of {options.repeats})")
    for name in options.models.split(","):
        for spec in options.specs.split(","):
            if options.respec:
                label = f"{spec}->{RESPEC[spec]}"
                result = median_ratio(partial(respec_seconds, name, SPECS[spec], SPECS[RESPEC[spec]]), options.repeats)
            else:
                label, result = spec, median_ratio(partial(export_seconds, name, SPECS[spec]), options.repeats)
            if isinstance(result, float):
                ratios.append(result)
                print(f"{name:<32} {label:<17} {result:.2f}", flush=True)
            else:
                print(f"{name:<32} {label:<17} {result}", flush=True)
    target = RESPEC_TARGET if options.respec else TARGET
    if len(ratios) >= 2:
        quartiles = statistics.quantiles(ratios, n=4)
        median = statistics.median(ratios)
        print(f"\n{len(ratios)} rows timed: median {median:.2f} (quartiles {quartiles[0]:.2f}-{quartiles[2]:.2f}, "
              f"worst {max(ratios):.2f}); target median <= {target} {'ok' if median <= target else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
