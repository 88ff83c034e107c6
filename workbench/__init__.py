"""Jupyter front end of the ONNX export workbench (``%load_ext workbench``).

Loading the extension imports no torch, onnxscript or onnxruntime; they load on first export.
"""


def load_ipython_extension(ipython):  # pragma: no cover - filled in by the workbench issue
    """Register the workbench magics (none yet)."""
