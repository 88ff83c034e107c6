"""Latency cost of ``ExportOptions(fully_masked_rows="zero")`` on the demo block, in onnxruntime.

Run: ``python benchmarks/masked_attention.py [--rounds N] [--runs N]``

The demo block (:func:`exporter.examples.demo_block`) is exported twice in this one process:
with ``fully_masked_rows="zero"`` (the default: a CastLike, ReduceMax and Mul after each
attention, so fully masked rows return 0 as in PyTorch) and ``"mean"`` (torch.onnx.export's
translation as it is). Both onnxruntime sessions run on one thread with spinning off; per size
they alternate in rounds of ``--runs`` calls, and each round's median is kept. The ratio is the
median over rounds of zero / mean; 1.00 means no cost. Printed per size (batch, seq), with the
number of ONNX nodes each model has.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings

SIZES = ((2, 7), (8, 64), (4, 256))


def _session(model_bytes: bytes):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 4
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def _round(ort_session, feeds, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        ort_session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--runs", type=int, default=50)
    options = parser.parse_args()

    import torch  # noqa: F401

    warnings.filterwarnings("ignore")
    for name in ("torch", "torch.export", "torch.onnx"):
        logging.getLogger(name).setLevel(logging.ERROR)

    from exporter import ExportOptions, export
    from exporter.examples import block_inputs, demo_block

    model, args, kwargs, dims = demo_block()
    sessions = {}
    for rows in ("zero", "mean"):
        exported = export(model, *args, options=ExportOptions(dynamic_shapes=dims, fully_masked_rows=rows), **kwargs)
        sessions[rows] = (_session(exported.model_bytes), len(list(exported.onnx_model.graph)))
    print(f"ONNX nodes: zero {sessions['zero'][1]}, mean {sessions['mean'][1]}")
    print(f"{'batch':>5} {'seq':>5} {'zero ms':>9} {'mean ms':>9} {'ratio':>6}")
    for batch, seq in SIZES:
        (x,), mask_kwargs = block_inputs(batch, seq)
        feeds = {"x": x.numpy(), "attention_mask": mask_kwargs["attention_mask"].numpy()}
        for ort_session, _ in sessions.values():  # warm up
            _round(ort_session, feeds, 10)
        zero, mean, ratios = [], [], []
        for _ in range(options.rounds):
            z = _round(sessions["zero"][0], feeds, options.runs)
            m = _round(sessions["mean"][0], feeds, options.runs)
            zero.append(z)
            mean.append(m)
            ratios.append(z / m)
        print(f"{batch:>5} {seq:>5} {statistics.median(zero) * 1e3:>9.4f} {statistics.median(mean) * 1e3:>9.4f} "
              f"{statistics.median(ratios):>6.3f}")


if __name__ == "__main__":
    main()
