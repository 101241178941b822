"""The report's SVG chart kit: one colour per method, Pass@k curves with CI bands, small multiples,
bars, log-scale latency and memory size, each a self-contained inline ``<svg>`` whose every text is
escaped (no scripts, no external assets)."""

from __future__ import annotations

import html
import math

from guimem.harness.metrics import Summary
from guimem.harness.reportlabels import TITLE_CHARS, chart_label

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
NONE_COLOUR = "#6e7781"
W = 720
e = html.escape


def method_colours(methods: list[str]) -> dict[str, str]:
    """One colour per method, used by every chart and legend (``none`` is always grey)."""
    out, i = {}, 0
    for m in methods:
        if m == "none":
            out[m] = NONE_COLOUR
        else:
            out[m] = PALETTE[i % len(PALETTE)]
            i += 1
    return out


def _svg(title: str, width: int, height: int, body: list[str], cls: str = "chart") -> str:
    return (f'<svg class="{cls}" viewBox="0 0 {width} {height}" role="img" aria-label="{e(title)}" '
            f'data-title="{e(title)}"><title>{e(title)}</title>{"".join(body)}</svg>')


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top`` (integers when ``top`` is a count)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    step = max(step, 1.0) if top >= 1 else step
    return [i * step for i in range(math.ceil(top / step) + 1)]


