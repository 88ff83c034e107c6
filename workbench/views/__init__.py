"""The workbench's tabs, one module each: stages, dims, guards, graphs, verify, benchmark.

Each view builds its ipywidgets once and has a ``show(...)`` that fills them from the
exporter core's data; none computes anything itself."""
