"""The Dims tab: one row per input axis with its example size, a policy control (AUTO /
STATIC / DYNAMIC / Dim with name, min and max) and the obtained result with its reason and
source line; an "Apply suggested fixes" button; a "Copy as code" box.

Changing a control calls back into the workbench, which derives a session with that axis
changed and re-captures in the background. Every text shown comes from the core
(``session.dims``, ``session.suggested_fixes``, ``session.spec.to_code``).

DOM hooks (CSS classes) for browser tests: the policy control of input ``x`` axis 0 has
``wb-axis-x-0``, its result text ``wb-dim-result-x-0`` (a leaf path's dots become dashes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ._html import esc, failure_html, note, pre

__all__ = ["POLICY_CHOICES", "AxisRow", "DimsView", "css_name"]

POLICY_CHOICES = ("AUTO", "STATIC", "DYNAMIC", "Dim")


def css_name(path: str, axis: int) -> str:
    """``x``, 0 → ``x-0``; ``cache.0.key``, 2 → ``cache-0-key-2``."""
    return f"{path.replace('.', '-')}-{axis}"


def _bound_text(value: int | None) -> str:
    return "" if value is None else str(value)


def _parse_bound(text: str, which: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{which} {text!r} is not an integer") from None


def outcome_text(outcome: Any) -> str:
    """The one-line result of a :class:`~exporter.shapes.DimOutcome`: ``dynamic batch [2, inf]``,
    ``static 4`` or ``failed``."""
    if outcome.obtained == "dynamic":
        top = "inf" if outcome.max is None else outcome.max
        return f"dynamic {outcome.dim or outcome.symbol} [{outcome.min or 0}, {top}]"
    if outcome.obtained == "static":
        return f"static {outcome.min}"
    return "failed"


class AxisRow:
    """The controls and result of one input axis."""

    def __init__(self, path: str, axis: int, example: int, on_change: Callable[[AxisRow], None]) -> None:
        self.path, self.axis, self.example = path, axis, example
        self._on_change = on_change
        self._syncing = False
        self._shown_policy: Any = None  # the session's policy for this axis, as last shown
        css = css_name(path, axis)
        self.label = widgets.HTML(f"<code>{esc(path)}.{axis}</code> <span style='color:#666'>size {example}</span>",
                                  layout=widgets.Layout(width="160px"))
        self.policy = widgets.Dropdown(options=POLICY_CHOICES, value="STATIC", layout=widgets.Layout(width="110px"))
        self.policy.add_class(f"wb-axis-{css}")
        self.name = widgets.Text(placeholder="name", continuous_update=False, layout=widgets.Layout(width="110px"))
        self.min = widgets.Text(placeholder="min", continuous_update=False, layout=widgets.Layout(width="60px"))
        self.max = widgets.Text(placeholder="max", continuous_update=False, layout=widgets.Layout(width="60px"))
        self.dim_box = widgets.HBox([self.name, self.min, self.max], layout=widgets.Layout(display="none"))
        self.result = widgets.HTML(layout=widgets.Layout(flex="1"))
        self.result.add_class(f"wb-dim-result-{css}")
        self.widget = widgets.HBox([self.label, self.policy, self.dim_box, self.result])
        self.policy.observe(self._policy_changed, names="value")
        for box in (self.name, self.min, self.max):
            box.observe(self._dim_changed, names="value")

    # -- control → workbench ---------------------------------------------------------------
    def _policy_changed(self, change: Any) -> None:
        self.dim_box.layout.display = "" if change["new"] == "Dim" else "none"
        if change["new"] == "Dim" and not self.name.value:
            from exporter.dims.model import default_dim_name

            with self.syncing():
                self.name.value = default_dim_name(self.path, self.axis)
        if not self._syncing:
            self._on_change(self)

    def _dim_changed(self, change: Any) -> None:
        if not self._syncing and self.policy.value == "Dim":
            self._on_change(self)

    def requested_policy(self) -> Any:
        """The policy the controls ask for (raises ``SpecError``/``ValueError`` for a bad name or bound)."""
        from exporter.dims import AUTO, DYNAMIC, STATIC, Dim

        choice = self.policy.value
        if choice != "Dim":
            return {"AUTO": AUTO, "STATIC": STATIC, "DYNAMIC": DYNAMIC}[choice]
        name, low, high = self.name.value.strip(), _parse_bound(self.min.value, "min"), _parse_bound(self.max.value, "max")
        shown = self._shown_policy
        if isinstance(shown, Dim) and (shown.name, shown.min, shown.max) == (name, low, high):
            return shown  # unchanged: keeps a torch.onnx-style dim name (exporter.dims.Name) as it is
        return Dim(name, min=low, max=high)

    # -- session → control ------------------------------------------------------------------
    def syncing(self) -> Any:
        row = self

        class _Syncing:
            def __enter__(self) -> None:
                self.saved, row._syncing = row._syncing, True

            def __exit__(self, *exc: Any) -> None:
                row._syncing = self.saved

        return _Syncing()

    def show_policy(self, policy: Any) -> None:
        """Set the controls to ``policy`` without triggering a re-capture."""
        from exporter.dims import Dim

        self._shown_policy = policy
        with self.syncing():
            if isinstance(policy, Dim):
                self.name.value, self.min.value, self.max.value = policy.name, _bound_text(policy.min), _bound_text(policy.max)
                self.policy.value = "Dim"
            else:
                self.policy.value = policy.name  # Policy enum: AUTO / STATIC / DYNAMIC
        self.dim_box.layout.display = "" if self.policy.value == "Dim" else "none"

    def show_outcome(self, outcome: Any, last_good: Any = None) -> None:
        """The obtained result, its reason, note and source line; beside a failure, the last
        good result of this axis."""
        parts = [f"<b>{esc(outcome_text(outcome))}</b>"]
        if outcome.reason:
            parts.append(f" — {esc(outcome.reason)}")
        if outcome.note:
            parts.append(f"<br>{note(outcome.note)}")
        if outcome.source:
            parts.append(f"<br><code style='font-size: 85%'>{esc(outcome.source)}</code>")
        if outcome.obtained == "failed" and last_good is not None:
            parts.append(f"<br>{note('last good: ' + outcome_text(last_good))}")
        self.result.value = "".join(parts)


class DimsView:
    """The Dims tab of one workbench: rows for every input axis of the session's inputs."""

    title = "Dims"

    def __init__(self, inputs: Any, on_axis_change: Callable[[AxisRow], None], on_apply_fixes: Callable[[], None]) -> None:
        self.rows: dict[tuple[str, int], AxisRow] = {}
        for leaf in inputs.leaves:
            for axis, size in enumerate(leaf.shape):
                self.rows[(leaf.path, axis)] = AxisRow(leaf.path, axis, int(size), on_axis_change)
        self.message = widgets.HTML()
        self.message.add_class("wb-dims-message")
        self.fixes_button = widgets.Button(description="Apply suggested fixes", disabled=True,
                                           icon="wrench", layout=widgets.Layout(width="220px"))
        self.fixes_button.add_class("wb-apply-fixes")
        self.fixes_button.on_click(lambda _: on_apply_fixes())
        self.fixes = widgets.HTML()
        self.code = widgets.Textarea(description="", layout=widgets.Layout(width="100%", height="110px"))
        self.code.add_class("wb-dims-code")
        header = widgets.HTML("<b>input axis</b> · <b>policy</b> · <b>obtained</b> (reason, source line)")
        self.widget = widgets.VBox(
            [header, *(row.widget for row in self.rows.values()), self.message,
             widgets.HBox([self.fixes_button]), self.fixes,
             widgets.HTML("<b>Copy as code</b> (the <code>dynamic_shapes=</code> of these controls)"), self.code]
        )

    def row(self, path: str, axis: int) -> AxisRow:
        try:
            return self.rows[(path, axis)]
        except KeyError:
            known = ", ".join(f"{p}.{a}" for p, a in self.rows)
            raise KeyError(f"no input axis {path}.{axis}; the axes are {known}") from None

    def show_spec(self, spec: Any) -> None:
        for (path, axis), row in self.rows.items():
            row.show_policy(spec.policy(path, axis))

    def show_error(self, text: str) -> None:
        self.message.value = failure_html(text, "the controls ask for a spec that is not valid") if text else ""

    def show(self, session: Any, last_good: Any = None) -> None:
        """The rows, fixes and code of ``session`` (its capture has run); ``last_good`` is the
        last session whose capture succeeded, shown beside a failure."""
        dims = session.dims
        good = last_good.dims if last_good is not None and last_good is not session else None
        for outcome in dims:
            row = self.rows.get((outcome.input, outcome.axis))
            if row is None:
                continue
            previous = None
            if good is not None:
                try:
                    previous = good[outcome.input, outcome.axis]
                except KeyError:
                    previous = None
            row.show_outcome(outcome, previous)
        capture = session.result("capture")
        self.message.value = failure_html(capture.failure, "capture failed") if capture.failure else ""
        fixes = session.suggested_fixes
        self.fixes_button.disabled = not bool(fixes)
        if fixes:
            self.fixes.value = "<b>torch suggests</b>" + pre(fixes.summary())
        elif fixes.unapplied or fixes.error:
            self.fixes.value = pre(fixes.summary())
        else:
            self.fixes.value = ""
        self.code.value = session.spec.to_code(session.inputs)
