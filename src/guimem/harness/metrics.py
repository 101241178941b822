"""Per-round success, cumulative Pass@k, tokens, latency, memory size; task-clustered bootstrap CIs.

Pass@k counts a (task, seed) pair once it succeeded in any of the first k rounds. Confidence
intervals resample *tasks* (all seeds of a task together) with replacement; differences versus
``none`` are paired (the same resampled tasks for both methods).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from guimem.harness.runfiles import EpisodeResult, EvalSpec, RunDir, judged, unresolved_infra

BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 0


SUMMARY_VERSION = 2
"""Version 2 writes each round's 0-based index as ``round_index`` (version 1, without ``version``: ``round``)."""


class RoundStats(BaseModel):
    """One method, one round (``round``: its 0-based index, written as ``round_index``)."""

    model_config = ConfigDict(serialize_by_alias=True)

    round: int = Field(validation_alias=AliasChoices("round_index", "round"), serialization_alias="round_index")
    success_rate: float
    episodes: int
    injected_tokens: int
    injected_tokens_per_step: float
    recall_ms_p50: float
    recall_ms_p95: float
    memory: dict[str, int] = Field(default_factory=dict)
    abstained_steps: int = 0
    stale_items: int = 0
    """Items withheld as stale, summed over the round's episodes (each item once per episode)."""
    regrounded_items: int = 0
    """Items shown re-grounded, summed over the round's episodes (each item once per episode)."""
    ui_version: str = ""
    """The UI version the round's pages showed (``v0``, ``v1``; empty without drift, `guimem.envs.drift`)."""


class Difference(BaseModel):
    """A paired difference with its 95 % CI."""

    mean: float
    ci: list[float]


class InfraCounts(BaseModel):
    """Infrastructure failures of one method: never counted in Pass@k, shown so they are not missed.

    Attributes:
        attempts: Episodes the infrastructure failed (each attempt once, retried or not).
        unresolved: Episodes still without a judged result (run again on resume).
        first_error: The first failure's component and message.
    """

    attempts: int = 0
    unresolved: int = 0
    first_error: str | None = None


class ModelTotals(BaseModel):
    """What the model did for one method (absent for offline policies).

    Attributes:
        calls: Requests sent.
        prompt_tokens: Prompt tokens, as the server counted them.
        completion_tokens: Generated tokens.
        parse_failure_rate: Steps whose reply could not be read as an action, over all steps.
        model_ms_per_step: Model time per step.
        context_overflows: Episodes ended because the model's context was full.
        output_modes: How replies were constrained (``json_schema``, ``json_object``, ``text``), as detected.
    """

    calls: int
    prompt_tokens: int
    completion_tokens: int
    parse_failure_rate: float
    model_ms_per_step: float
    context_overflows: int = 0
    output_modes: list[str] = Field(default_factory=list)


def _model_totals(rows: list[EpisodeResult]) -> ModelTotals | None:
    calls = sum(r.model_calls for r in rows)
    if not calls and not any(r.context_overflow for r in rows):
        return None
    steps = sum(r.steps for r in rows) or 1
    return ModelTotals(calls=calls, prompt_tokens=sum(r.model_prompt_tokens for r in rows),
                       completion_tokens=sum(r.model_completion_tokens for r in rows),
                       parse_failure_rate=round(sum(r.parse_failures for r in rows) / steps, 4),
                       model_ms_per_step=round(sum(r.model_ms for r in rows) / steps, 1),
                       context_overflows=sum(1 for r in rows if r.context_overflow),
                       output_modes=sorted({m for r in rows for m in r.output_modes}))


def _skill_runs(rows: list[EpisodeResult]) -> dict[str, object]:
    runs = sum(r.skill_runs for r in rows)
    failures = sum(r.skill_failures for r in rows)
    return {"skill_runs": runs, "skill_run_success_rate": round((runs - failures) / runs, 4) if runs else None}


class HarmCase(BaseModel):
    """One (task, seed, round) where a method failed and ``none`` succeeded in the same round."""

    model_config = ConfigDict(serialize_by_alias=True)

    task: str
    seed: int
    round: int = Field(validation_alias=AliasChoices("round_index", "round"), serialization_alias="round_index")
    """0-based, written as ``round_index`` (as a round's stats are)."""


