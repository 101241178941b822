"""``guimem eval``, ``guimem report`` and ``guimem compare``."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from guimem.cli.output import EXIT_INTERRUPTED, CliState, check_out_dir, emit_json, fail, registered, state
from guimem.embeddings import create_embedder
from guimem.envs.drift import check_version
from guimem.errors import ConfigError, DataError, GuimemError
from guimem.harness.attack_rate import tally
from guimem.harness.compare import compare_runs
from guimem.harness.evaluate import Evaluation, methods_of
from guimem.harness.factory import check_names
from guimem.harness.metrics import Summary, summarise
from guimem.harness.report import pass_table, write_report
from guimem.harness.runfiles import EpisodeResult, EvalSpec, RunDir, judged
from guimem.harness.transfer import TrainTest
from guimem.memory.factory import METHODS, check_method
from guimem.memory.settings import Defences, MemorySpec
from guimem.processes import orphans_adopted, stop_descendants
from guimem.storage.base import is_shared_url, mask_url
from guimem.tasks import load_suite
from guimem.tasks.suites import check_suite_tasks
from guimem.types import plural


def parse_defences(text: str) -> Defences:
    """``--defences``: ``all``, ``none`` or ``all`` minus a list (``no-quote,no-quarantine``).

    Raises:
        ConfigError: An unknown setting.
    """
    try:
        return Defences.parse(text)
    except ValueError as exc:
        raise ConfigError(f"--defences {text!r}: {exc}", suggestion="e.g. --defences all, none or no-quote") from None


def _spec(st: CliState, env: str | None, suite: str, rounds: int, methods: str, policy: str, workers: int, backend: str,
          exclude_source_task: bool, context: str, screenshots: bool = False, store: str | None = None,
          address: str | None = None, defences: str = "all", drift_at: int | None = None,
          drift_to: str = "v1", speculate: bool = True) -> EvalSpec:
    chosen = [m.strip() for m in methods.split(",") if m.strip()]
    if not chosen:
        raise ConfigError(f"--methods {methods!r} names no method",
                          suggestion=f"give a comma-separated list of {', '.join(METHODS)}")
    for m in chosen:
        check_method(m)
    _check_cluster(backend, address, store)
    suite_obj = load_suite(suite)
    env = env or suite_obj.env
    check_suite_tasks(suite_obj, env)
    embedder = create_embedder(st.settings.embedder).name
    uses_model = policy == "llm" or st.settings.extractor == "llm"
    llm = (f"{st.settings.llm.model}@{st.settings.llm.base_url} (output {st.settings.llm.structured_output}, "
           f"context {st.settings.llm.context_tokens or 'unknown'})") if uses_model else None
    if policy == "rank":
        llm = f"{Path(st.settings.rank.model_path or '?').name} (rank, in-process, n_ctx {st.settings.rank.n_ctx})"
    spec = EvalSpec(env=env, suite=suite_obj, rounds=rounds, methods=methods_of(chosen), policy=policy,
                    context=context, memory=MemorySpec(exclude_source_task=exclude_source_task,
                                                       extractor=st.settings.extractor,
                                                       defences=parse_defences(defences)), embedder=embedder,
                    llm=llm, token_encoding=st.settings.token_encoding, workers=workers, backend=backend,
                    screenshots=screenshots, store=mask_url(store) if store else "", address=address,
                    attacks=st.settings.poison.label() if env.startswith("poison-") else "",
                    drift_at=suite_obj.drift_at if drift_at is None else drift_at, drift_to=check_version(drift_to),
                    speculate=speculate)
    if spec.drift_at > rounds:
        raise ConfigError(f"--drift-at {spec.drift_at} is after the last of {plural(rounds, 'round')}",
                          suggestion=f"give a round from 1 to {rounds}, or 0 for no drift")
    check_names(spec, st.settings)  # before --out is made: a bad name leaves no run folder behind
    return spec


def _check_cluster(backend: str, address: str | None, store: str | None) -> None:
    """``--address`` runs episodes on other machines, which reach memory only through a shared store.

    Raises:
        ConfigError: ``--address`` without ``--backend ray``, or without a PostgreSQL ``--store``.
    """
    if address is None:
        return
    if backend != "ray":
        raise ConfigError("--address joins a Ray cluster", suggestion="add --backend ray")
    if not store or not is_shared_url(store):
        raise ConfigError("--address runs episodes on the cluster's nodes, which reach memory only through a "
                          "shared store", suggestion="add --store postgresql://user@host/db (see docs/deploy.md)")


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt here, so workers and browsers are stopped on the way out; meanwhile a
    process orphaned on the way (a browser whose driver a signal to the whole group stopped first) comes to
    this one, so that sweep finds it (`orphans_adopted`)."""
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        with orphans_adopted():
            yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def print_summary(st: CliState, summary: Summary, title: str) -> None:
    """The results table."""
    headers, rows = pass_table(summary, compact=True)
    table = Table(title=title)
    for h in headers:
        table.add_column(h, justify="left" if h == "method" else "right", no_wrap=h == "method")
    for row in rows:
        table.add_row(*row)
    st.console.print(table)


