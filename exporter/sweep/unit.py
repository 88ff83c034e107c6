"""The unit of work of a sweep: one zoo entry, one dim spec, one set of export options."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["SPECS", "Unit"]

#: ``spec=``: "dynamic" exports with the dim names the factory gives, "static" with none.
SPECS = ("dynamic", "static")


@dataclass(frozen=True)
class Unit:
    """One export to run in a fresh process.

    ``zoo`` and ``model`` name the factory; ``source`` is what the worker imports to find it
    again (a module name such as ``exporter.sweep.zoos.transformers`` or the path of a ``.py``
    file). ``spec`` is ``"dynamic"`` (the factory's dim names) or ``"static"``. ``opset``,
    ``strategy`` and ``optimize`` go to :class:`~exporter.ExportOptions`; ``verify``,
    ``benchmark`` and ``baseline`` say which checks follow the export (``baseline``: the same
    call through ``torch.onnx.export``, run in onnxruntime at the same inputs).
    ``skip_reason``: the unit is not run and is recorded as ``skipped`` (its zoo cannot load).
    ``import_error``: the unit stands for a zoo file that raised when imported: it is not run
    and is recorded as ``build_failed`` at stage ``import``, with this error."""

    zoo: str
    model: str
    source: str
    spec: str = "dynamic"
    opset: int | None = None
    strategy: str = "auto"
    optimize: bool = True
    verify: bool = True
    benchmark: bool = False
    baseline: bool = True
    skip_reason: str | None = None
    import_error: str | None = None

    def __post_init__(self) -> None:
        if self.spec not in SPECS:
            raise ValueError(f"unknown spec {self.spec!r}; choices: {', '.join(SPECS)}")

    @property
    def options(self) -> dict[str, Any]:
        """The export options and checks, the part of the id after the spec."""
        return {"opset": self.opset, "strategy": self.strategy, "optimize": self.optimize,
                "verify": self.verify, "benchmark": self.benchmark, "baseline": self.baseline}

    @property
    def unit_id(self) -> str:
        """``zoo/model/spec/<hash of the options>``: stable across runs and machines, the key
        a resumed sweep uses to skip units it already has records for."""
        digest = hashlib.sha1(json.dumps(self.options, sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.zoo}/{self.model}/{self.spec}/{digest}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Unit:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
