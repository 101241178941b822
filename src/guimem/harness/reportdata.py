"""What the report shows beyond ``summary.json``: per-episode outcomes and steps (from the results and
traces), the run's wall-clock span, and what each method's memory learned (from its store).

Everything here is read from files a run wrote and is treated as hostile: traces are parsed with the
typed models (unreadable lines are skipped), texts are capped, and rendering escapes them.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from guimem.errors import GuimemError
from guimem.harness.runfiles import EpisodeResult, EvalSpec, RunDir, judged
from guimem.memory.catalog import counts as item_counts
from guimem.memory.catalog import describe
from guimem.memory.hostile import page_spans, quote_spans
from guimem.memory.names import recorded_name
from guimem.memory.steer.items import KnowledgeItem
from guimem.storage.base import Event, Record, Scanning, Store, create_store
from guimem.types import Trajectory, shorten

log = logging.getLogger(__name__)
TEXT_CAP = 1500
TOP_ITEMS = 8


class StepView(BaseModel):
    """One step as the report shows it."""

    index: int
    action: str
    error: str = ""
    injection: str = ""
    items: list[str] = Field(default_factory=list)
    withheld: list[str] = Field(default_factory=list)
    tokens: int = 0
    note: str = ""


class EpisodeView(BaseModel):
    """One judged (or infrastructure-failed) episode of one method and round."""

    method: str
    round: int
    task: str
    seed: int
    success: bool
    errored: bool = False
    """Failed with an action error on record (the element was not there, the reply unreadable, ...)."""
    infra: bool = False
    error: str = ""
    steps: list[StepView] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    """Other tasks whose learned items were shown in this episode (transfer), in the order first shown."""

    @property
    def anchor(self) -> str:
        """A fragment id for the episode (method and task names are restricted; still, only safe characters)."""
        raw = f"ep-{self.method}-{self.round}-{self.task}-{self.seed}"
        return "".join(c if c.isalnum() or c in "-_" else "_" for c in raw)


class LearnedItem(BaseModel):
    """One item a method's memory holds at the end of the run, with its evidence."""

    id: str
    kind: str
    status: str
    text: str
    trials: int = 0
    controls: int = 0
    difference: float | None = None
    effective: int = 0
    uses: int = 0
    successes: int = 0
    manual: bool = False
    """Its current status was set by a person (``memory admit|retire``, ``POST /v1/items/{id}/admit``), not earned
    in trials: shown as such, never as verified."""


class Learned(BaseModel):
    """What one method's memory learned: counts by kind/status (`guimem.memory.catalog.counts`, as the CLI
    and the inspector count), the top items, the events it logged and the method's own ``name`` (as
    recorded in its store)."""

    counts: dict[str, int] = Field(default_factory=dict)
    events: int = 0
    name: str | None = None
    items: list[LearnedItem] = Field(default_factory=list)
    skills: list[LearnedItem] = Field(default_factory=list)


class ReportData(BaseModel):
    """Everything the report needs besides the summary."""

    episodes: list[EpisodeView] = Field(default_factory=list)
    started_at: float | None = None
    finished_at: float | None = None
    learned: dict[str, Learned] = Field(default_factory=dict)

    @property
    def duration_s(self) -> float | None:
        """Wall-clock seconds from the first episode's start to the last one's end."""
        if self.started_at is None or self.finished_at is None:
            return None
        return max(self.finished_at - self.started_at, 0.0)


def _step_views(traj: Trajectory) -> list[StepView]:
    out = []
    for s in traj.steps:
        inj = s.injection
        out.append(StepView(index=s.index, action=shorten(s.action.describe(), 300),
                            error=shorten(s.error.message, 300) if s.error else "",
                            injection=shorten(inj.text, TEXT_CAP) if inj else "",
                            items=[i.id for i in inj.items] if inj else [],
                            withheld=list(inj.withheld) if inj else [], tokens=inj.tokens if inj else 0,
                            note=shorten(inj.note, 200) if inj else ""))
    return out


def _sources(traj: Trajectory, task: str) -> list[str]:
    """The tasks other than ``task`` that the items shown in ``traj`` were learned from."""
    found = [src for s in traj.steps if s.injection for item in s.injection.items for src in item.sources
             if src != task]
    return list(dict.fromkeys(found))[:50]


def episodes(run_dir: RunDir, spec: EvalSpec, lines: list[EpisodeResult]
             ) -> tuple[list[EpisodeView], float | None, float | None]:
    """Every judged episode (and every unresolved infrastructure failure) with its steps, and the
    run's first start and last end (from the traces)."""
    kept = judged(lines)
    judged_keys = {r.key for r in kept}
    kept += [r for r in lines if not r.judged and r.key not in judged_keys]
    by_trace: dict[tuple[str, int], list[EpisodeResult]] = defaultdict(list)
    for r in kept:
        by_trace[(r.method, r.round)].append(r)
    views: list[EpisodeView] = []
    start: float | None = None
    end: float | None = None
    for (method, rnd), rows in sorted(by_trace.items()):
        traces = run_dir.readable_traces(method, rnd)
        for t in traces.values():
            start = t.started_at if start is None else min(start, t.started_at)
            end = max(end or 0.0, t.started_at + t.wall_ms / 1000)
        for r in rows:
            found = traces.get(r.episode_id)
            views.append(EpisodeView(method=method, round=rnd, task=r.task, seed=r.seed, success=r.success,
                                     errored=r.judged and not r.success and found is not None and
                                     any(s.error is not None for s in found.steps), infra=not r.judged,
                                     error=shorten(r.error or (r.infra.message if r.infra else ""), 300),
                                     steps=_step_views(found) if found is not None else [],
                                     sources=_sources(found, r.task) if found is not None else []))
    return views, start, end