def eval_command(
    ctx: typer.Context,
    suite: str = typer.Option("smoke", "--suite", help="Shipped suite name or a suite file (JSON/YAML)."),
    rounds: int = typer.Option(3, "--rounds", "-r", min=1, help="Rounds (the suite replayed in order each round)."),
    methods: str = typer.Option("graph,skills,steer,stack", "--methods", "-m",
                                help=f"Comma-separated methods ({', '.join(METHODS)}, or your own "
                                     "my_pkg.memory:MyMemory); none always runs."),
    env: str | None = typer.Option(None, "--env", help=f"Environment: {registered('env')}, or your own "
                                   "my_pkg.env:MyEnv (default: the suite's)."),
    policy: str = typer.Option("explorer", "--policy", "-p", help=f"{registered('policy')} (llm: a chat model; rank: "
                               "a GGUF model ranks actions, GUIMEM_RANK__MODEL_PATH), or your own "
                               "my_pkg.agent:MyPolicy."),
    context: str = typer.Option("react", "--context", help="llm policy context: conact, react, truncate, none."),
    out: Path = typer.Option(Path("runs/eval"), "--out", "-o", help="Run directory (rerun to resume)."),
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="Parallel episodes (one browser each)."),
    backend: str = typer.Option("local", "--backend", help="local or ray."),
    address: str | None = typer.Option(None, "--address", help="With --backend ray: the Ray cluster to join "
                                       "(host:port of its head); needs a shared --store."),
    store: str | None = typer.Option(None, "--store", envvar="GUIMEM_EVAL_STORE",
                                     help="One shared store for every method's memory (postgresql://...; a "
                                          "namespace per run and method). Default: a SQLite file per method in "
                                          "OUT/memory."),
    exclude_source_task: bool = typer.Option(False, "--exclude-source-task",
                                             help="Leave-one-task-out: items never influence their source task."),
    learn_suite: str | None = typer.Option(None, "--learn-suite",
                                           help="Train/test transfer: learn over this suite's rounds first (in "
                                                "OUT/learn), then use that memory on --suite, leave-one-task-out."),
    screenshots: bool = typer.Option(False, "--screenshots",
                                     help="Save a PNG per observation under OUT/screenshots (the inspector shows "
                                          "them with each step)."),
    defences: str = typer.Option("all", "--defences", help="What guards memory against hostile page text: all, "
                                 "none, or all minus a list (no-quote,no-quarantine,no-untrusted-imports); recorded "
                                 "in run_spec.json (docs/security.md)."),
    drift_at: int | None = typer.Option(None, "--drift-at", min=0,
                                        help="From this round on (counted from 1) the pages show a later UI version "
                                             "(--drift-to; docs/drift.md). Default: the suite's drift_at; 0: none."),
    drift_to: str = typer.Option("v1", "--drift-to", help="The version shown from --drift-at on: v1 (relabelled, "
                                 "reordered, renamed ids, moved), v2 and later (also a notice to dismiss first)."),
    no_speculate: bool = typer.Option(False, "--no-speculate",
                                      help="Do not embed the screen the env shows while it settles (by default memory "
                                           "does, so recall need not wait for it; only timing changes)."),
    json_output: bool = typer.Option(False, "--json", help="Print summary.json instead of the table."),
) -> None:
    """Run (or resume) a lifelong evaluation; write results, traces, summary.json and report.html to OUT."""
    st = state(ctx, json_output)
    try:
        spec = _spec(st, env, suite, rounds, methods, policy, workers, backend, exclude_source_task, context,
                     screenshots, store, address, defences, drift_at, drift_to, not no_speculate)
        learn = _spec(st, env, learn_suite, rounds, methods, policy, workers, backend, exclude_source_task, context,
                      screenshots, store, address, defences, 0, speculate=not no_speculate) if learn_suite else None
        check_out_dir(out)
        runs = [spec] if learn is None else [learn, spec]
        total = sum(len(s.suite.tasks) * s.rounds * len(s.methods) for s in runs)
        done = len(judged(RunDir(out).results())) + (len(judged(RunDir(out / "learn").results())) if learn else 0)
        counts: dict[str, list[int]] = {}
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TimeRemainingColumn(), console=st.err, disable=st.json or json_output) as bar:
            task_id = bar.add_task("starting", total=total, completed=done)

            def progress(r: EpisodeResult) -> None:
                ok, n = counts.setdefault(f"{r.method}/{r.round}", [0, 0])
                counts[f"{r.method}/{r.round}"] = [ok + r.success, n + 1]
                ok, n = counts[f"{r.method}/{r.round}"]
                bar.update(task_id, advance=1, description=f"{r.method:>22} round {r.round + 1} {r.task:<24} "
                                                           f"success {ok}/{n}")

            # stdout carries only the result: what libraries print while it runs (Ray reports a lost node
            # there) goes to stderr, so `--json` output stays parseable
            with terminate_as_interrupt(), redirect_stdout(sys.stderr):
                runner = Evaluation(spec, out, st.settings, progress=progress, store_url=store or "") if learn is None \
                    else TrainTest(learn, spec, out, st.settings, progress=progress)
                summary = runner.run()
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    except KeyboardInterrupt:
        stop_descendants()  # workers' and browsers' processes that a signal caught half-started
        st.err.print(f"interrupted: workers and browsers stopped; rerun the same command to resume ({out})")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    assert summary is not None
    if st.json or json_output:
        emit_json(summary)
        return
    learned = f", memory learned on {learn.suite.name}, leave-one-task-out" if learn else ""
    learned += f", UI {spec.drift_to} from round {spec.drift_at}" if spec.drift_at else ""
    print_summary(st, summary, f"{spec.suite.name}: {plural(spec.rounds, 'round')}{learned}, Pass@k % "
                               f"(policy {spec.policy})")
    _print_infra(st, summary)
    if spec.env.startswith("poison-"):
        _print_attacks(st, out, spec)
    st.console.print(f"report: {out / 'report.html'}\nsummary: {out / 'summary.json'}")


