"""Charts of shapes: dim ranges per input axis, guards per input axis with their lines, and
the sizes a recording observed next to the range the export accepts.

Each function takes plain data from :mod:`exporter.shapes` / :mod:`exporter.guards`
(``session.dims``, ``session.guards``; :mod:`exporter.recording`'s ``RangeReport``) and returns a new :class:`matplotlib.figure.Figure`
built without pyplot: nothing shown, no global state. Artists carry ``gid``s naming the axis
they draw (``"x.0"``, ``"static:x.1"``, ``"x.0:equality"``, ``"sources:x.0"``, ``"observed:x.0"``) so a caller
or a test can find them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Union

from exporter.axis import Axis
from exporter.guards import Guard
from exporter.shapes.outcomes import DimOutcome, DimOutcomes
from exporter.shapes.reasons import axes_text, axis_family

from ._figure import PANE_WIDTH, message_figure, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from exporter.recording import AxisRange, RangeReport
    from exporter.session import Session

__all__ = ["dim_ranges_chart", "guards_chart", "recorded_ranges_chart"]

# What the charts take: ``session.dims``, the session itself, or a list of outcomes.
Dims = Union[DimOutcomes, Sequence[DimOutcome], "Session"]

DYNAMIC_COLOR = "#1f77b4"
STATIC_COLOR = "#7f7f7f"
MISMATCH_COLOR = "#d62728"
EXAMPLE_COLOR = "#000000"
OBSERVED_COLOR = "#ff7f0e"
KIND_COLORS = {
    "specialization": "#d62728",
    "equality": "#9467bd",
    "guard": "#1f77b4",
    "runtime_assert": "#ff7f0e",
}
NO_INPUT = "(no input)"


def _legend_below(figure: Figure, handles: list[Any]) -> None:
    """The legend under the chart, inside the figure (constrained layout makes room for it)."""
    figure.legend(handles=handles, loc="outside lower center", ncol=3, fontsize="x-small", frameon=False)


def _rows_height(n: int) -> float:
    return 1.1 + 0.3 * max(n, 1)


def _label_size(n: int) -> float:
    return 9 if n <= 20 else 7


def _row(outcome: DimOutcome) -> str:
    """A chart row's name and gid stem: the outcome's axis, dotted (``x.0``)."""
    return Axis(outcome.input, outcome.axis).dotted


def _outcomes(dims: Dims) -> list[DimOutcome]:
    if isinstance(dims, DimOutcomes):
        return list(dims.outcomes)
    if isinstance(dims, Sequence):
        return list(dims)
    return list(dims.dims.outcomes)


def dim_ranges_chart(dims: Dims, *, title: str | None = None) -> Figure:
    """One row per input axis (``input.axis``): a dynamic dim is a bar from min to max (an
    open-ended max runs to the right edge and ends in an arrow), a static dim a square at its
    size, the example size a black diamond. Axes whose result differs from the request are
    red (bar edge, marker and label). Takes ``session.dims`` (or the session)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows = _outcomes(dims)
    if not rows:
        return message_figure("no input axes")
    n = len(rows)
    labels = [_row(o) for o in rows]
    ys = [n - 1 - i for i in range(n)]
    finite = [v for o in rows for v in (o.example, o.min, o.max) if v is not None]
    right = max(2.0, max(finite) * 1.15 + 1)

    figure = new_figure(PANE_WIDTH, _rows_height(n) + 0.6)
    ax = figure.add_subplot()
    if right > 64:
        ax.set_xscale("symlog", linthresh=1.0, linscale=0.4)

    dynamic = [(o, y, label) for o, y, label in zip(rows, ys, labels) if o.obtained == "dynamic"]
    if dynamic:
        lefts = [o.min or 0 for o, _, _ in dynamic]
        widths = [(o.max if o.max is not None else right) - (o.min or 0) for o, _, _ in dynamic]
        from matplotlib.colors import to_rgba

        bars = ax.barh(
            [y for _, y, _ in dynamic], widths, left=lefts, height=0.55, color=to_rgba(DYNAMIC_COLOR, 0.75),
            label="dynamic",
        )
        for bar, (o, y, label) in zip(bars, dynamic):
            bar.set_gid(label)
            if o.differs:
                bar.set_edgecolor(MISMATCH_COLOR)
                bar.set_linewidth(2.0)
            if o.max is None:
                bar.set_hatch("//")
                ax.plot([right], [y], marker=">", color=MISMATCH_COLOR if o.differs else DYNAMIC_COLOR,
                        markersize=7, gid=f"open:{label}", clip_on=False)
            from exporter.shapes.outcomes import range_text

            # Above the bar from its left end: clear of the example diamond and the open-end arrow.
            text = f"{o.dim or o.symbol} {range_text(o.min, o.max)}"
            ax.text(max(o.min or 0, 0), y + 0.3, text, fontsize=7, ha="left", va="bottom", gid=f"range:{label}")

    static = [(o, y, label) for o, y, label in zip(rows, ys, labels) if o.obtained == "static"]
    if static:
        points = ax.scatter(
            [o.min for o, _, _ in static], [y for _, y, _ in static], marker="s", s=50, zorder=3,
            c=[MISMATCH_COLOR if o.differs else STATIC_COLOR for o, _, _ in static], label="static",
        )
        points.set_gid("static")

    examples = ax.scatter(
        [o.example for o in rows], ys, marker="D", s=18, color=EXAMPLE_COLOR, zorder=4, label="example size",
    )
    examples.set_gid("examples")

    for o, y, label in zip(rows, ys, labels):
        if o.obtained == "failed":
            ax.text(0, y, "  capture failed" + (f": {o.reason[:60]}" if o.reason else ""), fontsize=7,
                    va="center", color=MISMATCH_COLOR, gid=f"failed:{label}")

    _size_axes(ax, ys, labels, [o.differs for o in rows], top=n - 0.2, right=right,
               title=title or "dim ranges obtained (red: differs from the request)")
    handles = [
        Patch(color=DYNAMIC_COLOR, alpha=0.75, label="dynamic [min, max]"),
        Patch(facecolor=DYNAMIC_COLOR, alpha=0.75, hatch="//", label="open-ended max"),
        Line2D([], [], marker="s", linestyle="", color=STATIC_COLOR, label="static"),
        Line2D([], [], marker="D", linestyle="", color=EXAMPLE_COLOR, markersize=5, label="example size"),
        Patch(facecolor="white", edgecolor=MISMATCH_COLOR, linewidth=2, label="differs from request"),
    ]
    _legend_below(figure, handles)
    return figure


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def guards_chart(guards: Iterable[Guard], dims: Dims | None = None, *, title: str | None = None) -> Figure:
    """Guards per input axis: a stacked bar of how many guards of each kind
    (specialization, equality, guard, runtime assert) involve the axis, and beside it the
    user lines that added them (``file:line  code``). ``dims`` (``session.dims``) lists every
    axis, including those without guards; without it only axes with guards are shown."""
    records = list(guards)
    if dims is not None:
        rows = [_row(o) for o in _outcomes(dims)]
    else:
        rows = list(dict.fromkeys(Axis.parse(a).dotted for g in records for a in g.axes))
    if any(not g.axes for g in records):
        rows.append(NO_INPUT)
    if not records:
        return message_figure("no shape guards were recorded")
    if not rows:
        return message_figure("no input axes")

    from matplotlib.patches import Patch

    n = len(rows)
    ys = {row: n - 1 - i for i, row in enumerate(rows)}
    involved: dict[str, list[Guard]] = {row: [] for row in rows}
    for g in records:
        keys = [Axis.parse(a).dotted for a in g.axes] or [NO_INPUT]
        for key in keys:
            if key in involved:
                involved[key].append(g)

    figure = new_figure(PANE_WIDTH, _rows_height(n))
    grid = figure.add_gridspec(1, 2, width_ratios=[1, 1.6])
    ax = figure.add_subplot(grid[0, 0])
    text_ax = figure.add_subplot(grid[0, 1], sharey=ax)
    left = {row: 0 for row in rows}
    for kind, color in KIND_COLORS.items():
        counts = [sum(1 for g in involved[row] if g.kind == kind) for row in rows]
        if not any(counts):
            continue
        bars = ax.barh([ys[r] for r in rows], counts, left=[left[r] for r in rows], height=0.6,
                       color=color, label=kind.replace("_", " "))
        for bar, row, count in zip(bars, rows, counts):
            bar.set_gid(f"{row}:{kind}")
            left[row] += count
    most = max(left.values()) or 1
    ax.set_xlim(0, most + 0.5)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_yticks(list(ys.values()))
    ax.set_yticklabels(rows, fontsize=_label_size(n))
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("guards")
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=c, label=k.replace("_", " ")) for k, c in KIND_COLORS.items()
               if any(g.kind == k for g in records)]
    ax.legend(handles=handles, loc="lower right", fontsize="x-small", framealpha=0.8)

    text_ax.axis("off")
    text_ax.set_xlim(0, 1)
    per_line = 60 if n <= 20 else 48  # what fits beside the bars in a pane
    for row in rows:
        sources: list[str] = []
        for g in involved[row]:
            where = g.location or "(torch)"
            entry = f"{where}  {g.code}" if g.code else where
            if entry not in sources:
                sources.append(entry)
        text = " | ".join(_short(s, 70) for s in sources) if sources else "—"
        text_ax.text(0.0, ys[row], _short(text, per_line), va="center", ha="left",
                     fontsize=_label_size(n) - 2, family="monospace", gid=f"sources:{row}")
    figure.suptitle(title or "shape guards per input axis, and the lines that added them", fontsize="medium")
    return figure


