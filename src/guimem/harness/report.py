"""``report.html``: one self-contained page (inline SVG, inline CSS, no scripts, no external assets).

What a researcher comes for, in order: the Pass@k table; Pass@k curves with 95 % CI bands (one panel per
method against ``none``, and all methods together); a task × method matrix of per-round outcomes whose
cells open that episode's steps (embedded, shown with CSS ``:target``); tokens, log-scale recall latency
and memory size; episodes failed by action errors and infrastructure failures; model calls; and what
memory learned. One colour per method in every chart (the charts are `guimem.harness.charts`). Every
text from a run (task names, item texts, actions, errors) is escaped.
"""

from __future__ import annotations

import html
import time
from collections import defaultdict

from guimem.envs.drift import kinds_of
from guimem.harness.charts import (
    NONE_COLOUR,
    method_colours,
    svg_bars,
    svg_latency,
    svg_memory_size,
    svg_pass_curves,
    svg_small_multiples,
)
from guimem.harness.metrics import Summary
from guimem.harness.reportdata import EpisodeView, Learned, ReportData, collect
from guimem.harness.reportlabels import breakable, learned_line
from guimem.harness.runfiles import EvalSpec, RunDir
from guimem.harness.transfermatrix import transfer_section
from guimem.types import plural

e = html.escape


def _swatch(method: str, colours: dict[str, str]) -> str:
    return f'<span class="swatch" data-method="{e(method)}" style="--c:{colours.get(method, NONE_COLOUR)}"></span>'


def _table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _pct(v: float) -> str:
    return f"{100 * v:.1f}"


def pass_table(summary: Summary, compact: bool = False) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the Pass@k table (percentages, 95 % CI at the last round)."""
    rounds = len(next(iter(summary.methods.values())).rounds) if summary.methods else 0
    p = "P@" if compact else "Pass@"
    headers = ["method", *[f"{p}{k}" for k in range(1, rounds + 1)], f"{p}{rounds} 95% CI",
               f"Δ vs none @{rounds} [CI]", "harm", "tok/step" if compact else "tokens/step",
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
                     else "", "–" if name == "none" or "none" not in summary.methods else str(len(m.harm)),
                     f"{m.injected_tokens_total / steps:.1f}", f"{p50:.2f}", f"{p95:.2f}",
                     f"{m.infra.attempts} ({m.infra.unresolved})" if m.infra.attempts else "0"])
    return headers, rows


def _main_table(summary: Summary, colours: dict[str, str], errored: dict[str, int]) -> str:
    headers, rows = pass_table(summary)
    skills = any(m.skill_runs for m in summary.methods.values())
    headers = [*headers[:-1], "success round 1 → last", "injected tokens total", "failed by action errors",
               *(["skill runs (succeeded %)"] if skills else []), headers[-1]]
    for row, (name, m) in zip(rows, summary.methods.items(), strict=True):
        first, last = (m.rounds[0].success_rate, m.rounds[-1].success_rate) if m.rounds else (0.0, 0.0)
        row[0] = f'{_swatch(name, colours)}{breakable(name)}'
        runs = [f"{m.skill_runs} ({_pct(m.skill_run_success_rate)})" if m.skill_run_success_rate is not None
                else "0"] if skills else []
        row[-1:-1] = [f"{_pct(first)} → {_pct(last)}", f"{m.injected_tokens_total:,}", str(errored.get(name, 0)),
                      *runs]
    return f'<div class="scroll">{_table(headers, rows, "main")}</div>'


def _harm_list(summary: Summary, limit: int = 8) -> str:
    """`` (graph: task seed 501 round 2, ...)`` for the methods that harmed, rounds counted from 1."""
    parts = []
    for name, m in summary.methods.items():
        if m.harm:
            cases = ", ".join(f"{c.task} {c.seed} r{c.round + 1}" for c in m.harm[:limit])
            parts.append(f"{e(name)}: {e(cases)}{' …' if len(m.harm) > limit else ''}")
    return f" ({'; '.join(parts)})" if parts else ""


def _infra_section(summary: Summary) -> str:
    """A warning block listing infrastructure failures per method (empty when there were none)."""
    failing = {n: m.infra for n, m in summary.methods.items() if m.infra.attempts}
    if not failing:
        return ""
    rows = [[e(n), str(i.attempts), str(i.unresolved), e(i.first_error or "")] for n, i in failing.items()]
    return ('<div class="infra"><h2>Infrastructure failures</h2><p>Episodes the browser, model endpoint or '
            "store failed. They are <b>not</b> counted in Pass@k; unresolved ones run again when the evaluation "
            f"is resumed.</p>{_table(['method', 'failed attempts', 'unresolved', 'first error'], rows)}</div>")


def _retired(counts: dict[str, int]) -> int:
    """Items retired by the round's end (from its memory snapshot, ``kind:status`` or ``status`` keys)."""
    return sum(n for key, n in counts.items() if key.rpartition(":")[2] == "retired")