def svg_pass_curves(summary: Summary, colours: dict[str, str], only: list[str] | None = None,
                    bands: bool = True, width: int = W, height: int = 300, title: str = "Pass@k (%)") -> str:
    """Pass@k over k with the 95 % CI band of each method (``only``: these methods)."""
    names = only or list(summary.methods)
    rounds = len(next(iter(summary.methods.values())).pass_at_k) if summary.methods else 1
    left, right, top, bottom = 44, 190 if only is None else 16, 28, 36

    def x(k: int) -> float:
        return left + (width - left - right) * ((k - 1) / max(rounds - 1, 1))

    def y(v: float) -> float:
        return height - bottom - (height - top - bottom) * v

    drawn = title if only is None else chart_label(title, TITLE_CHARS)
    body = [f'<text x="{width / 2}" y="16" text-anchor="middle" class="t">{e(drawn)}</text>']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        body.append(f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="grid"/>'
                    f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" class="s">{100 * tick:g}</text>')
    for k in range(1, rounds + 1):
        body.append(f'<text x="{x(k):.1f}" y="{height - bottom + 16}" text-anchor="middle" class="s">{k}</text>')
    body.append(f'<text x="{(left + width - right) / 2}" y="{height - 6}" text-anchor="middle" class="s">'
                f'k (rounds)</text>')
    ends: list[tuple[float, str]] = []
    for name in names:
        m = summary.methods[name]
        c = colours[name]
        ks = range(1, rounds + 1)
        if bands and m.pass_at_k_ci:
            upper = [f"{x(k):.1f},{y(m.pass_at_k_ci[str(k)][1]):.1f}" for k in ks]
            lower = [f"{x(k):.1f},{y(m.pass_at_k_ci[str(k)][0]):.1f}" for k in reversed(ks)]
            body.append(f'<polygon class="band" data-method="{e(name)}" points="{" ".join(upper + lower)}" '
                        f'fill="{c}" fill-opacity="0.13" stroke="none"/>')
        pts = " ".join(f"{x(k):.1f},{y(m.pass_at_k[str(k)]):.1f}" for k in ks)
        dash = ' stroke-dasharray="5 3"' if name == "none" else ""
        body.append(f'<polyline class="line" data-method="{e(name)}" fill="none" stroke="{c}" stroke-width="2.2"'
                    f'{dash} points="{pts}"/>')
        body += [f'<circle cx="{x(k):.1f}" cy="{y(m.pass_at_k[str(k)]):.1f}" r="2.8" fill="{c}">'
                 f'<title>{e(name)} Pass@{k} {100 * m.pass_at_k[str(k)]:.1f}%</title></circle>' for k in ks]
        ends.append((y(m.pass_at_k[str(rounds)]), name))
    if only is None:  # direct labels at the right end, pushed apart so they never overlap
        placed: list[float] = []
        for yy, name in sorted(ends):
            yy = max(yy, placed[-1] + 13) if placed else yy
            placed.append(yy)
            body.append(f'<text x="{width - right + 8}" y="{yy + 4:.1f}" class="s legend" data-method="{e(name)}" '
                        f'fill="{colours[name]}">{e(chart_label(name))} '
                        f'{100 * summary.methods[name].pass_at_k[str(rounds)]:.1f}'
                        f'</text>')
    return _svg(title, width, height, body)


def svg_small_multiples(summary: Summary, colours: dict[str, str]) -> str:
    """One small Pass@k panel per method, its CI band against ``none``'s (easier than seven lines)."""
    panels = []
    for name in summary.methods:
        if name == "none":
            continue
        only = ["none", name] if "none" in summary.methods else [name]
        panels.append(svg_pass_curves(summary, colours, only=only, width=240, height=170, title=name))
    return f'<div class="multiples">{"".join(panels)}</div>'


def svg_bars(title: str, values: dict[str, float], colours: dict[str, str], unit: str = "") -> str:
    """Horizontal bars, one per method, in the method's colour."""
    top = max(values.values(), default=0) or 1
    row, left = 22, 190
    height = 30 + row * len(values)
    body = [f'<text x="{W / 2}" y="16" text-anchor="middle" class="t">{e(title)}</text>']
    for i, (name, v) in enumerate(values.items()):
        y0 = 26 + i * row
        width = (W - left - 110) * v / top
        body.append(f'<text x="{left - 6}" y="{y0 + 14}" text-anchor="end" class="s">{e(chart_label(name))}'
                    f'<title>{e(name)}</title></text>'
                    f'<rect class="bar" data-method="{e(name)}" x="{left}" y="{y0 + 2}" width="{width:.1f}" '
                    f'height="16" '
                    f'fill="{colours[name]}"/><text x="{left + width + 4:.1f}" y="{y0 + 14}" class="s">'
                    f'{v:,.0f}{unit}</text>')
    return _svg(title, W, height, body)


def svg_latency(summary: Summary, colours: dict[str, str]) -> str:
    """Recall latency per method on a log axis: p50 (dot) and p95 (diamond) of the worst round."""
    rows = {n: (max((r.recall_ms_p50 for r in m.rounds), default=0.0),
                max((r.recall_ms_p95 for r in m.rounds), default=0.0)) for n, m in summary.methods.items()}
    values = [v for pair in rows.values() for v in pair if v > 0] or [1.0]
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    hi = hi * 10 if hi == lo else hi
    left, right, row = 190, 40, 24
    height = 56 + row * len(rows)

    def x(v: float) -> float:
        v = max(v, lo)
        return left + (W - left - right) * (math.log10(v / lo) / math.log10(hi / lo))

    title = "Recall latency per step, worst round (ms, log scale): ● p50  ◆ p95"
    body = [f'<text x="{W / 2}" y="16" text-anchor="middle" class="t">{e(title)}</text>']
    decade = lo
    while decade <= hi * 1.0001:
        body.append(f'<line x1="{x(decade):.1f}" x2="{x(decade):.1f}" y1="26" y2="{height - 26}" class="grid"/>'
                    f'<text x="{x(decade):.1f}" y="{height - 10}" text-anchor="middle" class="s">{decade:g}</text>')
        decade *= 10
    for i, (name, (p50, p95)) in enumerate(rows.items()):
        cy = 38 + i * row
        c = colours[name]
        body.append(f'<text x="{left - 8}" y="{cy + 4}" text-anchor="end" class="s">{e(chart_label(name))}'
                    f'<title>{e(name)}</title></text>'
                    f'<line x1="{x(p50):.1f}" x2="{x(p95):.1f}" y1="{cy}" y2="{cy}" stroke="{c}" stroke-width="2"/>'
                    f'<circle class="p50" data-method="{e(name)}" cx="{x(p50):.1f}" cy="{cy}" r="5" fill="{c}">'
                    f'<title>{e(name)} p50 {p50:.3g} ms</title></circle>'
                    f'<rect class="p95" data-method="{e(name)}" x="{x(p95) - 5:.1f}" y="{cy - 5}" width="10" '
                    f'height="10" '
                    f'fill="{c}" transform="rotate(45 {x(p95):.1f} {cy})"><title>{e(name)} p95 {p95:.3g} ms</title>'
                    f'</rect><text x="{max(x(p95), x(p50)) + 10:.1f}" y="{cy + 4}" class="s">'
                    f'{p50:.3g} / {p95:.3g}</text>')
    return _svg(title, W, height, body)


def svg_memory_size(summary: Summary, colours: dict[str, str]) -> str:
    """Items in each method's memory after each round (integer ticks; ``none`` keeps nothing)."""
    sizes = {n: [sum(r.memory.values()) for r in m.rounds] for n, m in summary.methods.items() if n != "none"}
    rounds = max((len(v) for v in sizes.values()), default=1)
    ticks = nice_ticks(max((v for vals in sizes.values() for v in vals), default=1))
    left, right, top, bottom, height = 52, 190, 28, 36, 260

    def x(i: int) -> float:
        return left + (W - left - right) * (i / max(rounds - 1, 1))

    def y(v: float) -> float:
        return height - bottom - (height - top - bottom) * v / ticks[-1]

    title = "Memory size after each round (items)"
    body = [f'<text x="{W / 2}" y="16" text-anchor="middle" class="t">{e(title)}</text>']
    for t in ticks:
        body.append(f'<line x1="{left}" x2="{W - right}" y1="{y(t):.1f}" y2="{y(t):.1f}" class="grid"/>'
                    f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end" class="s tick">{t:,.0f}</text>')
    for i in range(rounds):
        body.append(f'<text x="{x(i):.1f}" y="{height - bottom + 16}" text-anchor="middle" class="s">{i + 1}</text>')
    placed: list[float] = []
    for name, values in sorted(sizes.items(), key=lambda kv: -kv[1][-1] if kv[1] else 0):
        c = colours[name]
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        body.append(f'<polyline class="line" data-method="{e(name)}" fill="none" stroke="{c}" stroke-width="2" '
                    f'points="{pts}"/>')
        if values:
            yy = y(values[-1])
            yy = max(yy, placed[-1] + 13) if placed else yy
            placed.append(yy)
            body.append(f'<text x="{W - right + 8}" y="{yy + 4:.1f}" class="s legend" fill="{c}">'
                        f'{e(chart_label(name))} '
                        f'{values[-1]:,}</text>')
    body.append(f'<text x="{(left + W - right) / 2}" y="{height - 6}" text-anchor="middle" class="s">round</text>')
    return _svg(title, W, height, body)