_LABEL_WIDTH = 28  # characters of a row label that fit beside the chart in a narrow pane


def _merged_rows(axes: Sequence[AxisRange]) -> list[tuple[str, AxisRange]]:
    """One chart row per set of axes that saw the same sizes and got the same range (the four
    ``cache.*.key/value.2`` of a 2-layer KV cache; every batch axis): ``(label, a member)``, in
    input order. The label names the axes (``cache.*.key/value.2``) while it fits, else the
    first family and how many more (``input_ids.0 + 6 axes``); the Dims rows below name them all."""
    rows: dict[tuple[Any, ...], list[AxisRange]] = {}
    for a in axes:
        key = (a.observed, a.sizes, a.exported, a.exported_min, a.exported_max, a.outside, a.outside_sizes)
        rows.setdefault(key, []).append(a)
    out = []
    for members in rows.values():
        label = axes_text([(m.path, m.axis) for m in members])
        if len(label) > _LABEL_WIDTH:
            family = axis_family(members[0].path, members[0].axis)
            first = [m for m in members if axis_family(m.path, m.axis) == family]
            more = len(members) - len(first)
            label = f"{axes_text([(m.path, m.axis) for m in first])} + {more} ax{'es' if more > 1 else 'is'}"
        out.append((label, members[0]))
    return out