def _drift_section(spec: EvalSpec, summary: Summary) -> str:
    """Which UI version each round showed, success per round and Pass@k per version (empty without drift)."""
    if not spec.drift_at:
        return ""
    versions = [spec.ui_version(k) for k in range(spec.rounds)]
    headers = ["method", *[f"round {k + 1} ({v})" for k, v in enumerate(versions)],
               *[f"Pass@{k} {v}" for v in dict.fromkeys(versions) for k in range(1, versions.count(v) + 1)]]
    rows = [[breakable(n), *[_pct(r.success_rate) for r in m.rounds],
             *[_pct(p) for v in dict.fromkeys(versions) for p in m.pass_at_k_by_version.get(v, {}).values()]]
            for n, m in summary.methods.items()]
    headers.append("stale / re-grounded / retired, per round")
    for row, m in zip(rows, summary.methods.values(), strict=True):
        row.append(" · ".join(f"{r.stale_items}/{r.regrounded_items}/{_retired(r.memory)}" for r in m.rounds))
    said = {"relabel": "controls relabelled", "reorder": "same-container buttons swapped", "rename": "ids renamed",
            "move": "layout moved", "interstitial": "a notice to dismiss first"}
    changes = ", ".join(said[k] for k in said if k in kinds_of(spec.drift_to))
    return (f"<h2>UI drift</h2><p>From round {spec.drift_at} on the pages showed version {e(spec.drift_to)}: "
            f"{changes} (<code>guimem.envs.drift</code>); the goals and success checks did not change. Success per "
            f"round (%), Pass@k within each version, and per round the items memory withheld as stale (none of their "
            f"elements on the screen), showed re-grounded (an element found again under another id) and had retired "
            f"by the round's end (items counted once per episode).</p>"
            f"<div class=\"scroll\">{_table(headers, rows, 'drift')}</div>")


def _model_section(summary: Summary) -> str:
    """Model calls, tokens, parse failures and time per method (empty when no model was used)."""
    rows = [[e(n), str(m.model.calls), f"{m.model.prompt_tokens:,}", f"{m.model.completion_tokens:,}",
             f"{100 * m.model.parse_failure_rate:.1f}", f"{m.model.model_ms_per_step:.0f}",
             str(m.model.context_overflows), e(", ".join(m.model.output_modes))]
            for n, m in summary.methods.items() if m.model is not None]
    if not rows:
        return ""
    return ("<h2>Model calls</h2>" + _table(["method", "calls", "prompt tokens", "completion tokens",
                                             "parse failures %", "model ms / step", "context overflows",
                                             "output modes"], rows))