class MethodSummary(BaseModel):
    """Everything ``summary.json`` says about one method."""

    rounds: list[RoundStats]
    pass_at_k: dict[str, float]
    pass_at_k_ci: dict[str, list[float]]
    diff_vs_none: dict[str, Difference]
    injected_tokens_total: int
    steps_total: int
    infra: InfraCounts = Field(default_factory=InfraCounts)
    model: ModelTotals | None = None
    skill_runs: int = 0
    skill_run_success_rate: float | None = None
    pass_at_k_by_version: dict[str, dict[str, float]] = Field(default_factory=dict)
    """With drift: per UI version, Pass@k over that version's rounds (k counted from its first round)."""
    harm: list[HarmCase] = Field(default_factory=list)
    """Where memory turned a success of ``none`` into a failure: the method's judged episode failed and
    ``none``'s judged episode of the same task, seed and round succeeded (empty for ``none``)."""


def harm_cases(rows: list[EpisodeResult], none_rows: list[EpisodeResult]) -> list[HarmCase]:
    """The (task, seed, round) where ``rows`` failed and ``none_rows`` succeeded (judged episodes only)."""
    succeeded = {(r.task, r.seed, r.round) for r in none_rows if r.success}
    failed = {(r.task, r.seed, r.round) for r in rows if not r.success}
    found = sorted(failed & succeeded, key=lambda c: (c[2], c[0], c[1]))
    return [HarmCase(task=t, seed=s, round=k) for t, s, k in found]


class Summary(BaseModel):
    """``summary.json`` (format version 2; a version 1 summary still reads)."""

    version: int = SUMMARY_VERSION
    run: dict[str, object]
    methods: dict[str, MethodSummary]
    complete: bool


def _percentile(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 3) if values else 0.0


def _round_stats(results: list[EpisodeResult], round_index: int, memory: dict[str, int] | None) -> RoundStats:
    steps = sum(r.steps for r in results)
    tokens = sum(r.injected_tokens for r in results)
    latencies = [ms for r in results for ms in r.recall_ms]
    rate = round(sum(r.success for r in results) / len(results), 4) if results else 0.0
    return RoundStats(
        round=round_index, success_rate=rate, episodes=len(results), injected_tokens=tokens,
        injected_tokens_per_step=round(tokens / steps, 2) if steps else 0,
        recall_ms_p50=_percentile(latencies, 50), recall_ms_p95=_percentile(latencies, 95), memory=memory or {},
        abstained_steps=sum(r.abstained_steps for r in results),
        stale_items=sum(r.stale_items for r in results), regrounded_items=sum(r.regrounded_items for r in results),
    )


def success_matrix(results: list[EpisodeResult], units: list[tuple[str, int]], rounds: int) -> np.ndarray:
    """``[unit, round]`` booleans (missing episodes count as failures)."""
    index = {u: i for i, u in enumerate(units)}
    out = np.zeros((len(units), rounds), dtype=bool)
    for r in results:
        i = index.get((r.task, r.seed))
        if i is not None and r.round < rounds:
            out[i, r.round] = r.success
    return out


def pass_at(matrix: np.ndarray, k: int) -> np.ndarray:
    """Per unit: succeeded in any of the first ``k`` rounds."""
    if matrix.shape[1] == 0:
        return np.zeros(matrix.shape[0], dtype=bool)
    return np.asarray(matrix[:, :k].any(axis=1))


def bootstrap_indices(units: list[tuple[str, int]]) -> list[np.ndarray]:
    """Resamples of unit indices, clustered by task (deterministic seed)."""
    clusters: dict[str, list[int]] = defaultdict(list)
    for i, (task, _) in enumerate(units):
        clusters[task].append(i)
    groups = list(clusters.values())
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    samples = []
    for _ in range(BOOTSTRAP_SAMPLES):
        picked = rng.integers(0, len(groups), size=len(groups))
        samples.append(np.concatenate([np.array(groups[g]) for g in picked]))
    return samples


