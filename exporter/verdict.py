"""The verdict of the export on screen: one value every surface reads.

``session.verdict`` is an :class:`ExportVerdict` built from the session's stages and its
:attr:`~exporter.Session.last_verify`, the verify kept with *this* exported model (the
analyses are kept per exported model, and each spec exports its own: a verify of another
spec never counts). The summary, the report, the widget's Stages and Benchmark tabs and the
CLI say "passed" (or a green "ok") only when it is :attr:`ExportVerdict.passed`:

- a stage failed: ``failed`` (the stage);
- exported, verify failed: ``failed`` (``verify``);
- exported, verify passed: ``passed``;
- exported, verify not run on this spec, ``not_verified``, could not run: ``not verified``;
- not exported yet (a stage left to run): ``not run``; cancelled: ``cancelled``.

:func:`verify_again` is the one rule for verifying on its own after a change of spec (the
widget after a dim toggle, the report of a derived session): when this export has no verify
of its own and the last verify run took less than a couple of seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import Status

__all__ = ["AUTO_VERIFY_SECONDS", "ExportVerdict", "export_verdict", "qualified_status", "verify_again"]

AUTO_VERIFY_SECONDS = 2.0
"""After a change of spec, verify again on its own when the last verify took less than this."""

NOT_VERIFIED = "not verified"
"""The word every surface shows for an export nothing has verified (not a :class:`Status`
member: verify's own ``not_verified`` is one reason among others)."""


class _Stage(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def status(self) -> Status: ...

    @property
    def seconds(self) -> float: ...

    @property
    def detail(self) -> str: ...


class _Verification(Protocol):
    """What the verdict reads of a :class:`~exporter.verify.VerifyResult`."""

    @property
    def status(self) -> Status: ...

    @property
    def verdict(self) -> str: ...

    @property
    def error(self) -> str | None: ...

    @property
    def seconds(self) -> float: ...


@dataclass(frozen=True)
class ExportVerdict:
    """What can be said of one export (one model, spec and options) as it stands.

    ``word``: ``passed``, ``failed``, ``not verified``, ``not run`` or ``cancelled``;
    ``text``: one sentence (verify's verdict when it ran; what is missing otherwise);
    ``failed``: the stage that failed, or ``verify``; ``verify``: the verify result it rests
    on (this exported model's), or None; ``exported``: every stage ran."""

    word: str
    text: str
    failed: str | None = None
    verify: Any = None
    exported: bool = False

    @property
    def passed(self) -> bool:
        """Verified as passed: the only verdict a surface shows as "ok"."""
        return self.word == "passed"

    @property
    def tone(self) -> str:
        """The tone of its badge: ``ok`` (passed), ``fail``, ``warn`` (not verified,
        cancelled) or ``muted`` (not run)."""
        return {"passed": "ok", "failed": "fail", NOT_VERIFIED: "warn", "cancelled": "warn"}.get(self.word, "muted")

    def __str__(self) -> str:
        return f"{self.word}: {self.text}"


def export_verdict(stages: Sequence[_Stage], verify: _Verification | None, *, complete: int = 4) -> ExportVerdict:
    """The verdict of an export whose stage results so far are ``stages`` (in pipeline order;
    ``complete`` of them make an export) and whose kept verify is ``verify`` (None: not run)."""
    failed = next((r for r in stages if r.status == Status.FAILED), None)
    if failed is not None:
        return ExportVerdict("failed", f"{failed.name} failed" + (f": {failed.detail}" if failed.detail else ""),
                             failed=failed.name)
    if any(r.status == Status.CANCELLED for r in stages):
        return ExportVerdict("cancelled", "cancelled before the export finished")
    if len(stages) < complete:
        done = ", ".join(r.name for r in stages)
        return ExportVerdict("not run", f"not exported yet ({done} done)" if done else "not exported yet")
    if verify is None:
        return ExportVerdict(NOT_VERIFIED, "not verified: verify has not run on this spec", exported=True)
    status = Status.of(verify.status)
    if status == Status.PASSED:
        return ExportVerdict("passed", verify.verdict, verify=verify, exported=True)
    if status == Status.FAILED:
        return ExportVerdict("failed", verify.verdict, failed="verify", verify=verify, exported=True)
    if status == Status.NOT_VERIFIED:
        return ExportVerdict(NOT_VERIFIED, verify.verdict, verify=verify, exported=True)
    why = verify.error or verify.verdict or str(verify.status)
    return ExportVerdict(NOT_VERIFIED, f"not verified: verify could not run: {why}", verify=verify, exported=True)


def qualified_status(status: Any, verdict: ExportVerdict) -> str:
    """An analysis's own status beside the verdict of the model it ran on (a benchmark's
    ``ok``): ``ok`` only when that model is verified as passed; else the verdict's word
    (``failed`` reads ``verify failed``: the timing itself ran)."""
    if str(status) != "ok" or verdict.passed:
        return str(status)
    return "verify failed" if verdict.word == "failed" else verdict.word


def verify_again(own: Any, last_seconds: float | None, below: float | None = None) -> bool:
    """Whether to verify an export on its own after a change of spec: it has no verify of its
    own (``own``: its kept verify, None when it has none) and the last verify run, of an
    earlier spec, took less than ``below`` seconds (0: never; None: :data:`AUTO_VERIFY_SECONDS`)."""
    limit = AUTO_VERIFY_SECONDS if below is None else below
    return own is None and last_seconds is not None and last_seconds < limit
