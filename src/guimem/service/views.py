"""What the inspector page reads: the graph with readable labels, a run's episodes with their steps,
and a step's screenshot (confined to the served run directory). Texts go out whole; the page shortens
them at word boundaries and inserts them as text, never as markup."""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from guimem.errors import NotFoundError, TrajectoryFormatError
from guimem.memory.graph import EdgeBody, NodeBody
from guimem.service.core import MemoryService
from guimem.service.models import RunTraces
from guimem.types import ItemKind, ItemStatus, Trajectory, parse_trajectory_line

log = logging.getLogger(__name__)
_ROUND = re.compile(r"round-(\d{1,6})\.jsonl")


def _labels(signatures: dict[str, str]) -> dict[str, str]:
    """A label per node: its screen, plus the first signature line that sets it apart from the other
    nodes of the same screen (so a screen's states do not all read the same)."""
    lines = {i: s.splitlines() for i, s in signatures.items()}
    screen = {i: next((x.removeprefix("screen: ") for x in ls if x.startswith("screen: ")), ls[0] if ls else "")
              for i, ls in lines.items()}
    groups: dict[str, list[str]] = defaultdict(list)
    for i, s in screen.items():
        groups[s].append(i)
    out = {}
    for s, ids in groups.items():
        if len(ids) == 1:
            out[ids[0]] = s
            continue
        seen: dict[str, int] = defaultdict(int)
        for i in ids:
            for x in set(lines[i]):
                seen[x] += 1
        for i in ids:  # the line fewest other states of this screen share (first such line on ties)
            own = [x for x in lines[i] if seen[x] < len(ids) and not x.startswith(("app: ", "screen: "))]
            extra = min(own, key=lambda x: seen[x]) if own else ""
            out[i] = f"{s} · {extra}" if extra else s
    return out


def graph_view(service: MemoryService) -> dict[str, list[dict[str, object]]]:
    """Nodes (id, label, signature, visits, first task) and active edges (with text, effect, outcome and
    the behaviour they stand for)."""
    if service.memory.name != "graph":
        return {"nodes": [], "edges": []}
    bodies = {r.id: NodeBody.model_validate_json(r.body) for r in service.store.query(service.namespace,
                                                                                     ItemKind.NODE.value)}
    labels = _labels({i: b.signature for i, b in bodies.items()})
    nodes: list[dict[str, object]] = [{"id": i, "label": labels[i], "signature": b.signature, "visits": b.visits,
                                       "first_task": b.first_task} for i, b in bodies.items()]
    edges: list[dict[str, object]] = []
    for r in service.store.query(service.namespace, ItemKind.EDGE.value, [ItemStatus.ACTIVE]):
        body = EdgeBody.model_validate_json(r.body)
        edges.append({"id": r.id, "source": body.source, "target": body.target, "success": body.success,
                      "text": body.text, "effect": body.effect, "task": body.task,
                      "behaviour": "; ".join(a.describe() for a in body.behaviour.actions),
                      "avoid": body.behaviour.avoid, "granularity": body.granularity.value})
    return {"nodes": nodes, "edges": edges}


def runs_view(run_dir: Path | None) -> list[RunTraces]:
    """Methods with traces in the served run, and the 0-based indexes of their rounds (the page shows 1-based)."""
    if run_dir is None or not (run_dir / "traces").exists():
        return []
    return [RunTraces(method=m.name, round_indexes=sorted(int(found.group(1)) for p in m.glob("round-*.jsonl")
                                                           if (found := _ROUND.fullmatch(p.name))))
            for m in sorted((run_dir / "traces").iterdir()) if m.is_dir()]


def _episodes(path: Path) -> Iterator[Trajectory]:
    """The episodes of a trace file; a torn or unreadable line (a process killed mid-write) is skipped, so one
    bad line never hides the rest of its round."""
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield parse_trajectory_line(raw.decode("utf-8"), path=path.name, line=number)
            except (UnicodeDecodeError, TrajectoryFormatError):
                log.warning("skipping unreadable line %d of trace %s", number, path.name)


def _trace(run_dir: Path | None, method: str, round_index: int) -> Path:
    if run_dir is None:
        raise NotFoundError("run", "(no run directory is served: start with guimem serve --run DIR)")
    path = (run_dir / "traces" / method / f"round-{round_index}.jsonl").resolve()
    if not path.is_relative_to(run_dir.resolve()) or not path.is_file():
        raise NotFoundError("trace", f"{method}/round-{round_index}")
    return path


def _screenshot(run_dir: Path, recorded: str | None) -> Path | None:
    """The recorded screenshot file if it lies inside the run directory and is a PNG (else None)."""
    if not recorded:
        return None
    root = run_dir.resolve()
    path = Path(recorded)
    path = (path if path.is_absolute() else root / path).resolve()
    return path if path.is_relative_to(root) and path.suffix == ".png" and path.is_file() else None


def episodes_view(run_dir: Path | None, method: str, round_index: int) -> list[dict[str, object]]:
    """The episodes of one method and round, each step with its action, error, the exact injection, the
    injected and withheld item ids, and whether a screenshot was recorded."""
    path = _trace(run_dir, method, round_index)
    assert run_dir is not None
    out = []
    for t in _episodes(path):
        out.append({"episode": t.episode_id, "task": t.task.id, "seed": t.task.seed, "success": t.outcome.success,
                    "steps": [{"index": s.index, "action": s.action.describe(), "injected": s.injection.text,
                               "tokens": s.injection.tokens, "abstained": s.injection.abstained,
                               "note": s.injection.note, "items": [i.id for i in s.injection.items],
                               "trial": [i.id for i in s.injection.items if i.trial],
                               "withheld": list(s.injection.withheld),
                               "stale": list(s.injection.stale), "regrounded": list(s.injection.regrounded),
                               "screenshot": _screenshot(run_dir, s.observation.screenshot) is not None,
                               "error": s.error.message if s.error else None} for s in t.steps]})
    return out


def screenshot_file(run_dir: Path | None, method: str, round_index: int, episode: str, step: int) -> Path:
    """The screenshot recorded at one step, confined to the run directory.

    Raises:
        NotFoundError: No such episode or step, no screenshot, or a recorded path outside the run.
    """
    path = _trace(run_dir, method, round_index)
    assert run_dir is not None
    for t in _episodes(path):
        if t.episode_id == episode:
            found = next((s for s in t.steps if s.index == step), None)
            shot = _screenshot(run_dir, found.observation.screenshot) if found else None
            if shot is not None:
                return shot
            break
    raise NotFoundError("screenshot", f"{method}/round-{round_index}/{episode}/{step}")
