"""Charts: matplotlib figures of the exporter's results (verification, benchmark, profile, dim ranges,
guards), built without pyplot. The graph drawing is part of the core (:mod:`exporter.graphs.draw`)."""
