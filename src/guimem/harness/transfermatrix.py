"""The report's transfer matrix: for each target task, which other tasks' items were shown to it, and
whether those episodes succeeded — read from the traces (each shown item names the tasks it was learned
from), so it says what reached the agent, not what memory holds."""

from __future__ import annotations

import html
from collections import defaultdict

from guimem.harness.reportdata import EpisodeView

MAX_ROWS = 60
TWIN_SUFFIXES = ("-nodelay", "-popup", "-easy")
e = html.escape


def relation(target: str, source: str) -> str:
    """``twin`` (the names differ only by a timing or pop-up variant's suffix: pages that differ in timing,
    not in UI), ``sibling`` (the names share their first two words), else ``other`` — so a transfer figure
    can be told apart from one carried by near-identical pages."""
    def base(name: str) -> str:
        for suffix in TWIN_SUFFIXES:
            name = name.removesuffix(suffix)
        return name

    if base(target) == base(source):
        return "twin"
    return "sibling" if target.split("-")[:2] == source.split("-")[:2] and "-" in target else "other"


def transfer_rows(views: list[EpisodeView]) -> list[tuple[str, str, str, int, int]]:
    """(method, target task, source task, episodes shown the source's items, of them succeeded)."""
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for v in views:
        if v.infra:
            continue
        for source in v.sources:
            cell = counts[(v.method, v.task, source)]
            cell[0] += 1
            cell[1] += int(v.success)
    return [(m, t, s, n, ok) for (m, t, s), (n, ok) in sorted(counts.items())]


def transfer_section(views: list[EpisodeView]) -> str:
    """The HTML section (empty when no episode was shown another task's items)."""
    rows = transfer_rows(views)
    if not rows:
        return ""
    body = "".join(f"<tr><td>{e(m)}</td><td>{e(t)}</td><td>{e(s)}</td><td>{relation(t, s)}</td><td>{n}</td>"
                   f"<td>{ok}</td></tr>" for m, t, s, n, ok in rows[:MAX_ROWS])
    more = f"<p class=\"muted\">{len(rows) - MAX_ROWS} more rows in the traces.</p>" if len(rows) > MAX_ROWS else ""
    return ("<h2>Transfer: items from other tasks</h2><p class=\"muted\">Each row: episodes of the target task "
            "that were shown an item learned from the source task, and how many of them succeeded.</p>"
            "<div class=\"scroll\"><table class=\"transfer\"><tr><th>method</th><th>target task</th>"
            f"<th>source task</th><th>relation</th><th>episodes shown</th><th>succeeded</th></tr>{body}</table></div>"
            f"{more}")
