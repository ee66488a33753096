"""A PNG per change: the metric in each window against the baseline and the acceptance threshold."""

from __future__ import annotations

import io

from bot.changes.service import ChangeView, window_shows_benefit

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ChartError(ValueError):
    """Nothing to draw."""


def change_chart_png(*, change: ChangeView) -> bytes:
    """Bars per window (green when the window shows benefit), baseline and threshold as lines."""
    if not change.measurements:
        raise ChartError(f"Change #{change.id} has no measurements to chart yet.")
    labels = [item.window for item in change.measurements]
    values = [item.value for item in change.measurements]
    colours = [
        "#2e7d32"
        if window_shows_benefit(measurement=item, higher_is_better=change.higher_is_better)
        else "#c62828"
        for item in change.measurements
    ]
    unit = change.measurements[0].unit
    baseline = change.measurements[-1].baseline
    threshold = change.measurements[-1].threshold

    # Imported here: matplotlib costs ~0.5 s to import, and most commands never draw a chart.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 3.6), dpi=100)  # a Figure, not pyplot: no global state across threads
    axes = figure.add_subplot()
    positions = list(range(len(labels)))
    axes.bar(positions, values, color=colours, width=0.6, label=f"{change.metric} per window")
    axes.axhline(
        baseline, color="#455a64", linestyle="--", linewidth=1.5, label=f"baseline {baseline:g} {unit}"
    )
    axes.axhline(
        threshold, color="#ef6c00", linestyle=":", linewidth=2, label=f"threshold {threshold:g} {unit}"
    )
    for position, value in zip(positions, values, strict=True):
        axes.annotate(f"{value:g}", (position, value), ha="center", va="bottom", fontsize=8)
    axes.set_xticks(positions, labels)
    axes.set_ylabel(f"{change.metric} ({unit})")
    verdict = "gain repeated" if change.gain_repeated else "gain NOT repeated"
    axes.set_title(f"Change #{change.id}: {change.variable} ({verdict})", fontsize=10)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