def _knowledge(record_id: str, status: str, body: str) -> LearnedItem | None:
    try:
        item = KnowledgeItem.model_validate_json(body)
    except ValidationError:
        return None
    records = item.evidence.records
    trials = [r.score for r in records if r.arm == "trial"]
    controls = [r.score for r in records if r.arm == "control"]
    diff = sum(trials) / len(trials) - sum(controls) / len(controls) if trials and controls else None
    text = quote_spans(item.content, (*item.page, *page_spans(item.behaviour)))  # page text shown as data
    if item.quarantine:
        text = f"{text} [quarantined: {item.quarantine}]"
    return LearnedItem(id=record_id, kind=item.kind, status=status, text=shorten(text, 400), trials=len(trials),
                       controls=len(controls), difference=diff, effective=sum(r.effective for r in records))


_STATUS_EVENTS = {"admitted", "retired", "rejected", "trial", "verified", "active"}


def _uses_and_curation(events: list[Event]) -> tuple[dict[str, list[bool]], dict[str, bool]]:
    """Per item: whether each use succeeded, and whether its last status change was made by hand."""
    uses: dict[str, list[bool]] = defaultdict(list)
    manual: dict[str, bool] = {}
    for e in events:
        if not e.item_id or (e.type != "used" and e.type not in _STATUS_EVENTS):
            continue
        try:
            payload = json.loads(e.payload or "{}")
        except ValueError:
            continue
        if not isinstance(payload, dict):
            continue
        if e.type == "used":
            uses[e.item_id].append(bool(payload.get("success")))
        else:
            manual[e.item_id] = payload.get("manual") is True
    return uses, manual


_STATUS_ORDER = {"admitted": 0, "verified": 0, "active": 1, "trial": 2, "candidate": 3, "unverified": 4}


def learned(path: Path | str, namespace: str) -> Learned:
    """What one method's store holds at the end of the run (counts, the strongest items, skill use)."""
    if isinstance(path, Path) and not path.exists():
        return Learned()
    try:
        store = create_store(str(path), create=False)
    except GuimemError as exc:
        log.warning("report: cannot open %s: %s", path, exc)
        return Learned()
    items = _Top(lambda i: (_STATUS_ORDER.get(i.status, 9), -(i.difference or 0.0), -i.trials, i.id))
    skills = _Top(lambda i: (-i.uses, _STATUS_ORDER.get(i.status, 9), i.id))
    try:
        events, name = store.stats(namespace).events, recorded_name(store, namespace)
        counts = item_counts(store, namespace)  # what the CLI, the API and the inspector count too
        uses, manual = _uses_and_curation(store.events(namespace=namespace))
        for part in _chunks(store, namespace):  # a million items are read a chunk at a time, the best few kept
            for r in part:
                item = _knowledge(r.id, r.status, r.body) if r.kind == "knowledge" else None
                seen = describe(r)  # what it is and its summary, as the service and the inspector say it
                kind = seen.what
                if item is None:
                    item = LearnedItem(id=r.id, kind=kind, status=r.status, text=shorten(seen.summary, 400))
                item.uses, item.successes = len(uses.get(r.id, [])), sum(uses.get(r.id, []))
                item.manual = manual.get(r.id, False)
                if kind == "skill":
                    skills.add(item)
                elif r.kind == "knowledge" and r.status in ("admitted", "trial"):
                    items.add(item)
    finally:
        store.close()
    return Learned(counts=counts, items=items.best(), skills=skills.best(), events=events, name=name)


def _chunks(store: Store, namespace: str) -> Iterator[list[Record]]:
    """The namespace's current items, a chunk at a time where the store can scan (else read whole)."""
    if isinstance(store, Scanning):
        yield from store.scan(namespace, chunk=1000)
    else:
        yield store.query(namespace)


class _Top:
    """The `TOP_ITEMS` smallest items by ``key`` (a total order: it ends with the id), holding at most twice as
    many at any time: what sorting every item and keeping the first would give."""

    def __init__(self, key: Callable[[LearnedItem], tuple[Any, ...]]) -> None:
        self.key = key
        self.held: list[LearnedItem] = []

    def add(self, item: LearnedItem) -> None:
        self.held.append(item)
        if len(self.held) >= 2 * TOP_ITEMS:
            self.held = self.best()

    def best(self) -> list[LearnedItem]:
        return sorted(self.held, key=self.key)[:TOP_ITEMS]


def collect(run_dir: RunDir, spec: EvalSpec, lines: list[EpisodeResult], store_url: str = "") -> ReportData:
    """Gather the report's data from a run directory (and its shared store, when it used one)."""
    views, start, end = episodes(run_dir, spec, lines)
    if spec.store and not store_url:
        log.info("report: the run's memory is in %s; give its store to show what was learned", spec.store)
        memory = {}
    else:
        memory = {m: learned(store_url or run_dir.store_file(m), spec.namespace(m)) for m in spec.methods
                  if m != "none"}
    return ReportData(episodes=views, started_at=start, finished_at=end, learned=memory)
