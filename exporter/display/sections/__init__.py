"""The builders: each result type's section, registered by type name with
:func:`exporter.presentation.presents` when this package is imported (:mod:`exporter` does).

This is the top of the core: it imports the results it shows; nothing in the core imports it
but :mod:`exporter` (to register the builders), the report and the CLI.

- :mod:`~exporter.display.sections.session`: a session at a glance, the stages and capture
  attempts tables;
- :mod:`~exporter.display.sections.shapes`: dim outcomes, guards, suggested fixes;
- :mod:`~exporter.display.sections.failure`: a failure on its own;
- :mod:`~exporter.display.sections.verify`: verification, its contract and first divergence;
- :mod:`~exporter.display.sections.bench`: benchmark, latency statistics, sweep, variants, profile;
- :mod:`~exporter.display.sections.graphs`: node mapping, per-node differences;
- :mod:`~exporter.display.sections.passes`: the optimizer pass by pass, the bisection;
- :mod:`~exporter.display.sections.sweep`: zoo sweeps and their diff.
"""

from .bench import benchmark_section, comparison_section, latency_stats_section, profile_section, sweep_section
from .failure import failure_section
from .graphs import intermediates_section, mapping_section
from .passes import bisection_section, pass_diff_section, passes_section
from .session import attempts_table, result_line, session_html, session_section, stages_table
from .shapes import dims_section, fixes_section, guards_section
from .sweep import sweep_diff_section, sweep_results_section
from .verify import contract_section, divergence_section, verify_section

__all__ = [
    "attempts_table",
    "benchmark_section",
    "bisection_section",
    "comparison_section",
    "contract_section",
    "dims_section",
    "divergence_section",
    "failure_section",
    "fixes_section",
    "guards_section",
    "intermediates_section",
    "latency_stats_section",
    "mapping_section",
    "pass_diff_section",
    "passes_section",
    "profile_section",
    "result_line",
    "session_html",
    "session_section",
    "stages_table",
    "sweep_diff_section",
    "sweep_results_section",
    "sweep_section",
    "verify_section",
]