def _matrix(spec: EvalSpec, summary: Summary, colours: dict[str, str], views: list[EpisodeView]) -> str:
    """Task × method: one square per round (green solved, red failed, grey infra/missing), each a link to
    that episode's steps; the first round each method solved each task is written out."""
    by_key = {(v.method, v.task, v.seed, v.round): v for v in views}
    methods = list(summary.methods)
    units = list(dict.fromkeys((t.task, t.seed) for t in spec.suite.tasks))
    head = "".join(f"<th>{_swatch(m, colours)}{breakable(m)}</th>" for m in methods)
    rows = []
    for task, seed in units:
        cells = []
        for m in methods:
            squares, first = [], None
            for r in range(spec.rounds):
                v = by_key.get((m, task, seed, r))
                state = "missing" if v is None else "infra" if v.infra else "ok" if v.success else \
                    "error" if v.errored else "fail"
                if v is not None and v.success and first is None:
                    first = r + 1
                label = f"{m} {task} seed {seed} round {r + 1}: {state}"
                squares.append(f'<a class="sq {state}" href="#{v.anchor}" title="{e(label)}"></a>' if v else
                               f'<span class="sq {state}" title="{e(label)}"></span>')
            solved = f"r{first}" if first else "—"
            cells.append(f'<td class="cell" data-method="{e(m)}" data-first="{first or 0}">{"".join(squares)}'
                         f'<span class="first">{solved}</span></td>')
        rows.append(f'<tr><th class="task">{e(task)} <span class="muted">#{seed}</span></th>{"".join(cells)}</tr>')
    legend = ('<p class="muted">Each square is one round (1 → last): <span class="sq ok"></span> solved '
              '<span class="sq fail"></span> failed <span class="sq error"></span> failed by an action error '
              '<span class="sq infra"></span> infrastructure failure. “r2”: first round solved. Click a square '
              "for that episode's steps.</p>")
    return (f'<h2 id="matrix">Tasks × methods</h2>{legend}<div class="scroll"><table class="matrix"><thead><tr>'
            f'<th>task (seed)</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def _episode_sections(views: list[EpisodeView]) -> str:
    """Every episode's steps, hidden until its square is clicked (CSS ``:target``; no scripts)."""
    out = []
    for v in views:
        verdict = "infrastructure failure" if v.infra else "solved" if v.success else \
            "failed by an action error" if v.errored else "failed"
        steps = []
        for s in v.steps:
            items = ", ".join(s.items)
            withheld = f" · withheld (control): {', '.join(s.withheld)}" if s.withheld else ""
            inj = (f'<pre>{e(s.injection)}</pre>' if s.injection else
                   f'<span class="muted">{e(s.note) or "nothing injected"}</span>')
            steps.append(f"<tr><td>{s.index}</td><td>{e(s.action)}"
                         f"{f'<br><span class=err>{e(s.error)}</span>' if s.error else ''}</td>"
                         f"<td>{inj}<div class=muted>{s.tokens} tokens{f' · items: {e(items)}' if items else ''}"
                         f"{e(withheld)}</div></td></tr>")
        table = _table(["step", "action", "injection"], [], "steps").replace(
            "<tbody></tbody>", f"<tbody>{''.join(steps)}</tbody>") if steps else '<p class="muted">no trace</p>'
        error = f'<p class="err">{e(v.error)}</p>' if v.error else ""
        out.append(f'<section class="episode" id="{v.anchor}"><h3>{breakable(v.method)} · {e(v.task)} seed {v.seed} · '
                   f'round {v.round + 1}: {verdict} <a href="#matrix" class="muted">(back to the matrix)</a></h3>'
                   f'{error}{table}</section>')
    return f'<div class="episodes">{"".join(out)}</div>'


def _learned_section(learned: dict[str, Learned], colours: dict[str, str], summary: Summary) -> str:
    if not learned:
        return ""
    parts = ["<h2>What memory learned</h2>"]
    for method, mem in learned.items():
        rounds = summary.methods[method].rounds if method in summary.methods else []
        counts = learned_line(mem, rounds[-1].memory if rounds else {})
        own = f' <span class="muted">(its name: {e(mem.name)})</span>' if mem.name and mem.name != method else ""
        parts.append(f"<h3>{_swatch(method, colours)}{breakable(method)}{own}"
                     f'</h3><p class="muted">{e(counts)}</p>')
        if mem.items:
            rows = [[e(i.status) + (" <b>by hand</b>" if i.manual else ""), e(i.kind), e(i.text), str(i.trials),
                     str(i.controls),
                     f"{i.difference:+.2f}" if i.difference is not None else "—", str(i.effective)]
                    for i in mem.items]
            parts.append('<div class="scroll">' + _table(["status", "kind", "item", "trials", "controls",
                                                          "Δ score trial − control", "effective uses"], rows,
                                                         "learned") + "</div>")
        if mem.skills:
            rows = [[e(s.status), e(s.text), str(s.uses),
                     f"{100 * s.successes / s.uses:.0f} %" if s.uses else "—"] for s in mem.skills]
            parts.append('<div class="scroll">' + _table(["status", "skill", "runs", "runs that succeeded"], rows,
                                                         "learned") + "</div>")
    return "".join(parts)


CSS = """
:root{font-family:system-ui,sans-serif;color:#1f2328}body{margin:1.5em auto;max-width:1280px;padding:0 1em}
h1{margin-bottom:.2em}h1,h2,h3{overflow-wrap:anywhere}
h2{margin-top:1.6em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
table{border-collapse:collapse;margin:.8em 0;font-size:12.5px}td,th{border:1px solid #d0d7de;padding:3px 5px;
text-align:right;vertical-align:top}td:first-child,th:first-child{text-align:left}
table.main td{white-space:nowrap}table.main th{white-space:normal}.scroll{overflow-x:auto}
table.main td:first-child,table.matrix thead th{white-space:normal;overflow-wrap:anywhere;min-width:8em;
max-width:13em}
.chart{width:100%;max-width:720px;height:auto;display:block;margin:.5em 0}
@media (max-width:600px){.charts .chart{min-width:540px}}
table.sizes td:first-child{min-width:8em;max-width:13em}
.multiples{display:grid;grid-template-columns:repeat(auto-fill,minmax(230px,1fr));gap:.5em;max-width:1180px}
.multiples .chart{max-width:260px}.t{font:bold 13px system-ui,sans-serif}.s{font:11px system-ui,sans-serif}
.grid{stroke:#eaeef2;stroke-width:1}.muted{color:#6e7781}.err{color:#cf222e}
.swatch{display:inline-block;width:.8em;height:.8em;background:var(--c);margin-right:.35em;border-radius:2px}
.infra{border-left:4px solid #cf222e;padding-left:1em}.kpi{display:flex;flex-wrap:wrap;gap:1.5em;margin:.6em 0}
.kpi div{background:#f6f8fa;border-radius:6px;padding:.4em .8em}.kpi b{display:block;font-size:1.3em}
table.matrix td,table.matrix th{text-align:left;white-space:nowrap;padding:2px 5px}
.sq{display:inline-block;width:11px;height:11px;margin-right:2px;border-radius:2px;vertical-align:middle}
.sq.ok{background:#2da44e}.sq.fail{background:#cf222e}.sq.error{background:#8250df}.sq.infra{background:#8c959f}
.sq.missing{background:#fff;border:1px dashed #8c959f;width:9px;height:9px}
.first{font-size:11px;margin-left:4px;color:#57606a}.episode{display:none;border:1px solid #d0d7de;
border-radius:6px;padding:.2em 1em;margin:1em 0}.episode:target{display:block}
pre{white-space:pre-wrap;margin:0;font-size:12px;background:#f6f8fa;padding:4px;max-width:760px}
table.steps td,table.steps th{text-align:left}table.learned td,table.learned th{text-align:left;max-width:640px}
table.learned td:nth-child(2),table.learned td:nth-child(3){min-width:14em}
table.sizes td,table.sizes th{text-align:left;font-size:12px}
@media print{.episodes,.scroll a{display:none}body{max-width:none;margin:0}h2{break-after:avoid}
.chart{max-width:100%}table{break-inside:auto}tr{break-inside:avoid}}
"""


def render(spec: EvalSpec, summary: Summary, data: ReportData | None = None) -> str:
    """The report page."""
    data = data or ReportData()
    colours = method_colours(list(summary.methods))
    errored: dict[str, int] = defaultdict(int)
    for v in data.episodes:
        errored[v.method] += v.errored
    tokens = {n: float(m.injected_tokens_total) for n, m in summary.methods.items()}
    judged_n = sum(1 for v in data.episodes if not v.infra)
    duration = data.duration_s
    kpis = [("episodes judged", f"{judged_n:,}"),
            ("failed by action errors", str(sum(errored.values()))),
            ("infrastructure failures", str(sum(m.infra.attempts for m in summary.methods.values())))]
    if duration:
        shown = f"{duration / 60:.1f} min" if duration >= 60 else f"{duration:.1f} s"
        kpis += [("run duration", shown), ("episodes / minute", f"{judged_n / duration * 60:.1f}")]
    model_calls = sum(m.model.calls for m in summary.methods.values() if m.model)
    if model_calls:
        kpis.append(("model calls", f"{model_calls:,}"))
    kpi = "".join(f"<div><b>{e(v)}</b>{e(k)}</div>" for k, v in kpis)
    status = "complete" if summary.complete else "INCOMPLETE (resume with the same command)"
    memory_rows = [[breakable(n), *([e(", ".join(f"{k} {v}" for k, v in sorted(r.memory.items()))) for r in m.rounds]
                            if n != "none" else ['<span class="muted">keeps no memory</span>'] * len(m.rounds))]
                   for n, m in summary.methods.items()]
    title = f"guimem report: {e(spec.suite.name)}"
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>
<style>{CSS}</style></head><body>
<h1>guimem lifelong evaluation</h1>
<p>Suite <b>{e(spec.suite.name)}</b> ({plural(len(spec.suite.tasks), "episode")} per round),
{plural(spec.rounds, "round")},
env {e(spec.env)}, policy {e(spec.policy)}, embedder {e(spec.embedder)}{
    ", leave-one-task-out" if spec.memory.exclude_source_task else ""}{
    f", memory learned on <b>{e(spec.learned_on)}</b> first (train/test transfer)" if spec.learned_on else ""};
run {status}; generated {time.strftime("%Y-%m-%d %H:%M:%S")}.</p>
<div class="kpi">{kpi}</div>
{_infra_section(summary)}<h2>Pass@k (%)</h2>{_main_table(summary, colours, errored)}
<p class="muted">Pass@k: a (task, seed) counts once it succeeded in any of the first k rounds. CIs: 95 % bootstrap
over tasks ({len(spec.suite.task_names())} clusters), Δ paired against <code>none</code>. Harm: the (task, seed, round)
where the method failed and <code>none</code> succeeded in the same round{_harm_list(summary)}. Failed by action errors:
failed episodes with an action that could not be performed (counted as failures, as the agent's); infrastructure
failures are not counted.</p>
<div class="scroll charts">{svg_pass_curves(summary, colours, bands=False)}</div>
<h3>Each method against none (95 % CI bands)</h3>{svg_small_multiples(summary, colours)}
{_drift_section(spec, summary)}{_matrix(spec, summary, colours, data.episodes)}
{transfer_section(data.episodes)}
<h2>Cost</h2>
<div class="scroll charts">{svg_bars("Injected tokens, all rounds", tokens, colours)}
{svg_latency(summary, colours)}
{svg_memory_size(summary, colours)}</div>
<h2>Memory size by status</h2><div class="scroll">{_table(
    ["method", *[f"after round {k + 1}" for k in range(spec.rounds)]], memory_rows, "sizes")}</div>
{_model_section(summary)}
{_learned_section(data.learned, colours, summary)}
{_episode_sections(data.episodes)}
</body></html>"""


def write_report(run_dir: RunDir, spec: EvalSpec, summary: Summary, store_url: str = "") -> None:
    """Write ``report.html`` into the run directory (``store_url``: the run's shared store, password included;
    without it a run that used one reports what it learned as unknown)."""
    data = collect(run_dir, spec, run_dir.results(), store_url)
    (run_dir.path / "report.html").write_text(render(spec, summary, data), encoding="utf-8")