def _print_attacks(st: CliState, out: Path, spec: EvalSpec) -> None:
    """The poison suite's attack success rate per method (`guimem.harness.attack_rate`)."""
    table = Table(title=f"attack success rate, rounds 2-{spec.rounds} (defences {spec.memory.defences.label()}, "
                        f"attacks {spec.attacks})")
    for col in ("method", "ASR %", "successes", "victim episodes", "attacker actions"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for method, t in tally(RunDir(out)).items():
        table.add_row(method, f"{100 * t.asr:.1f}", str(t.successes), str(t.victims), str(t.attacker_actions))
    st.console.print(table)


def _print_infra(st: CliState, summary: Summary) -> None:
    for name, m in summary.methods.items():
        if m.infra.attempts:
            st.err.print(f"[yellow]{name}: {m.infra.attempts} infrastructure failures (not counted; "
                         f"{m.infra.unresolved} unresolved); first: {escape(m.infra.first_error or '')}[/]")


def report_command(
    ctx: typer.Context,
    run: Path = typer.Argument(..., help="A run directory."),
    store: str | None = typer.Option(None, "--store", envvar="GUIMEM_EVAL_STORE",
                                     help="The run's shared store (when it used one), for what memory learned."),
    json_output: bool = typer.Option(False, "--json", help="Print summary.json."),
) -> None:
    """Rebuild summary.json and report.html of a run directory from its results."""
    st = state(ctx, json_output)
    try:
        run_dir = RunDir(run)
        spec = run_dir.load_spec()
        results = run_dir.results()
        if not results:  # a summary of nothing would show every method at 0
            raise DataError("no episode of this run has finished yet (results.jsonl is empty or missing)",
                            path=str(run), suggestion="run or resume it: the guimem eval command that made it, "
                            "with the same --out")
        summary = summarise(spec, results, run_dir)
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    (run / "summary.json").write_text(summary.model_dump_json(indent=2))
    write_report(run_dir, spec, summary, store or "")
    if st.json or json_output:
        emit_json(summary)
    else:
        print_summary(st, summary, f"{spec.suite.name}: Pass@k %")
        st.console.print(f"report: {run / 'report.html'}")


def compare_command(
    ctx: typer.Context,
    first: Path = typer.Argument(..., help="Run directory A."),
    second: Path = typer.Argument(..., help="Run directory B."),
    force: bool = typer.Option(False, "--force", help="Compare runs of different suites, rounds or policies."),
    json_output: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Paired differences (B − A) of final Pass@k per method in both runs, with 95 % bootstrap CIs."""
    st = state(ctx, json_output)
    try:
        result = compare_runs(RunDir(first), RunDir(second), force=force)
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    if st.json or json_output:
        emit_json(result)
        return
    for m in result.mismatches:
        st.err.print(f"[yellow]warning: the runs differ in {escape(m)}[/]")
    table = Table(title=f"B − A at Pass@{result.k}  (A = {first}, B = {second})")
    for col in ("method", "A %", "B %", "Δ points", "95% CI", "tokens A", "tokens B"):
        table.add_column(col, justify="right")
    for r in result.methods:
        table.add_row(r.method, f"{100 * r.pass_a:.1f}", f"{100 * r.pass_b:.1f}", f"{100 * r.difference:+.1f}",
                      f"[{100 * r.ci[0]:+.1f}, {100 * r.ci[1]:+.1f}]", str(r.tokens_a), str(r.tokens_b))
    st.console.print(table)
