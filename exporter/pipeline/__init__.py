"""The export pipeline, one module per stage: capture → decompose → translate → optimize.

Each stage takes the previous stage's output and returns a :class:`~exporter.session.StageResult`;
:class:`~exporter.session.Session` runs them lazily and caches each by its key.
"""
