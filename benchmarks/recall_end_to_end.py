"""Recall end to end on cold screens, memories that open fast, approximate search at 1M, evaluation throughput.

Every target of "Recall in under 15 ms end to end" in one table, each with its ratio to the target
(ratio ≤ 1 meets it). Measured on this machine in one run:

- Cold recall: recorded screens of the `default` suite (the explorer's episodes, recorded once and
  cached), each recalled with an empty embedding cache and against a memory holding no screen with
  the same structure (the synthetic items' screens are other tasks'), every embedding included.
  Warm: the same screen again (cache hit).
- Memories of N items per method, replicated from the items a real 2-round `demo` evaluation learned
  (the templates; item texts made unique, tasks spread over 1,000 task ids plus the default suite's,
  vectors: real e5 embeddings of the templates perturbed), written to SQLite; each method is opened in
  a fresh process: open + first recall, resident memory, with the index cache absent ("before") and
  present ("after").
- Approximate search: HNSW over vectors built from real e5 embeddings of screen and goal texts
  expanded by small perturbations (cached on disk), recall@10 against exact search, p50 latency,
  build time and memory, for a sweep of the search expansion.
- Evaluation throughput: episodes per minute on `demo` with --workers 1 and 2.
- The stack above --stand-in-above items (default 100k): its first open embeds every item's text
  (773 s at 100k here, so hours at 1M). Its items are the templates' texts made unique ("... (variant
  j)"), so in that first open each such text gets the real e5 embedding of its template text, perturbed
  as the other methods' 1M vectors are (`StandIn`); every other text (screens, goals, edge screens) is
  embedded by e5. The open that follows ("after") and every recall measured use e5 only; the item
  vectors come from the index cache, as after any first open.

- What the agent waits for in a real evaluation (``--eval-sizes``): a `default` evaluation (explorer, MiniWoB++,
  speculation on, as `guimem eval` runs) whose memory starts with the N items above (rounds counted from the
  first; opened once before, so the evaluation opens it from the index cache). From its traces: the recall time
  each step waited for, over the steps where memory showed items (and, apart, those that embedded, an
  episode's first steps, and the steps where memory showed nothing).

Usage: python benchmarks/recall_end_to_end.py [--sizes 100000] [--large 1000000] [--ann 100000]
       [--skip ann,throughput] [--queries 60] [--eval-sizes 100000,1000000 --eval-methods graph,skills,stack]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CACHE = Path(os.environ.get("GUIMEM_BENCH_CACHE", Path.home() / ".cache" / "guimem" / "bench"))
PY = sys.executable
GUIMEM = str(Path(sys.executable).with_name("guimem"))
METHODS = ("graph", "skills", "steer", "stack")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# ---------------------------------------------------------------- inputs (recorded once, cached)

def templates() -> Path:
    """A real 2-round demo evaluation of the four methods: its stores are the item templates."""
    out = CACHE / "templates"
    if not (out / "summary.json").exists():
        subprocess.run([GUIMEM, "eval", "--suite", "demo", "--rounds", "2", "--methods", ",".join(METHODS),
                        "--workers", "2", "--out", str(out), "--json"], check=True, stdout=subprocess.DEVNULL)
    return out


def screens() -> Path:
    """The default suite's screens as the explorer sees them (trajectories, one line each)."""
    path = CACHE / "default-screens.jsonl"
    if path.exists():
        return path
    from guimem.agents.explorer import ExplorerPolicy
    from guimem.envs.miniwob import MiniWoBEnv
    from guimem.harness.episode import EpisodeSettings, run_episode
    from guimem.tasks import load_suite

    env = MiniWoBEnv()
    lines = []
    try:
        for entry in load_suite("default").tasks:
            task = entry.to_task("miniwob")
            traj = run_episode(env, ExplorerPolicy(), task, settings=EpisodeSettings(max_steps=entry.max_steps or 8))
            lines.append(traj.model_dump_json())
    finally:
        env.close()
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


# ---------------------------------------------------------------- synthetic memories of N items

