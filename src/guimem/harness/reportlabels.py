"""How the report names methods and sums up what they learned, where a run's names are long or a method
keeps no items: an import path by its class name where space is short, and events when there are no items."""

from __future__ import annotations

import html

from guimem.harness.reportdata import Learned
from guimem.registry import is_target

LEGEND_CHARS = 22
"""A chart legend's room for a name (the value follows it)."""
TITLE_CHARS = 30
"""A small panel's room for its title."""


def chart_label(method: str, limit: int = LEGEND_CHARS) -> str:
    """``method`` as a chart writes it: an import path by its class name, cut to ``limit`` characters
    (the full name stays in the chart's title and tooltips)."""
    label = method.rsplit(":", 1)[-1] if is_target(method) else method
    return label if len(label) <= limit else label[: limit - 1] + "…"


def breakable(method: str) -> str:
    """``method`` as escaped HTML that a narrow table cell breaks after its dots and colon, not inside words."""
    return html.escape(method).replace(".", ".<wbr>").replace(":", ":<wbr>")


def learned_line(mem: Learned, stats: dict[str, int]) -> str:
    """One line on what a method's memory holds at the end: its items by kind and status; for a method that
    keeps no items, the events it logged and its own stats after the last round; "nothing" only when none."""
    if mem.counts:
        return ", ".join(f"{k} {v}" for k, v in mem.counts.items())
    parts = [f"{mem.events} {'event' if mem.events == 1 else 'events'} logged, no items in the store"] \
        if mem.events else []
    own = ", ".join(f"{k} {v}" for k, v in sorted(stats.items()))
    if own and any(stats.values()):
        parts.append(f"its stats after the last round: {own}")
    return "; ".join(parts) or "nothing"
