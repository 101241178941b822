"""``report.html``: one self-contained page (inline SVG plots, no scripts, no external assets)."""

from __future__ import annotations

import html
import time

from guimem.harness.metrics import Summary
from guimem.harness.runfiles import EvalSpec, RunDir

PALETTE = ("#555555", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
W, H, PAD, LEGEND = 700, 260, 44, 170


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def svg_lines(title: str, series: dict[str, list[float]], y_max: float = 1.0, y_label: str = "") -> str:
    """A line chart: one line per series over rounds (x = round 1..R)."""
    n = max((len(v) for v in series.values()), default=1)

    def x(i: int) -> float:
        return PAD + (W - 2 * PAD - LEGEND) * (i / max(n - 1, 1))

    def y(v: float) -> float:
        return H - PAD - (H - 2 * PAD) * (v / y_max if y_max else 0)

    parts = [f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{html.escape(title)}">',
             f'<text x="{W / 2}" y="18" text-anchor="middle" font-weight="bold">{html.escape(title)}</text>',
             f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD - LEGEND}" y2="{H - PAD}" stroke="#999"/>',
             f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#999"/>',
             f'<text x="10" y="{PAD - 8}" font-size="11">{html.escape(y_label)}</text>']
    for tick in (0.0, 0.5, 1.0):
        parts.append(f'<text x="{PAD - 6}" y="{y(tick * y_max) + 4}" font-size="10" text-anchor="end">'
                     f'{tick * y_max:g}</text>')
    for i in range(n):
        parts.append(f'<text x="{x(i)}" y="{H - PAD + 16}" font-size="10" text-anchor="middle">{i + 1}</text>')
    for k, (name, values) in enumerate(series.items()):
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(f'<polyline fill="none" stroke="{_colour(k)}" stroke-width="2" points="{pts}"/>')
        parts += [f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{_colour(k)}"/>' for i, v in enumerate(values)]
        parts.append(f'<text x="{W - LEGEND - PAD + 12}" y="{PAD + 14 * k}" font-size="11" fill="{_colour(k)}">'
                     f'{html.escape(name)}</text>')
    parts.append(f'<text x="{(W - LEGEND) / 2}" y="{H - 6}" font-size="11" text-anchor="middle">round</text></svg>')
    return "".join(parts)


def svg_bars(title: str, values: dict[str, float], unit: str = "") -> str:
    """A horizontal bar chart."""
    top = max(values.values(), default=0) or 1
    row = 22
    height = 30 + row * len(values)
    parts = [f'<svg viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" '
             f'aria-label="{html.escape(title)}">',
             f'<text x="{W / 2}" y="16" text-anchor="middle" font-weight="bold">{html.escape(title)}</text>']
    for i, (name, v) in enumerate(values.items()):
        y0 = 26 + i * row
        width = (W - 260) * v / top
        parts.append(f'<text x="170" y="{y0 + 14}" font-size="11" text-anchor="end">{html.escape(name)}</text>')
        parts.append(f'<rect x="176" y="{y0 + 2}" width="{width:.1f}" height="16" fill="{_colour(i)}"/>')
        label = f"{v:,.0f}" if v >= 10 else f"{v:.2f}"
        parts.append(f'<text x="{180 + width:.1f}" y="{y0 + 14}" font-size="11">{label}{unit}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _pct(v: float) -> str:
    return f"{100 * v:.1f}"


def pass_table(summary: Summary, compact: bool = False) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the Pass@k table (percentages, 95 % CI at the last round)."""
    rounds = len(next(iter(summary.methods.values())).rounds) if summary.methods else 0
    p = "P@" if compact else "Pass@"
    headers = ["method", *[f"{p}{k}" for k in range(1, rounds + 1)], f"{p}{rounds} 95% CI",
               f"Δ vs none @{rounds} [CI]", "tok/step" if compact else "tokens/step",
               "p50 ms" if compact else "recall p50 ms", "p95 ms" if compact else "recall p95 ms",
               "infra" if compact else "infra failures (unresolved)"]
    rows = []
    for name, m in summary.methods.items():
        last = str(rounds)
        diff = m.diff_vs_none.get(last)
        steps = m.steps_total or 1
        p50 = max((r.recall_ms_p50 for r in m.rounds), default=0.0)
        p95 = max((r.recall_ms_p95 for r in m.rounds), default=0.0)
        rows.append([name, *[_pct(m.pass_at_k[str(k)]) for k in range(1, rounds + 1)],
                     f"[{_pct(m.pass_at_k_ci[last][0])}, {_pct(m.pass_at_k_ci[last][1])}]" if last in m.pass_at_k_ci
                     else "", f"{100 * diff.mean:+.1f} [{100 * diff.ci[0]:+.1f}, {100 * diff.ci[1]:+.1f}]" if diff
                     else "", f"{m.injected_tokens_total / steps:.1f}", f"{p50:.2f}", f"{p95:.2f}",
                     f"{m.infra.attempts} ({m.infra.unresolved})" if m.infra.attempts else "0"])
    return headers, rows


def _infra_section(summary: Summary) -> str:
    """A warning block listing infrastructure failures per method (empty when there were none)."""
    failing = {n: m.infra for n, m in summary.methods.items() if m.infra.attempts}
    if not failing:
        return ""
    rows = [[html.escape(n), str(i.attempts), str(i.unresolved), html.escape(i.first_error or "")]
            for n, i in failing.items()]
    return ('<div class="infra"><h2>Infrastructure failures</h2><p>Episodes the browser, model endpoint or '
            "store failed. They are <b>not</b> counted in Pass@k; unresolved ones run again when the evaluation "
            f"is resumed.</p>{_table(['method', 'failed attempts', 'unresolved', 'first error'], rows)}</div>")


def _model_section(summary: Summary) -> str:
    """Model calls, tokens, parse failures and time per method (empty when no model was used)."""
    rows = [[html.escape(n), str(m.model.calls), str(m.model.prompt_tokens), str(m.model.completion_tokens),
             f"{100 * m.model.parse_failure_rate:.1f}", f"{m.model.model_ms_per_step:.0f}",
             str(m.model.context_overflows)]
            for n, m in summary.methods.items() if m.model is not None]
    if not rows:
        return ""
    return ("<h2>Model calls</h2>" + _table(["method", "calls", "prompt tokens", "completion tokens",
                                             "parse failures %", "model ms / step", "context overflows"], rows))


def render(spec: EvalSpec, summary: Summary) -> str:
    """The report page."""
    success = {n: [r.success_rate for r in m.rounds] for n, m in summary.methods.items()}
    tokens = {n: float(m.injected_tokens_total) for n, m in summary.methods.items()}
    latency = {f"{n} p50": max((r.recall_ms_p50 for r in m.rounds), default=0.0)
               for n, m in summary.methods.items() if n != "none"}
    latency |= {f"{n} p95": max((r.recall_ms_p95 for r in m.rounds), default=0.0)
                for n, m in summary.methods.items() if n != "none"}
    sizes = {n: [float(sum(r.memory.values())) for r in m.rounds] for n, m in summary.methods.items() if n != "none"}
    top = max((v for vals in sizes.values() for v in vals), default=1.0) or 1.0
    headers, rows = pass_table(summary)
    memory_rows = [[n, str(r.round + 1), html.escape(", ".join(f"{k}: {v}" for k, v in sorted(r.memory.items())))]
                   for n, m in summary.methods.items() for r in m.rounds]
    css = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;"
           "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child,"
           "th:first-child{text-align:left}.plots{display:flex;flex-wrap:wrap;gap:1em}"
           ".infra{border-left:4px solid #c62828;padding-left:1em}")
    status = "complete" if summary.complete else "INCOMPLETE (resume with the same command)"
    infra = _infra_section(summary)
    title = f"guimem report: {html.escape(spec.suite.name)}"
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>{css}</style></head><body>
<h1>guimem lifelong evaluation</h1>
<p>Suite <b>{html.escape(spec.suite.name)}</b> ({len(spec.suite.tasks)} episodes per round), {spec.rounds} rounds,
env {html.escape(spec.env)}, policy {html.escape(spec.policy)}, embedder {html.escape(spec.embedder)};
run {status}; generated {time.strftime("%Y-%m-%d %H:%M:%S")}.</p>
{infra}<h2>Pass@k (%)</h2>{_table(headers, rows)}
<p>Pass@k: a (task, seed) counts once it succeeded in any of the first k rounds. CIs: bootstrap over tasks
({len(spec.suite.task_names())} clusters), paired against <code>none</code>.</p>
<div class="plots">{svg_lines("Success rate per round", success, 1.0, "success")}
{svg_bars("Injected tokens (all rounds)", tokens)}
{svg_bars("Recall latency, worst round (ms)", dict(sorted(latency.items())), " ms")}
{svg_lines("Memory size after each round (items)", sizes, top, "items")}</div>
<h2>Memory size by status</h2>{_table(["method", "round", "items"], memory_rows)}
{_model_section(summary)}
</body></html>"""


def write_report(run_dir: RunDir, spec: EvalSpec, summary: Summary) -> None:
    """Write ``report.html`` into the run directory."""
    (run_dir.path / "report.html").write_text(render(spec, summary), encoding="utf-8")
