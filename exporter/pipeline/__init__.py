"""The export pipeline, one module per stage: capture → decompose → translate → optimize.

- :mod:`.stage`: what a stage is (:class:`~.stage.Stage`: name, what it consumes and produces,
  its cache key) and what it returns (:class:`~.stage.StageResult`);
- :mod:`.stages`: the stages in order (:data:`~.stages.PIPELINE`);
- :mod:`.capture`, :mod:`.decompose`, :mod:`.translate` (with :mod:`.translations`),
  :mod:`.optimize` (with :mod:`.pass_records`): each stage's work;
- :mod:`.names`: the strategy and pass names the options check.

:class:`~exporter.session.Session` runs the stages lazily and caches each by its key; a failed
capture is explained by :mod:`exporter.diagnose`, which has the spec and inputs.
"""