def _ci(values: np.ndarray) -> list[float]:
    return [round(float(np.percentile(values, 2.5)), 4), round(float(np.percentile(values, 97.5)), 4)]


def _infra(attempts: list[EpisodeResult], unresolved: list[EpisodeResult]) -> InfraCounts:
    first = attempts[0].infra if attempts else None
    return InfraCounts(attempts=len(attempts), unresolved=len(unresolved),
                       first_error=f"{first.component}: {first.message}" if first else None)


def by_version(matrix: np.ndarray, versions: list[str]) -> dict[str, dict[str, float]]:
    """Pass@k per UI version (``versions``: each round's): over the rounds each version ran, k counted from
    its first (empty: no drift)."""
    if not any(versions) or not len(matrix):
        return {}
    out: dict[str, dict[str, float]] = {}
    for version in dict.fromkeys(versions):
        part = matrix[:, [k for k, v in enumerate(versions) if v == version]]
        out[version] = {str(k): round(float(pass_at(part, k).mean()), 4) for k in range(1, part.shape[1] + 1)}
    return out


def summarise(spec: EvalSpec, lines: list[EpisodeResult], run_dir: RunDir | None = None) -> Summary:
    """Build ``summary.json`` from the result lines (and memory snapshots when a run dir is given).

    Only judged episodes count; infrastructure failures are reported per method, apart.
    """
    results = judged(lines)
    pending = unresolved_infra(lines)
    units = list(dict.fromkeys((e.task, e.seed) for e in spec.suite.tasks))
    rounds = spec.rounds
    samples = bootstrap_indices(units)
    by_method: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        by_method[r.method].append(r)
    none_matrix = success_matrix(by_method.get("none", []), units, rounds)
    methods: dict[str, MethodSummary] = {}
    versions = [spec.ui_version(k) for k in range(rounds)]
    for method in spec.methods:
        rows = by_method.get(method, [])
        matrix = success_matrix(rows, units, rounds)
        per_round = [_round_stats([r for r in rows if r.round == k], k,
                                  run_dir.snapshot(method, k) if run_dir else None) for k in range(rounds)]
        if spec.drift_at:
            per_round = [s.model_copy(update={"ui_version": spec.ui_version(s.round)})
                         for s in per_round]
        pak, cis, diffs = {}, {}, {}
        for k in range(1, rounds + 1):
            hits, base = pass_at(matrix, k).astype(float), pass_at(none_matrix, k).astype(float)
            pak[str(k)] = round(float(hits.mean()), 4) if len(units) else 0.0
            boot = np.array([hits[s].mean() for s in samples])
            cis[str(k)] = _ci(boot)
            paired = np.array([hits[s].mean() - base[s].mean() for s in samples])
            diffs[str(k)] = Difference(mean=round(float(hits.mean() - base.mean()), 4), ci=_ci(paired))
        methods[method] = MethodSummary(rounds=per_round, pass_at_k=pak, pass_at_k_ci=cis, diff_vs_none=diffs,
                                        injected_tokens_total=sum(r.injected_tokens for r in rows),
                                        steps_total=sum(r.steps for r in rows),
                                        infra=_infra([r for r in lines if r.method == method and not r.judged],
                                                     [r for r in pending if r.method == method]),
                                        model=_model_totals(rows), **_skill_runs(rows),
                                        pass_at_k_by_version=by_version(matrix, versions),
                                        harm=harm_cases(rows, by_method.get("none", [])) if method != "none" else [])
    expected = len(spec.suite.tasks) * rounds * len(spec.methods)
    run = {"suite": spec.suite.name, "env": spec.env, "rounds": rounds, "methods": spec.methods,
           "policy": spec.policy, "episodes_per_round": len(spec.suite.tasks), "embedder": spec.embedder,
           "token_encoding": spec.token_encoding, "exclude_source_task": spec.memory.exclude_source_task,
           "learned_on": spec.learned_on, "drift_at": spec.drift_at, "drift_to": spec.drift_to}
    return Summary(run=run, methods=methods, complete=len(results) >= expected)