def _unit(rng: np.random.Generator, base: np.ndarray, n: int, noise: float) -> np.ndarray:
    picks = base[rng.integers(len(base), size=n)]
    v = picks + noise * rng.standard_normal(picks.shape).astype(np.float32) / np.sqrt(base.shape[1])
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def build_store(method: str, size: int) -> Path:
    """A store of ``size`` items of ``method``, replicated from the templates (cached between runs)."""
    from guimem.storage import Record
    from guimem.storage.sqlite import SQLiteStore

    path = CACHE / "stores" / f"{method}-{size}.sqlite"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    source = SQLiteStore(templates() / "memory" / f"{method}.sqlite")
    rng = np.random.default_rng(7)
    real = sorted({json.loads(x)["task"]["id"] for x in screens().read_text().splitlines()})
    # every task of the default suite holds 50 items (a well-used memory); the rest spread over other tasks
    # (1,000 items per task: 100 tasks at 100k, 1,000 at 1M)
    tasks = [t for t in real for _ in range(50)]
    tasks += [f"task-{i // 1000:04d}" for i in range(max(0, size - len(tasks)))]
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    store = SQLiteStore(tmp)
    for key, value in [(k, source.meta_get(k)) for k in (f"{method}.embedder", f"{method}.round")]:
        if value is not None:
            store.meta_set(key, value)
    with store.transaction():
        if method == "graph":
            nodes = [r for r in source.query(method, "node")]
            edges = [r for r in source.query(method, "edge")]
            base = np.stack([r.vector_array() for r in nodes])
            n_nodes = max(size // 10, 1)
            vecs = _unit(rng, base, n_nodes, 0.6)
            for i in range(n_nodes):
                t = nodes[i % len(nodes)]
                store.put(Record(f"n{i}", "node", method, "active", t.body, vecs[i].tobytes()))
            for j in range(size):
                t = json.loads(edges[j % len(edges)].body)
                src = int(rng.integers(n_nodes))
                t.update(source=f"n{src}", target=f"n{int(rng.integers(n_nodes))}", task=tasks[j],
                         text=f"{t['text']} #{j}")
                store.put(Record(f"e{j}", "edge", method, "active", json.dumps(t), vecs[src].tobytes()))
        else:
            kind = "skill" if method == "skills" else "knowledge"
            rows = source.query(method, kind)
            base = np.stack([r.vector_array() for r in rows if r.vector is not None]) if method == "skills" else None
            for j in range(size):
                t = rows[j % len(rows)]
                body = json.loads(t.body)
                vec = None
                if method == "skills":
                    body.update(name=f"{body['name']}_{j}", key=f"{body['key']}#{j}",
                                description=f"{body['description']} (variant {j})")
                    vec = _unit(rng, base, 1, 0.6)[0].tobytes()
                else:
                    body["applicability"]["task"] = tasks[j]
                    body.update(key=f"{body['key']}#{j}", content=f"{body['content']} (variant {j})")
                store.put(Record(f"{t.id}-{j}", kind, method, t.status, json.dumps(body), vec))
    store.close()
    source.close()
    os.replace(tmp, path)
    return path


# ---------------------------------------------------------------- one method, one size, in its own process

class Wrapping:
    """An embedder around another (``inner``): its name and dimension."""

    inner: object

    @property
    def name(self) -> str:
        return str(self.inner.name)  # type: ignore[attr-defined]

    @property
    def dim(self) -> int:
        return int(self.inner.dim)  # type: ignore[attr-defined]


class StandIn(Wrapping):
    """e5 for every text but the synthetic item texts "<template text> (variant j)": those get the real
    e5 embedding of the template text, perturbed (noise 0.6, as the 1M graph/skills vectors)."""

    def __init__(self, inner, templates: list[str]) -> None:  # type: ignore[no-untyped-def]
        from guimem.embeddings import EmbedRole

        self.inner = inner
        self.base = dict(zip(templates, inner.embed(templates, EmbedRole.PASSAGE), strict=True))
        self.stood_in = 0

    def embed(self, texts, role="query"):  # type: ignore[no-untyped-def]
        import re

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        real = []
        for i, text in enumerate(texts):
            m = re.fullmatch(r"(.*) \(variant (\d+)\)", text, flags=re.S)
            if role == "passage" and m and m.group(1) in self.base:
                rng = np.random.default_rng(int(m.group(2)))
                out[i] = _unit(rng, self.base[m.group(1)][None, :], 1, 0.6)[0]
                self.stood_in += 1
            else:
                real.append(i)
        if real:
            out[real] = self.inner.embed([texts[i] for i in real], role)
        return out


class Progress(Wrapping):
    """The embedder a first open uses, counting the texts it embeds and appending to ``path`` every
    ``every_s`` (and at the end) one JSON line: this process's texts so far, seconds since the open began,
    peak resident memory. A first open cut short (the machine's session ended) leaves its last line there;
    the next attempt resumes from the open's last saved checkpoint, and `resumed_open` adds the attempts up."""

    def __init__(self, inner, path: Path, every_s: float = 60.0) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.path, self.every_s = inner, path, every_s
        self.texts = 0
        self.started = self.last = time.perf_counter()
        self.cpu0 = time.process_time()  # CPU seconds too: a first open run beside other work (nice) is slowed
        self.pid = os.getpid()

    def embed(self, texts, role="query"):  # type: ignore[no-untyped-def]
        out = self.inner.embed(texts, role)
        self.texts += len(texts)
        if time.perf_counter() - self.last >= self.every_s:
            self.write()
        return out

    def write(self, done: bool = False) -> None:
        self.last = time.perf_counter()
        line = {"pid": self.pid, "texts": self.texts, "s": self.last - self.started, "peak_mb": _peak_mb(),
                "cpu_s": time.process_time() - self.cpu0, "done": done}
        with self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")


def resumed_open(path: Path) -> dict[str, float]:
    """The attempts of a first open logged by `Progress` at ``path``, added up: each attempt's last line."""
    last: dict[int, dict[str, float]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        entry = json.loads(line)
        last[int(entry["pid"])] = entry
    texts = sum(e["texts"] for e in last.values())
    took = sum(e["s"] for e in last.values())
    timed = [e for e in last.values() if "cpu_s" in e]  # attempts logged before CPU time was are left out of it
    cpu, cpu_texts = sum(e["cpu_s"] for e in timed), sum(e["texts"] for e in timed)
    return {"attempts": len(last), "texts": texts, "s": took, "texts_per_s": texts / took if took else 0.0,
            "cpu_s": cpu, "cpu_ms_per_text": 1000 * cpu / cpu_texts if cpu_texts else 0.0,
            "peak_mb": max((e["peak_mb"] for e in last.values()), default=0.0),
            "done": any(e.get("done") for e in last.values())}


def _keep_saved_texts(cache: Path) -> None:
    """Remove every entry of an index cache folder but the stack's saved text vectors (valid whatever the store
    did since): a first open that was cut short resumes from them; everything else is built again."""
    for entry in cache.glob("index/*/*") if cache.exists() else []:
        if entry.name != "texts.entry" and not entry.name.startswith("texts-"):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def child(method: str, store_path: str, queries: int, cache_dir: str | None,
          stand_in: bool = False, open_only: bool = False, progress: str | None = None) -> dict[str, object]:
    """Open, first recall, cold and warm recall; printed as JSON by the child process."""
    from guimem.embeddings import CachedEmbedder, create_embedder
    from guimem.memory.base import RecallQuery
    from guimem.memory.factory import open_memory
    from guimem.settings import GuimemSettings
    from guimem.types import Trajectory

    settings = GuimemSettings(cache_dir=Path(cache_dir) if cache_dir else None)
    embedder = create_embedder(settings.embedder)
    embedder.embed(["warm up the model"])
    if stand_in:
        embedder = CachedEmbedder(StandIn(embedder.inner, _template_texts(method)))
    counted = Progress(embedder.inner, Path(progress)) if progress else None
    if counted is not None:
        embedder = CachedEmbedder(counted)
    trajs = [Trajectory.model_validate_json(x) for x in Path(screens()).read_text().splitlines()]
    shots = [(t.task, o) for t in trajs for o in t.observations]
    random.Random(3).shuffle(shots)
    rss0 = _rss_mb()
    _reset_peak()
    start = time.perf_counter()
    memory = open_memory(method, str(store_path), settings, embedder=embedder, create=False)
    opened = time.perf_counter() - start
    task, obs = shots[0]
    memory.recall(RecallQuery(task=task, observation=obs))
    first = time.perf_counter() - start
    rss = _rss_mb() - rss0  # resident memory the open and first recall added
    peak = _peak_mb() - rss0  # the most they held at any moment
    if counted is not None:
        counted.write(done=True)
    if not cache_dir or stand_in or open_only:  # nothing more to measure
        memory.close()
        out = {"open_s": opened, "first_recall_s": first, "rss_mb": rss, "peak_mb": peak}
        if isinstance(embedder, CachedEmbedder) and isinstance(embedder.inner, StandIn):
            out["stood_in"] = embedder.inner.stood_in
        return out
    known = _known_screens(method)
    fresh_shots = [(t, o) for t, o in shots[1:] if _state(o, t) not in known][:queries]
    cold, warm, parts = [], [], []
    first_step = []
    for task, obs in fresh_shots:
        inner = embedder.inner if isinstance(embedder, CachedEmbedder) else embedder
        q = RecallQuery(task=task, observation=obs, step=1)
        fresh = CachedEmbedder(inner)  # no cache entry: every embedding recall needs is computed
        memory.kit.embedder = fresh  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        memory.recall(q)
        first_step.append((time.perf_counter() - t0) * 1000)  # the episode's first step: its goal too
        fresh = CachedEmbedder(inner)
        fresh.embed([task.goal])  # later steps: the goal was embedded when the episode started
        memory.kit.embedder = fresh  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        memory.recall(q)
        cold.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        memory.recall(q)
        warm.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        CachedEmbedder(inner).embed([_state(obs, task)])
        parts.append((time.perf_counter() - t0) * 1000)
    transfer = _transfer_recalls(memory, fresh_shots[:TRANSFER_QUERIES]) if method == "stack" else {}
    memory.close()
    return {"open_s": opened, "first_recall_s": first, "rss_mb": rss, "peak_mb": peak, "cold_p50": _p(cold, 0.5),
            "cold_p95": _p(cold, 0.95), "warm_p50": _p(warm, 0.5), "embed_p50": _p(parts, 0.5),
            "first_step_p50": _p(first_step, 0.5), "queries": len(cold), **transfer}


TRANSFER_QUERIES = 20


def _transfer_recalls(memory, shots) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The same screens for a task of the same app that memory holds nothing of: the stack looks through the app's
    transfer pool (`StackMemory._offers`). The first such recall of a process readies the pool's search: measured
    building its index (none saved) and opening it as saved."""
    from guimem.memory.base import RecallQuery

    def recall(task, obs) -> float:  # type: ignore[no-untyped-def]
        sibling = task.model_copy(update={"id": f"{task.id}-a-sibling-memory-never-saw"})
        t0 = time.perf_counter()
        memory.recall(RecallQuery(task=sibling, observation=obs, step=1))
        return (time.perf_counter() - t0) * 1000

    if not shots:
        return {}

    def afresh(saved: bool) -> tuple[float, float]:
        """The first such recall of a process, with the pool's index saved or not: ms, and peak MB it added."""
        memory._searches.clear()
        if not saved and memory.cache.folder is not None:
            for entry in memory.cache.folder.glob("pool-*.entry"):
                entry.unlink()
        gc.collect()
        rss0 = _rss_mb()
        _reset_peak()
        took = recall(*shots[0])
        return took, _peak_mb() - rss0

    built, built_peak = afresh(saved=False)  # builds the pool's index, reading every item of it, and saves it
    times = [recall(task, obs) for task, obs in shots[1:]]
    reopen, reopen_peak = afresh(saved=True)  # the next process: opens the index as saved
    ids = memory.lifecycle.pool(shots[0][0].app)
    return {"transfer_first_ms": built, "transfer_first_peak_mb": built_peak, "transfer_reopen_ms": reopen,
            "transfer_reopen_peak_mb": reopen_peak, **_pool_read_rates(memory, ids),
            "transfer_p50": _p(times or [0.0], 0.5), "transfer_p95": _p(times or [0.0], 0.95), "pool": len(ids)}


READ_SAMPLE = 20_000


def _pool_read_rates(memory, ids: list[str]) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Items/s read and parsed to index a pool: in batches (`ItemView.peek_many`, as the build reads) against one
    store read per item (as it read before), over the same sample of the pool's ids, in this run."""
    sample = ids[:READ_SAMPLE]
    if not sample:
        return {}
    table = memory.lifecycle.view.table

    def batched_s() -> float:
        t0 = time.perf_counter()
        for start in range(0, len(sample), 512):  # the build's batch (`PoolSearch.sync`), keeping what it keeps
            contents = [body.content for _, body in table.get_many(sample[start:start + 512])]
            assert contents
        return time.perf_counter() - t0

    def single_s() -> float:
        t0 = time.perf_counter()
        contents = [table.get(item_id)[1].content for item_id in sample]
        assert contents
        return time.perf_counter() - t0

    # twice each, alternating, the best of each: neither gains from the page cache the other filled
    b1, s1, b2, s2 = batched_s(), single_s(), batched_s(), single_s()
    batched, single = min(b1, b2), min(s1, s2)
    return {"read_sample": len(sample), "read_batched_per_s": len(sample) / batched,
            "read_single_per_s": len(sample) / single}


def _template_texts(method: str) -> list[str]:
    """The item texts the synthetic store's items were made from."""
    from guimem.storage.sqlite import SQLiteStore

    store = SQLiteStore(templates() / "memory" / f"{method}.sqlite")
    texts = sorted({json.loads(rec.body).get("content", "") for rec in store.query(method)} - {""})
    store.close()
    return texts


def _rss_mb() -> float:
    """This process's resident set size now (MB), from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    """Start this process's peak resident size (VmHWM) afresh (Linux: ``/proc/self/clear_refs`` 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def _peak_mb() -> float:
    """This process's peak resident set size since `_reset_peak` (MB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _known_screens(method: str) -> set[str]:
    """The screens the memory holds (its items were replicated from these): a query screen among them
    would be an exact structural match, not a cold screen."""
    from guimem.storage.sqlite import SQLiteStore

    store = SQLiteStore(templates() / "memory" / f"{method}.sqlite")
    out: set[str] = set()
    for rec in store.query(method):
        body = json.loads(rec.body)
        out.add(body.get("signature", ""))
        out.add(body.get("applicability", {}).get("state", ""))
    store.close()
    return out - {""}


def _state(obs, task):  # type: ignore[no-untyped-def]
    from guimem.memory.generalise import state_text

    return state_text(obs, task)


def measure(method: str, size: int, queries: int, stand_in_above: int = 100_000,
            open_only: bool = False) -> dict[str, object]:
    store = build_store(method, size)
    cache_dir = CACHE / "index-cache" / f"{method}-{size}"
    shutil.rmtree(cache_dir, ignore_errors=True)
    work = CACHE / "work" / f"{method}-{size}.sqlite"
    work.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(store, work)  # the measured store is a copy: opening never changes the cached one
    out: dict[str, object] = {}
    # "before": no index cache yet (every item read from the store, the cache written at the end);
    # "after": the next open, from the cache
    for label, cache in (("before", cache_dir), ("after", cache_dir))[: 1 if open_only else 2]:
        stand_in = method == "stack" and size > stand_in_above and label == "before"
        code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"from recall_end_to_end import child; "
                f"print(json.dumps(child({method!r}, {str(work)!r}, {queries}, {str(cache) if cache else None!r}, "
                f"{stand_in}, {open_only})))")
        done = subprocess.run([PY, "-c", code], check=True, capture_output=True, text=True)
        out[label] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


# ---------------------------------------------------------------- what the agent waits for, in a real evaluation

def seed_run(store: Path, out: Path, method: str) -> Path:
    """A new run folder ``out`` whose ``method`` memory starts as a copy of ``store``, its rounds counted from the
    first again (the copy's items and trial slots kept): ``guimem eval --out out`` then runs every round on it."""
    from guimem.harness.runfiles import RunDir
    from guimem.memory.keys import RoundClock
    from guimem.memory.names import namespace_of
    from guimem.storage.sqlite import SQLiteStore

    shutil.rmtree(out, ignore_errors=True)
    target = RunDir(out).store_file(method)
    target.parent.mkdir(parents=True)
    shutil.copy(store, target)
    copy = SQLiteStore(target)
    try:
        with copy.transaction():
            RoundClock(copy, namespace_of(method)).restart()
    finally:
        copy.close()
    return target


def agent_waits(run_dir: Path, method: str, rounds: int) -> dict[str, object]:
    """From a run's traces: the recall time the agent waited for (`Step.timings_ms["recall"]`), p50 / p95, over
    the steps where memory showed items, and apart: those of them whose recall computed (or waited for) an
    embedding (`timings_ms["embed"]` > 0), those that are an episode's first step (recalled ahead only when the env
    foresaw its start: a task it had started before) and the later ones (a settle wait before them), how many of
    each under 0.5 ms (recalled ahead), and the steps where memory showed nothing. ``ahead``: how many of the steps
    that showed items used the recall done ahead each way (`Step.recall_ahead`: taken, waited for, or computed because
    the screen or memory differed), with p50 / p95 of each. ``slowest``: the three slowest steps memory showed items
    on, as (task, step, recall ms, of it embedding ms, how it used the recall ahead), to read what a p95 is made of."""
    from guimem.harness.runfiles import RunDir

    shown: list[float] = []
    embedded: list[float] = []
    first: list[float] = []
    rest: list[float] = []
    later: list[float] = []
    nothing: list[float] = []
    slow: list[tuple[float, str, int, float, str]] = []
    by_use: dict[str, list[float]] = {}
    run = RunDir(run_dir)
    for r in range(rounds):
        for traj in run.readable_traces(method, r).values():
            for i, step in enumerate(traj.steps):
                if "recall" not in step.timings_ms:
                    continue
                ms = step.timings_ms["recall"]
                if not step.injection.items:
                    nothing.append(ms)
                    continue
                shown.append(ms)
                embed = step.timings_ms.get("embed", 0.0)
                use = str(step.recall_ahead) if step.recall_ahead is not None else "never"
                by_use.setdefault(use, []).append(ms)
                slow.append((ms, traj.task.id, i, embed, use))
                (embedded if embed > 0 else rest).append(ms)
                (first if i == 0 else later).append(ms)
    out: dict[str, object] = {"steps": len(shown), "embedded": len(embedded), "first_steps": len(first),
                              "nothing": len(nothing), "first_under_half_ms": sum(ms < 0.5 for ms in first),
                              "later_under_half_ms": sum(ms < 0.5 for ms in later)}
    slow.sort(key=lambda s: -s[0])
    out["slowest"] = [[task, i, ms, embed, use] for ms, task, i, embed, use in slow[:3]]
    out["ahead"] = {use: {"steps": len(values), "p50": _p(values, 0.5), "p95": _p(values, 0.95)}
                    for use, values in sorted(by_use.items())}
    for name, values in (("shown", shown), ("embedded", embedded), ("rest", rest), ("first", first),
                         ("later", later),
                         ("nothing", nothing)):
        if values:
            out[f"{name}_p50"], out[f"{name}_p95"] = _p(values, 0.5), _p(values, 0.95)
    return out


def in_eval(method: str, size: int, rounds: int, workers: int, stand_in_above: int,
            resume: bool = False) -> dict[str, object]:
    """A real `default` evaluation (explorer, MiniWoB++) whose memory starts with the ``size`` items of
    `build_store`: the memory is opened once first (no index cache: time and peak memory, as `measure`), so the
    evaluation's processes open it from the cache as they would after any first open; then `agent_waits`.

    With ``resume`` the stack's first open goes on from the text vectors an earlier attempt saved (its
    checkpoints), and its figures add up every attempt (`resumed_open`); without, it starts from nothing."""
    store = build_store(method, size)
    out = CACHE / "eval" / f"{method}-{size}"
    path = seed_run(store, out, method)
    cache = CACHE / "index-cache" / f"eval-{method}-{size}"
    log_path = CACHE / "index-cache" / f"eval-{method}-{size}.progress.jsonl"
    stand_in = method == "stack" and size > stand_in_above
    if resume and method == "stack" and not stand_in:
        _keep_saved_texts(cache)
    else:
        shutil.rmtree(cache, ignore_errors=True)
        log_path.unlink(missing_ok=True)
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            f"from recall_end_to_end import child; "
            f"print(json.dumps(child({method!r}, {str(path)!r}, 0, {str(cache)!r}, {stand_in}, True, "
            f"{str(log_path)!r})))")
    done = subprocess.run([PY, "-c", code], check=True, capture_output=True, text=True)
    opened = json.loads(done.stdout.strip().splitlines()[-1])
    if method == "stack" and not stand_in:  # its first open embeds every item's text once (the few edge screens apart)
        attempts = resumed_open(log_path)
        opened.update({"attempts": attempts["attempts"], "texts": attempts["texts"],
                       "texts_per_s": attempts["texts_per_s"], "all_attempts_s": attempts["s"],
                       "all_attempts_peak_mb": attempts["peak_mb"],
                       "all_attempts_cpu_ms_per_text": attempts["cpu_ms_per_text"]})
    print(json.dumps({f"first open: {method}@{size}": opened}), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    subprocess.run([GUIMEM, "eval", "--suite", "default", "--rounds", str(rounds), "--methods", method,
                    "--workers", str(workers), "--out", str(out), "--json"], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "GUIMEM_CACHE_DIR": str(cache)})
    took = time.perf_counter() - t0
    entries = sum(1 for _ in cache.iterdir()) if cache.exists() else 0
    return {"open": opened, "stand_in": stand_in, "eval_s": took, "cache_entries": entries,
            **agent_waits(out, method, rounds)}


def after_open_child(method: str, store_path: str, cache_dir: str, queries: int) -> dict[str, object]:
    """In a fresh process: open ``method`` from its index cache, then ``queries`` recalls of screens whose
    embeddings are already cached (memory's own work only), right away and without waiting for anything."""
    import usearch.index as usearch_index

    from guimem.embeddings import create_embedder
    from guimem.memory.base import RecallQuery
    from guimem.memory.factory import load_models, open_memory
    from guimem.settings import GuimemSettings
    from guimem.types import Trajectory

    settings = GuimemSettings(cache_dir=Path(cache_dir))
    embedder = create_embedder(settings.embedder)
    load_models(embedder, settings)  # as an evaluation's process does before its first episode
    trajs = [Trajectory.model_validate_json(x) for x in Path(screens()).read_text().splitlines()]
    shots = [(t.task, o) for t in trajs for o in t.observations]
    random.Random(5).shuffle(shots)
    shots = shots[:queries]
    for task, obs in shots:
        embedder.embed([_state(obs, task)])
        embedder.embed([task.goal])
    searched = [0.0]
    search = usearch_index.Index.search

    def timed(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        found = search(self, *args, **kwargs)
        searched[0] += time.perf_counter() - t
        return found

    usearch_index.Index.search = timed  # type: ignore[method-assign]
    start = time.perf_counter()
    memory = open_memory(method, store_path, settings, embedder=embedder, create=False)
    opened = time.perf_counter() - start
    recall_ms, search_ms = [], []
    for task, obs in shots:
        searched[0] = 0.0
        t = time.perf_counter()
        memory.recall(RecallQuery(task=task, observation=obs, step=1))
        recall_ms.append((time.perf_counter() - t) * 1000)
        search_ms.append(searched[0] * 1000)
    t = time.perf_counter()
    for warming in memory.kit.warmups:  # the warm-ups it started (the shipped methods hold their kit)
        warming.wait()
    warming_left = time.perf_counter() - t
    memory.close()
    return {"open_s": opened, "first_ms": recall_ms[0], "recall_p50": _p(recall_ms, 0.5),
            "recall_max": max(recall_ms), "search_p50": _p(search_ms, 0.5), "search_max": max(search_ms),
            "warming_left_s": warming_left}


def after_open(method: str, size: int, drop: bool, queries: int = 30) -> dict[str, object]:
    """The first recalls of a fresh process that opens ``method`` at ``size`` from its index cache, with the
    background warm-up of its memory-mapped files (`guimem.vectors.paging`) and without it
    (``GUIMEM_WARM_INDEXES=false``). The memory of the last ``--eval-sizes`` run when there is one (its cache
    matches its store), else the one ``--sizes`` measured. ``drop``: the page cache is emptied first (root only),
    as on a machine just started; without it, one open whose figures are not kept goes first, so that the two
    measured find the page cache the same (the first would otherwise fill it for the second)."""
    run = CACHE / "eval" / f"{method}-{size}"
    if (run / "memory").exists():
        from guimem.harness.runfiles import RunDir

        store, cache = RunDir(run).store_file(method), CACHE / "index-cache" / f"eval-{method}-{size}"
    else:
        store, cache = build_store(method, size), CACHE / "index-cache" / f"{method}-{size}"
    out: dict[str, object] = {}
    for warm in ("true", "false") if drop else ("prime", "true", "false"):
        if drop:
            subprocess.run(["sync"], check=True)
            Path("/proc/sys/vm/drop_caches").write_text("1")
        code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"from recall_end_to_end import after_open_child; "
                f"print(json.dumps(after_open_child({method!r}, {str(store)!r}, {str(cache)!r}, {queries})))")
        done = subprocess.run([PY, "-c", code], check=True, capture_output=True, text=True,
                              env={**os.environ, "GUIMEM_WARM_INDEXES": "true" if warm == "prime" else warm})
        if warm != "prime":  # the priming open's own figures are not kept
            out["warm" if warm == "true" else "no_warm"] = json.loads(done.stdout.strip().splitlines()[-1])
    out["page_cache"] = "emptied before each" if drop else "hot (one open first, not measured)"
    return out


# ---------------------------------------------------------------- approximate search at 1M

def ann(size: int, queries: int = 500, dtype: str = "f32", connectivity: int | None = None) -> dict[str, object]:
    """HNSW recall@10 against exact search and latency over a sweep of ef, on ``size`` vectors made from real e5
    embeddings; ``connectivity`` None: what `hnsw_params` gives for that size built at once (an index that grew
    past the automatic switch keeps the switch's, 16)."""
    from guimem.embeddings.base import EmbedRole
    from guimem.embeddings.e5 import E5Embedder
    from guimem.memory.generalise import state_text
    from guimem.types import Trajectory

    base_path = CACHE / "ann-base.npy"
    if not base_path.exists():
        trajs = [Trajectory.model_validate_json(x) for x in screens().read_text().splitlines()]
        texts = sorted({state_text(o, t.task) for t in trajs for o in t.observations} | {t.task.goal for t in trajs})
        rng = random.Random(5)
        words = sorted({w for t in texts for w in t.split()})
        while len(texts) < 20_000:  # generated variants of real screen and goal texts
            t = rng.choice(texts[:400]).split("\n")
            t.insert(rng.randrange(len(t) + 1), f"{rng.choice(['button', 'link', 'textbox', 'text'])} "
                                                f"{rng.choice(words)} {rng.choice(words)}")
            texts.append("\n".join(t))
        e5 = E5Embedder()
        vecs = np.concatenate([e5.embed(texts[i:i + 256], EmbedRole.QUERY) for i in range(0, len(texts), 256)])
        np.save(base_path, vecs.astype(np.float32))
    base = np.load(base_path)
    rng = np.random.default_rng(11)
    data = _unit(rng, base, size, 0.35)
    query = _unit(rng, base, queries, 0.35)
    truth = np.concatenate([np.argsort(-(data @ q))[:10][None, :] for q in query])
    exact_ms = []
    for q in query[:100]:
        t0 = time.perf_counter()
        scores = data @ q
        np.argpartition(-scores, 9)[:10]
        exact_ms.append((time.perf_counter() - t0) * 1000)
    from usearch.index import Index

    from guimem.vectors.auto import hnsw_params

    m, ef_add, _ = hnsw_params(size)
    m = connectivity or m
    index = Index(ndim=base.shape[1], metric="cos", dtype=dtype, connectivity=m, expansion_add=ef_add)
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    index.add(np.arange(size, dtype=np.uint64), data)
    build = time.perf_counter() - t0
    rss = _rss_mb() - rss0
    curve = []
    for ef in (16, 32, 64, 96, 128, 256):
        index.expansion_search = ef
        lat, hits = [], 0
        for qi, q in enumerate(query):
            t0 = time.perf_counter()
            found = index.search(q, 10)
            lat.append((time.perf_counter() - t0) * 1000)
            hits += len(set(found.keys.tolist()) & set(truth[qi].tolist()))
        curve.append({"ef": ef, "recall10": hits / (10 * len(query)), "p50_ms": _p(lat, 0.5), "p95_ms": _p(lat, 0.95)})
    return {"size": size, "dtype": dtype, "connectivity": m, "expansion_add": ef_add, "build_s": build, "index_mb": rss,
            "exact_p50_ms": _p(exact_ms, 0.5), "curve": curve, "base_texts": int(base.shape[0])}


def throughput() -> dict[str, float]:
    out = {}
    for workers in (1, 2):
        run = CACHE / f"throughput-w{workers}"
        shutil.rmtree(run, ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run([GUIMEM, "eval", "--suite", "demo", "--rounds", "2", "--methods", "graph,steer,stack",
                        "--workers", str(workers), "--out", str(run), "--json"], check=True, stdout=subprocess.DEVNULL)
        episodes = sum(1 for _ in (run / "results.jsonl").open())
        out[f"workers_{workers}"] = episodes / ((time.perf_counter() - t0) / 60)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000", help="sizes measured for every method")
    parser.add_argument("--large", default="1000000", help="sizes measured for --large-methods only")
    parser.add_argument("--large-methods", default="graph,steer",
                        help="methods measured at --large (the stack's first open embeds every item text: hours at 1M)")
    parser.add_argument("--ann", type=int, default=100_000, help="vectors for the HNSW curve (1000000: the 1M target)")
    parser.add_argument("--ann-dtypes", default="f32,f16",
                        help="how the HNSW curve's graph holds its vectors, each measured in turn (f32, f16)")
    parser.add_argument("--ann-connectivity", type=int, default=None,
                        help="the HNSW curve's graph degree (default: hnsw_params' for --ann built at once; an "
                             "index that grew past the automatic switch has 16)")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--stand-in-above", type=int, default=100_000,
                        help="stack sizes above this get perturbed template vectors for their item texts' first "
                             "embedding (see the module docstring)")
    parser.add_argument("--methods", default=",".join(METHODS), help="methods measured at --sizes")
    parser.add_argument("--skip", default="", help="comma-separated: ann, throughput, recall")
    parser.add_argument("--open-only", action="store_true",
                        help="only each memory's first open (no index cache): time, resident and peak memory")
    parser.add_argument("--eval-sizes", default="",
                        help="sizes at which a real `default` evaluation runs on a memory that starts with that many "
                             "items (--eval-methods): the recall the agent waits for, from its traces")
    parser.add_argument("--eval-methods", default="graph,skills,stack")
    parser.add_argument("--resume-open", action="store_true",
                        help="the stack's first open before an eval goes on from the text vectors an earlier, cut "
                             "short attempt saved (hours at 1M: it may take several sessions); its figures add up "
                             "every attempt")
    parser.add_argument("--eval-rounds", type=int, default=2)
    parser.add_argument("--eval-workers", type=int, default=1)
    parser.add_argument("--after-open", default="",
                        help="method@size,...: a fresh process's first recalls after an open from the index cache, "
                             "with the warm-up of its memory-mapped files and without (GUIMEM_WARM_INDEXES=false)")
    parser.add_argument("--drop-caches", action="store_true",
                        help="with --after-open: empty the page cache before each process (root only)")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure to this file")
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    figures: dict[str, object] = {}
    rows = []
    if "recall" not in skip:
        chosen = [m for m in args.methods.split(",") if m]
        plan = [(m, int(s)) for s in args.sizes.split(",") if s for m in chosen]
        plan += [(m, int(s)) for s in args.large.split(",") if s for m in args.large_methods.split(",") if m in chosen]
        for method, size in plan:
            result = measure(method, size, args.queries, args.stand_in_above, args.open_only)
            figures[f"{method}@{size}"] = result
            if args.open_only:
                before = result["before"]
                rows.append((f"{method} first open + first recall @{size:,}", f"{before['first_recall_s']:.1f} s",
                             None, None))
                rows.append((f"{method} peak resident memory of a first open @{size:,}",
                             f"{before['peak_mb']:.0f} MB", 2048, before["peak_mb"] / 2048))
                print(json.dumps({f"{method}@{size}": result}), flush=True)
                continue
            after, before = result["after"], result["before"]
            target = 15.0 if size <= 100_000 else 30.0
            open_target = 0.3 if size <= 100_000 else 2.0
            rows.append((f"{method} cold recall p50 @{size:,}", f"{after['cold_p50']:.1f} ms", target,
                         after["cold_p50"] / target))
            rows.append((f"{method} cold recall p95/p50 @{size:,}", f"{after['cold_p95'] / after['cold_p50']:.2f}",
                         2.0, after["cold_p95"] / after["cold_p50"] / 2.0))
            rows.append((f"{method} (of which the screen's e5 embedding) @{size:,}", f"{after['embed_p50']:.1f} ms",
                         None, None))
            rows.append((f"{method} cold recall p50, an episode's first step (goal too) @{size:,}",
                         f"{after['first_step_p50']:.1f} ms", None, None))
            if "transfer_p50" in after:
                rows.append((f"{method} recall with only other tasks' items (a pool of {after['pool']:,}) p50 / p95 "
                             f"@{size:,}", f"{after['transfer_p50']:.1f} / {after['transfer_p95']:.1f} ms", target,
                             after["transfer_p50"] / target))
                rows.append((f"{method} the first such recall of a process, building and saving the pool's index: "
                             f"time, peak memory it added @{size:,}",
                             f"{after['transfer_first_ms']:.0f} ms, {after['transfer_first_peak_mb']:.0f} MB", None,
                             None))
                rows.append((f"{method} the same with the pool's index saved (opened from the index cache) @{size:,}",
                             f"{after['transfer_reopen_ms']:.0f} ms, {after['transfer_reopen_peak_mb']:.0f} MB", None,
                             None))
                if "read_sample" in after:
                    rows.append((f"{method} pool items read and parsed to index it, batched vs one read each "
                                 f"({after['read_sample']:,} items) @{size:,}",
                                 f"{after['read_batched_per_s']:,.0f} vs {after['read_single_per_s']:,.0f} /s "
                                 f"({after['read_batched_per_s'] / after['read_single_per_s']:.1f}×)", None, None))
            if size <= 100_000:
                rows.append((f"{method} warm recall p50 @{size:,}", f"{after['warm_p50']:.2f} ms", 2.0,
                             after["warm_p50"] / 2.0))
            rows.append((f"{method} open + first recall @{size:,} (before → after)",
                         f"{before['first_recall_s']:.2f} s → {after['first_recall_s']:.2f} s", open_target,
                         after["first_recall_s"] / open_target))
            rows.append((f"{method} resident memory per {size:,} items (before → after)",
                         f"{before['rss_mb']:.0f} MB → {after['rss_mb']:.0f} MB", None, None))
            if size >= 1_000_000:
                rows.append((f"{method} peak resident memory of a first open @{size:,}",
                             f"{before['peak_mb']:.0f} MB", 2048, before["peak_mb"] / 2048))
            print(json.dumps({f"{method}@{size}": result}), flush=True)
    for size in [int(x) for x in args.eval_sizes.split(",") if x]:
        for method in [m for m in args.eval_methods.split(",") if m]:
            w = in_eval(method, size, args.eval_rounds, args.eval_workers, args.stand_in_above, args.resume_open)
            figures[f"eval:{method}@{size}"] = w
            print(json.dumps({f"eval:{method}@{size}": w}), flush=True)
            at = f"@{size:,}, a real default eval ({args.eval_rounds} rounds, --workers {args.eval_workers})"
            if "shown_p50" in w:
                rows.append((f"{method} recall the agent waited for, steps memory showed items ({w['steps']}) "
                             f"p50 {at}", f"{w['shown_p50']:.2f} ms", 2.0, w["shown_p50"] / 2.0))
                rows.append((f"{method} the same, p95/p50 (p95 {w['shown_p95']:.2f} ms) {at}",
                             f"{w['shown_p95'] / w['shown_p50']:.2f}", 2.0, w["shown_p95"] / w["shown_p50"] / 2.0))
                slowest = "; ".join(f"{task} step {i}: {ms:.2f} ms ({embed:.2f} embedding)"
                                    for task, i, ms, embed in w["slowest"])
                rows.append((f"{method} the slowest of those steps {at}", slowest, None, None))
            for part, label in (("embedded", "of them, steps whose recall embedded"),
                                ("rest", "of them, steps whose vectors were ready"),
                                ("first", "of them, an episode's first step"),
                                ("later", "of them, the later steps (a preview before them: recalled ahead)"),
                                ("nothing", "steps memory showed nothing (apart; their recall still took time)")):
                if f"{part}_p50" in w:
                    count = {"rest": w["steps"] - w["embedded"], "first": w["first_steps"],
                             "later": w["steps"] - w["first_steps"]}.get(part, w.get(part))
                    ahead = (f", {w[f'{part}_under_half_ms']} under 0.5 ms" if f"{part}_under_half_ms" in w
                             else "")
                    rows.append((f"{method} {label} ({count}) p50 / p95 {at}",
                                 f"{w[f'{part}_p50']:.2f} / {w[f'{part}_p95']:.2f} ms{ahead}", None, None))
            stood = " (stand-in item vectors)" if w["stand_in"] else ""
            large = size >= 1_000_000
            o = w["open"]
            rate = f", {o['texts_per_s']:.0f} texts/s embedded" if "texts_per_s" in o else ""
            if o.get("all_attempts_cpu_ms_per_text"):
                rate += f" ({o['all_attempts_cpu_ms_per_text']:.1f} CPU ms per text)"
            if o.get("attempts", 1) > 1:
                rate += (f"; in {o['attempts']} attempts resumed from saved text vectors: {o['all_attempts_s']:.0f} s, "
                         f"{o['texts']:,} texts, peak {o['all_attempts_peak_mb']:.0f} MB")
            peak = max(o["peak_mb"], o.get("all_attempts_peak_mb", 0.0))
            rows.append((f"{method} first open before the eval{stood}: time, peak memory @{size:,}",
                         f"{o['first_recall_s']:.1f} s, {o['peak_mb']:.0f} MB{rate}",
                         2048 if large else None, peak / 2048 if large else None))
    for spec in [x for x in args.after_open.split(",") if x]:
        method, _, size_text = spec.partition("@")
        size = int(size_text)
        w = after_open(method, size, args.drop_caches)
        figures[f"after_open:{method}@{size}"] = w
        print(json.dumps({f"after_open:{method}@{size}": w}), flush=True)
        cold = ", page cache emptied first" if args.drop_caches else ""
        on, off = w["warm"], w["no_warm"]
        for key, label in (("no_warm", "without"), ("warm", "with")):
            r = w[key]
            assert isinstance(r, dict)
            rows.append((f"{method} first 30 recalls of a process opened from the cache, {label} the warm-up{cold}: "
                         f"first, p50, max (search p50, max) @{size:,}",
                         f"{r['first_ms']:.1f}, {r['recall_p50']:.2f}, {r['recall_max']:.1f} ms "
                         f"({r['search_p50']:.2f}, {r['search_max']:.1f} ms)", None, None))
        assert isinstance(on, dict) and isinstance(off, dict)
        rows.append((f"{method} first recall with the warm-up / without @{size:,}",
                     f"{on['first_ms'] / off['first_ms']:.3f}", None, None))
    for dtype in ([] if "ann" in skip else args.ann_dtypes.split(",")):
        result = ann(args.ann, dtype=dtype, connectivity=args.ann_connectivity)
        figures[f"ann_{dtype}"] = result
        best = next((c for c in result["curve"] if c["recall10"] >= 0.95), result["curve"][-1])
        rows.append((f"HNSW {dtype} @{args.ann:,} recall@10 (ef {best['ef']})", f"{best['recall10']:.3f}", 0.95,
                     0.95 / max(best["recall10"], 1e-9)))
        rows.append((f"HNSW {dtype} @{args.ann:,} search p50 (ef {best['ef']})", f"{best['p50_ms']:.2f} ms", 2.0,
                     best["p50_ms"] / 2.0))
        rows.append((f"HNSW {dtype} @{args.ann:,} build (M {result['connectivity']}, ef_add {result['expansion_add']})",
                     f"{result['build_s']:.0f} s, {result['index_mb']:.0f} MB", None, None))
        rows.append((f"exact search p50 @{args.ann:,}", f"{result['exact_p50_ms']:.1f} ms", None, None))
        for c in result["curve"]:
            rows.append((f"  HNSW {dtype} curve ef {c['ef']}", f"recall@10 {c['recall10']:.3f}, "
                         f"p50 {c['p50_ms']:.2f} ms, p95 {c['p95_ms']:.2f} ms", None, None))
        print(json.dumps({f"ann_{dtype}": result}), flush=True)
    if "throughput" not in skip:
        result = throughput()
        figures["throughput"] = result
        rows.append(("eval episodes/min, demo, --workers 1", f"{result['workers_1']:.1f}", None, None))
        rows.append(("eval episodes/min, demo, --workers 2", f"{result['workers_2']:.1f}", None, None))
        rows.append(("  workers 2 / workers 1", f"{result['workers_2'] / result['workers_1']:.2f}x", None, None))
    print("\n| figure | measured | target | ratio (≤ 1 meets) |\n|---|---|---|---|")
    for name, value, target, ratio in rows:
        print(f"| {name} | {value} | {'' if target is None else target} | "
              f"{'' if ratio is None else f'{ratio:.2f}'} |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
