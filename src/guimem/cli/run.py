"""``guimem run`` (one episode) and ``guimem suites`` (what can be run)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from guimem.cli.output import CliState, check_out_dir, emit_json, fail, registered, state
from guimem.envs.drift import BASE_VERSION, DriftEnv, check_version
from guimem.errors import FileConflictError, GuimemError, RunStoppedError
from guimem.harness.episode import EpisodeSettings, run_episode
from guimem.harness.factory import make_env, make_policy
from guimem.tasks import builtin_suites, load_suite
from guimem.tasks.suites import DEFAULT_MAX_STEPS
from guimem.types import Task, append_trajectory, artifacts_dir, plural


def run(
    ctx: typer.Context,
    task: str = typer.Option(..., "--task", "-t", help="Task name, e.g. click-test-2."),
    seed: int = typer.Option(0, "--seed", "-s", help="Task seed (same seed, same episode start)."),
    env_name: str = typer.Option("miniwob", "--env", help=f"Environment: {registered('env')}, or your own "
                                 "my_pkg.env:MyEnv (found from the current folder, then PYTHONPATH)."),
    policy_name: str = typer.Option("explorer", "--policy", "-p",
                                    help=f"Policy: {registered('policy')} (llm: a chat model; rank: a GGUF model ranks "
                                         "actions, GUIMEM_RANK__MODEL_PATH), or your own my_pkg.agent:MyPolicy."),
    context: str = typer.Option("react", "--context", help="llm policy context: conact, react, truncate, none."),
    max_steps: int = typer.Option(DEFAULT_MAX_STEPS, "--max-steps", min=1, help="Step budget."),
    out: Path = typer.Option(Path("runs/run"), "--out", "-o", help="Folder for trajectories.jsonl."),
    screenshots: bool = typer.Option(False, "--screenshots", help="Save a PNG per observation."),
    drift: str = typer.Option("v0", "--drift", help="UI version to show: v0 (the page as it is), v1 (relabelled, "
                              "reordered, renamed ids, moved), v2 and later (also a notice to dismiss first); "
                              "docs/drift.md."),
    json_output: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Run one episode and append its trajectory to OUT/trajectories.jsonl."""
    st = state(ctx, json_output)
    traj_file = out / "trajectories.jsonl"
    try:
        check_out_dir(out)  # before the episode: an --out that cannot hold its file costs nothing
        if traj_file.is_dir():
            raise FileConflictError("is a folder, not a trajectory file", path=str(traj_file),
                                    suggestion="give another --out, or move that folder away")
        shots = artifacts_dir(traj_file) / f"{task}-{seed}" if screenshots else None
        version = check_version(drift)
        environment = make_env(env_name, st.settings, shots)
        if version != BASE_VERSION:
            environment = DriftEnv(environment, version)
        try:
            policy = make_policy(policy_name, st.settings, seed=0, context=context, screenshots=screenshots)
            trajectory = run_episode(environment, policy, Task(id=task, goal="", app=env_name, seed=seed,
                                                                 max_steps=max_steps),
                                     settings=EpisodeSettings(max_steps=max_steps))
        finally:
            environment.close()
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    infra = trajectory.outcome.infra
    if infra is not None:  # not the agent's failure: nothing is recorded, and the exit code says so
        raise fail(ctx, RunStoppedError(f"the episode could not be judged ({infra.component} failed)", failures=1,
                                        first=infra.message, suggestion=infra.suggestion)) from None
    append_trajectory(traj_file, trajectory)
    result = {"task": task, "seed": seed, **({"ui_version": version} if version != BASE_VERSION else {}),
              "success": trajectory.outcome.success, "score": trajectory.outcome.score,
              "steps": len(trajectory.steps), "trajectory": str(traj_file)}
    if st.json or json_output:
        emit_json(result)
    else:
        mark = "[green]success[/]" if trajectory.outcome.success else "[red]failure[/]"
        st.console.print(f"{task} seed {seed}: {mark} (score {trajectory.outcome.score:+.2f}, "
                         f"{plural(len(trajectory.steps), 'step')}, {trajectory.wall_ms / 1000:.1f}s)")
        for s in trajectory.steps:
            err = f"  [red]{s.error.message}[/]" if s.error else ""
            st.console.print(f"  {s.index:2d}. {s.action.describe()}{err}", markup=True, highlight=False)
        st.console.print(f"trajectory: {traj_file}")


def _print_suite(st: CliState, name: str, as_json: bool) -> None:
    suite = load_suite(name)
    if as_json:
        emit_json(suite)
        return
    table = Table(title=f"suite {suite.name}: {suite.description}")
    for col in ("#", "task", "seed", "max steps"):
        table.add_column(col)
    for i, e in enumerate(suite.tasks):
        table.add_row(str(i), e.task, str(e.seed), str(e.max_steps or DEFAULT_MAX_STEPS))
    st.console.print(table)


def _print_all_suites(st: CliState, as_json: bool) -> None:
    loaded = {n: load_suite(n) for n in builtin_suites()}
    if as_json:
        emit_json({n: {"description": s.description, "episodes": len(s.tasks), "tasks": s.task_names()}
                   for n, s in loaded.items()})
        return
    table = Table(title="shipped suites")
    for col in ("suite", "episodes", "tasks", "description"):
        table.add_column(col)
    for n, s in loaded.items():
        table.add_row(n, str(len(s.tasks)), str(len(s.task_names())), s.description)
    st.console.print(table)


def suites(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="A suite to list the (task, seed) pairs of."),
    tasks: bool = typer.Option(False, "--tasks", help="List task names: of NAME's suite, or every MiniWoB++ task "
                               "the installed package has."),
    json_output: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """List the shipped suites, one suite's tasks, or every available MiniWoB++ task."""
    st = state(ctx, json_output)
    as_json = st.json or json_output
    try:
        if tasks:
            from guimem.envs.miniwob import available_tasks

            names = load_suite(name).task_names() if name else available_tasks()
            emit_json(names) if as_json else st.console.print(" ".join(names))
        elif name:
            _print_suite(st, name, as_json)
        else:
            _print_all_suites(st, as_json)
    except GuimemError as exc:
        raise fail(ctx, exc) from None
