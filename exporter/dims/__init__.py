"""The dim-policy model: what the user asks of every input axis.

Per input (a leaf path such as ``x`` or ``cache.0.key``) and per axis, one of:

* ``STATIC``  – keep the example size (the default for any axis not mentioned);
* ``AUTO``    – let torch decide: dynamic unless the model's code pins it;
* ``DYNAMIC`` – must stay dynamic; export fails (with the reason) if the code pins it;
* ``Dim(name, min=, max=)`` – a named dynamic dim; axes sharing a name share one symbol and
  one ONNX ``dim_param``.

:meth:`DimSpec.parse` accepts what users already write:

* torch ``dynamic_shapes``: a dict by input name or a tuple by position, nested like the inputs
  (dicts, lists, tuples, registered dataclasses as a list, a dict by field name or an instance;
  ``*args`` as one tuple, ``**kwargs`` as one dict), with ``torch.export.Dim`` objects and
  ``Dim.AUTO``/``STATIC``/``DYNAMIC`` hints, ``True`` = AUTO and ``None`` = static, per axis or
  for a whole input;
* keys that are leaf paths (``{"cache.0.key": {0: "batch"}}``), which refine their container's
  spec;
* legacy ``dynamic_axes`` (``{"x": {0: "batch"}}`` or ``{"x": [0]}``; ``None`` entries ignored);
* plain strings as dim names, with ``torch.onnx.export``'s meaning (:class:`Name`: dynamic,
  named in the ONNX model, bounded by the model's guards instead of failing on them).

Everything is validated against the example inputs before any export starts: a bad spec
raises :class:`~exporter.SpecError` naming the input, the axis and the fix.

The command line's and the magic's text form, ``INPUT.AXIS=POLICY`` (``x.0=batch`` is the
string name ``"batch"``, ``x.1=seq:1:4096`` a ``Dim``), is read by :mod:`exporter.dims.grammar`
and nowhere else.
"""

from .model import AUTO, DYNAMIC, STATIC, AxisEntry, AxisPolicy, Derived, Dim, Name, Policy
from .spec import DimSpec

__all__ = ["AUTO", "DYNAMIC", "STATIC", "AxisEntry", "AxisPolicy", "Derived", "Dim", "DimSpec", "Name", "Policy"]