def _accepted_bar(ax: Any, axis: AxisRange, y: float, right: float, label: str | None = None) -> None:
    """The range the export accepts, drawn as the dim-range chart draws a dim: a bar (open-ended:
    hatched, to the right edge, an arrow), a static size a square, a failed capture a note."""
    label = label or axis.label
    if axis.exported == "dynamic":
        low = axis.exported_min or 0
        high = axis.exported_max if axis.exported_max is not None else right
        (bar,) = ax.barh([y], [high - low], left=[low], height=0.5, color=DYNAMIC_COLOR, alpha=0.35)
        bar.set_gid(f"exported:{label}")
        if axis.exported_max is None:
            bar.set_hatch("//")
            ax.plot([right], [y], marker=">", color=DYNAMIC_COLOR, markersize=7, gid=f"open:{label}", clip_on=False)
    elif axis.exported == "static":
        ax.scatter([axis.exported_min], [y], marker="s", s=70, color=STATIC_COLOR, alpha=0.6, zorder=2,
                   gid=f"exported:{label}")
    else:
        ax.text(0, y, f"  export {axis.exported}", fontsize=7, va="center", color=MISMATCH_COLOR,
                gid=f"failed:{label}")


def recorded_ranges_chart(report: RangeReport, *, title: str | None = None) -> Figure:
    """One row per input axis of a recorded group: the range the export accepts (as in
    :func:`dim_ranges_chart`: a blue bar, hatched and arrowed when open-ended; a grey square
    when static), over it the observed range (an orange bar from the smallest to the largest
    recorded size) with a tick per recorded size, and a red cross on every recorded size the
    export does not accept (its axis label red). Leaves of one container that saw the same sizes
    share a row (``cache.*.key/value.2``). Takes ``compare_ranges(group, session)`` (or
    ``rec.export(...).ranges``)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    merged = _merged_rows(report.axes)
    rows = [a for _, a in merged]
    labels = [label for label, _ in merged]
    if not rows:
        return message_figure("the recorded calls have no input axes")
    n = len(rows)
    ys = [n - 1 - i for i in range(n)]
    finite = [v for a in rows for v in (*a.observed, a.exported_min, a.exported_max) if v is not None]
    right = max(2.0, max(finite) * 1.15 + 1)

    # Taller rows than the dim-range chart's: each carries its label line above two bars.
    figure = new_figure(PANE_WIDTH, _rows_height(n) + 0.12 * n + 0.6)
    ax = figure.add_subplot()
    if right > 64:
        ax.set_xscale("symlog", linthresh=1.0, linscale=0.4)
    for axis, y, label in zip(rows, ys, labels):
        _accepted_bar(ax, axis, y, right, label)
        low, high = axis.observed
        # A single observed size still shows: a bar at least a tenth of a unit wide.
        (bar,) = ax.barh([y], [max(high - low, 0.1)], left=[low if high > low else low - 0.05], height=0.22,
                         color=OBSERVED_COLOR, zorder=3)
        bar.set_gid(f"observed:{label}")
        sizes = sorted(set(axis.sizes))
        if sizes:
            ax.scatter(sizes, [y] * len(sizes), marker="|", s=90, color=EXAMPLE_COLOR, zorder=4,
                       linewidths=1.2, gid=f"calls:{label}")
        if axis.outside:
            outside = sorted(set(axis.outside_sizes))
            ax.scatter(outside, [y] * len(outside), marker="X", s=60, color=MISMATCH_COLOR, zorder=5,
                       gid=f"outside:{label}")
        text = f"observed {low}" if low == high else f"observed [{low}, {high}]"
        accepted = axis.accepted_text or axis.exported
        # Above the row, clear of the spine, so it reads as this row's and not the one above's.
        ax.annotate(f"{text} · export {accepted}", (0, y + 0.27), xytext=(3, 0), textcoords="offset points",
                    fontsize=7, ha="left", va="bottom", gid=f"range:{label}")

    _size_axes(ax, ys, labels, [bool(a.outside) for a in rows], top=n - 0.1, right=right,
               title=title or f"recorded {report.group} calls: observed vs exported")
    handles = [
        Patch(color=DYNAMIC_COLOR, alpha=0.35, label="exported [min, max]"),
        Line2D([], [], marker="s", linestyle="", color=STATIC_COLOR, alpha=0.6, label="exported static"),
        Patch(color=OBSERVED_COLOR, label="observed [min, max]"),
        Line2D([], [], marker="|", linestyle="", color=EXAMPLE_COLOR, markersize=8, label="a recorded size"),
        Line2D([], [], marker="X", linestyle="", color=MISMATCH_COLOR, label="not accepted"),
    ]
    _legend_below(figure, handles)
    return figure


def _size_axes(ax: Any, ys: Sequence[float], labels: Sequence[str], flagged: Sequence[bool], *, top: float,
               right: float, title: str) -> None:
    """One row per axis along a size scale from 0: the row labels (a flagged one red and bold),
    the limits, the grid and the title the two range charts share."""
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=_label_size(len(labels)))
    for tick, flag in zip(ax.get_yticklabels(), flagged):
        if flag:
            tick.set_color(MISMATCH_COLOR)
            tick.set_fontweight("bold")
    ax.set_ylim(-0.7, top)
    ax.set_xlim(left=0, right=right * 1.04)
    ax.set_xlabel("size")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize="medium")
