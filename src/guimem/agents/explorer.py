"""The ``explorer``: a deterministic, seeded, memory-aware offline policy (no model, no task rules).

Each step it lists candidate actions from the screen (tap what is clickable, type task values into
what is editable, press enter in a filled field), scores them by word overlap with the goal, and
samples one with a seeded softmax. Memory acts only through structured behaviour: the next
not-yet-done action of a recalled procedure, edge or skill is bound to the current screen and
preferred; actions named by warnings and failed edges are avoided.

The draw is *coupled* to the draw the same episode makes without memory (a maximal coupling): the
step's random number first picks what the explorer would take with no memory (exactly what ``none``
takes in the same round); that choice is kept with probability min(1, q/p), where p and q are its
probabilities without and with memory, and otherwise the step draws, from a second stream, among
the candidates memory made *more* likely, in proportion to how much more. Each distribution is
still exactly the seeded softmax, but a memory run departs from the memoryless choice only towards
what memory recommends or away from what it warns against; adding candidates can no longer move the
shared random number onto a third action memory made less likely (issue #33's forward-nl case).
The main stream is spent per action performed, not per step: after a skill performed k actions in
one step, the next step skips k - 1 numbers (and after a skill that performed nothing, it draws the
same number again), so it draws the number the memoryless episode drew at the same point of its
action sequence, as long as the two episodes have done the same so far.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import zlib
from dataclasses import dataclass

from guimem.agents.base import Decision, PolicyInput
from guimem.agents.lexical import overlap, words
from guimem.settings import GuimemSettings
from guimem.types import (
    Action,
    ActionKind,
    InjectedItem,
    ItemKind,
    Observation,
    Role,
    Task,
    UIElement,
)


@dataclass(frozen=True)
class Candidate:
    """One possible action with its score and the reason for it."""

    action: Action
    score: float
    why: str


CandKey = tuple[str, str | None, str | None]


def _key(action: Action) -> CandKey:
    if action.kind is ActionKind.RUN_SKILL:
        return (action.kind.value, action.skill, None)
    return (action.kind.value, action.ref, action.text if action.kind is ActionKind.TYPE else None)


Avoid = tuple[Action, tuple[Action, ...] | None, str]


def _warned(item: InjectedItem, actions: list[Action]) -> list[Avoid] | None:
    """What an item says to avoid, or None.

    A warning's actions are avoided outright. A failed edge's *last* action is avoided only when
    the episode so far is exactly the edge's prefix, i.e. the agent is about to repeat what failed.
    """
    if actions and item.behaviour.avoid:
        return [(a, None, f"avoid ({item.kind.value} {item.id})") for a in actions]
    if actions and item.success is False:
        return [(actions[-1], tuple(actions[:-1]), f"failed before ({item.id})")]
    return None


def candidate_actions(task: Task, obs: Observation) -> list[Candidate]:
    """The actions a screen offers for a task, lexically scored against the goal: tap what is clickable,
    type task values into what is editable, press enter in a filled field (no task rules)."""
    goal = words(task.goal) | {w for v in task.params.values() for w in words(v)}
    param_values = {v.casefold().strip() for v in task.params.values()}
    out: list[Candidate] = []
    for el in obs.elements:
        if not el.enabled:
            continue
        if el.editable:
            out.extend(_typing(task, el))
            if not el.focused:
                out.append(Candidate(Action(kind=ActionKind.TAP, ref=el.ref), 0.1, f"focus {el.label or 'field'}"))
            if el.value:
                out.append(Candidate(Action(kind=ActionKind.KEY, key="enter"), 0.3, "submit with enter"))
        elif el.clickable:
            name = " ".join(p for p in (el.text, el.label) if p)
            score = 0.2 + 2.0 * overlap(name, goal)
            if el.text.casefold().strip() in param_values or el.label.casefold().strip() in param_values:
                score += 1.5
            if el.role is Role.TEXT:
                score -= 0.3
            why = f"tap {el.role.value} {name[:30]!r}"
            out.append(Candidate(Action(kind=ActionKind.TAP, ref=el.ref), score, why))
    return out


def _typing(task: Task, el: UIElement) -> list[Candidate]:
    field_words = words(" ".join((el.label, el.resource_id, el.text)))
    out = []
    for name, value in task.params.items():
        if el.value == value:
            continue
        fit = 1.0 if words(name) & field_words else 0.0
        out.append(Candidate(Action(kind=ActionKind.TYPE, ref=el.ref, text=value), 0.8 + 1.5 * fit,
                             f"type {name} into {el.label or el.resource_id or 'field'}"))
    return out


class ExplorerPolicy:
    """Seeded softmax over lexically scored candidates, steered by recalled behaviour.

    Args:
        seed: Policy seed (combined with the task id and seed, so episodes are reproducible).
        temperature: Softmax temperature; lower is greedier.
        memory_bonus: Added to the candidate a recalled behaviour says to take next.
        avoid_penalty: Subtracted from candidates a warning or failed edge names.
        repeat_penalty: Subtracted from actions already taken this episode.
    """

    def __init__(self, seed: int = 0, temperature: float = 0.35, memory_bonus: float = 4.0,
                 avoid_penalty: float = 6.0, repeat_penalty: float = 2.5) -> None:
        self.seed = seed
        self.temperature = temperature
        self.memory_bonus = memory_bonus
        self.avoid_penalty = avoid_penalty
        self.repeat_penalty = repeat_penalty
        self._rng = random.Random(seed)
        self._coupling = random.Random(zlib.crc32(f"{seed}|coupling".encode()))
        self._numbers: list[float] = []  # the main stream's numbers drawn so far
        self._position = 0  # which of them the next draw uses
        self._advance = 0  # how far the last step moves it (1 a draw, k a skill of k actions, 0 no draw)

    @classmethod
    def from_settings(cls, settings: GuimemSettings, seed: int = 0, **_: object) -> ExplorerPolicy:
        """Build from the process settings (the explorer needs only its seed)."""
        return cls(seed=seed)

    @property
    def name(self) -> str:
        """``explorer``."""
        return "explorer"

    def reset(self, task: Task) -> None:
        """Reseed from (policy seed, task id, task seed); the coupling stream apart from the main one."""
        self._rng = random.Random(zlib.crc32(f"{self.seed}|{task.id}|{task.seed}".encode()))
        self._coupling = random.Random(zlib.crc32(f"{self.seed}|{task.id}|{task.seed}|coupling".encode()))
        self._numbers, self._position, self._advance = [], 0, 0

    def act(self, inp: PolicyInput) -> Decision:
        """Score candidates, apply memory, sample one."""
        cands = {(_key(c.action)): c for c in candidate_actions(inp.task, inp.observation)}
        done = {_key(a) for s in inp.history for a in (s.performed or (s.action,))}
        for k, c in list(cands.items()):
            if k in done:
                cands[k] = Candidate(c.action, c.score - self.repeat_penalty, c.why + ", repeated")
        self._align(inp)
        base = dict(cands)
        self._apply_memory(inp, cands, done)
        if not cands:
            return Decision(action=Action(kind=ActionKind.WAIT), thought="nothing to act on")
        chosen = self._sample(base, cands)
        return Decision(action=chosen.action, thought=chosen.why, intent=chosen.why.split(",")[0])

    def _apply_memory(self, inp: PolicyInput, cands: dict[CandKey, Candidate], done: set[CandKey]) -> None:
        """Prefer what recalled successes say to do next; avoid what warnings and failures name.

        A failure record names an action that failed *from where it was taken*; when a successful
        behaviour that is already under way says to take that action now, the success wins. When one
        record says to take an action from here and another says it failed from here, and neither is
        under way, memory cannot tell them apart (it learned both from screens alike): neither applies.
        """
        obs = inp.observation
        prefer, avoid = self._advice(inp, cands, done)
        avoided = [(key, template, why) for template, prefix, why in avoid
                   if (key := self._key_here(obs, template)) is not None
                   and (prefix is None or self._repeats(obs, prefix, done))]
        under_way = {k for a, _, _, going in prefer if going and (k := self._key_here(obs, a))}
        warned = {key for key, _, _ in avoided} - under_way
        contested = {k for a, _, _, going in prefer if not going and (k := self._key_here(obs, a)) in warned}
        for template, bonus, why, _ in prefer:
            if self._key_here(obs, template) not in contested:
                self._adjust(obs, cands, template, bonus, why)
        for key, template, why in avoided:
            if key in warned and key not in contested:
                self._adjust(obs, cands, template, -self.avoid_penalty, why)

    def _advice(self, inp: PolicyInput, cands: dict[CandKey, Candidate], done: set[CandKey]
                ) -> tuple[list[tuple[Action, float, str, bool]], list[Avoid]]:
        """What the recalled items say: (next action, bonus, why, under way) to take, and what to avoid
        (a skill that can start here is offered as a candidate of its own)."""
        avoid: list[Avoid] = []
        prefer: list[tuple[Action, float, str, bool]] = []
        for item in inp.injection.items:
            actions = [a.bind(inp.task.params) for a in item.behaviour.actions]
            warned = _warned(item, actions)
            if warned is not None:
                avoid += warned
            elif actions and (item.success is True or item.kind is not ItemKind.EDGE):
                progress, nxt = self._next_action(inp.observation, actions, done)
                if nxt is None:
                    continue
                bonus = self.memory_bonus * max(item.score, 0.5)
                if item.kind is ItemKind.SKILL and progress == 0 and item.name:
                    self._offer_skill(inp, cands, item, bonus)
                    continue
                prefer.append((nxt, bonus, f"recalled {item.kind.value} {item.id}", progress > 0))
        return prefer, avoid

    def _key_here(self, obs: Observation, template: Action) -> CandKey | None:
        concrete = self._concrete(obs, template)
        return None if concrete is None else _key(concrete)

    def _offer_skill(self, inp: PolicyInput, cands: dict[CandKey, Candidate], item: InjectedItem,
                     bonus: float) -> None:
        names = {p for a in item.behaviour.actions for p in a.params()}
        if not names <= set(inp.task.params):
            return
        action = Action(kind=ActionKind.RUN_SKILL, skill=item.name, args={n: inp.task.params[n] for n in sorted(names)})
        cands[_key(action)] = Candidate(action, bonus + 0.5, f"run skill {item.name}")

    def _repeats(self, obs: Observation, prefix: tuple[Action, ...], done: set[CandKey]) -> bool:
        """True when what was done so far is exactly ``prefix``."""
        keys = set()
        for a in prefix:
            concrete = self._concrete(obs, a)
            if concrete is None:
                return False
            keys.add(_key(concrete))
        return keys == done

    def _next_action(self, obs: Observation, actions: list[Action], done: set[CandKey]) -> tuple[int, Action | None]:
        """(how many of the behaviour's actions are done, the first one not done that resolves here)."""
        progress = 0
        for a in actions:
            concrete = self._concrete(obs, a)
            if concrete is not None and _key(concrete) in done:
                progress += 1
                continue
            if concrete is not None:
                return progress, a
        return progress, None

    @staticmethod
    def _concrete(obs: Observation, template: Action) -> Action | None:
        if template.selector is None:
            return template if template.kind in (ActionKind.KEY, ActionKind.SCROLL) else None
        res = template.selector.resolve(obs)
        if not res.ok or res.element is None:
            return None
        return template.model_copy(update={"ref": res.element.ref, "selector": None})

    def _adjust(self, obs: Observation, cands: dict[CandKey, Candidate], template: Action, delta: float,
                why: str) -> CandKey | None:
        concrete = self._concrete(obs, template)
        if concrete is None:
            return None
        key = _key(concrete)
        if key not in cands and delta < 0:
            return None  # a warning against an action that is not a candidate here must not make it one
        base = cands.get(key, Candidate(concrete, 0.0, concrete.describe()))
        cands[key] = Candidate(base.action, base.score + delta, f"{base.why}, {why}")
        return key

    def _align(self, inp: PolicyInput) -> None:
        """Move to the main-stream number of this point of the action sequence: one on after a drawn step,
        k on after a skill that performed k actions (none after one that performed nothing)."""
        last = inp.history[-1] if inp.history else None
        if last is not None and last.action.kind is ActionKind.RUN_SKILL and self._advance:
            self._advance = len(last.performed)
        self._position += self._advance
        self._advance = 0

    def _main(self) -> float:
        while len(self._numbers) <= self._position:
            self._numbers.append(self._rng.random())
        self._advance = 1
        return self._numbers[self._position]

    def _softmax(self, cands: dict[CandKey, Candidate]) -> dict[CandKey, float]:
        top = max(c.score for c in cands.values())
        return {k: math.exp((c.score - top) / self.temperature) for k, c in cands.items()}

    def _sample(self, base: dict[CandKey, Candidate], cands: dict[CandKey, Candidate]) -> Candidate:
        """One draw of the main stream picks the memoryless choice; memory may move it (module doc)."""
        if not base:
            return self._draw(self._coupling.random(), cands, self._softmax(cands))
        p = self._softmax(base)
        chosen = self._draw(self._main(), base, p)
        if base == cands:
            return chosen
        q = self._softmax(cands)
        key = _key(chosen.action)
        p_total, q_total = sum(p.values()), sum(q.values())
        p_b, q_b = p[key] / p_total, q[key] / q_total
        if self._coupling.random() * p_b < q_b:
            return cands[key]
        excess = {k: max(0.0, w / q_total - p.get(k, 0.0) / p_total) for k, w in q.items()}
        if not any(excess.values()):
            return cands[key]
        return self._draw(self._coupling.random(), cands, excess)

    @staticmethod
    def _draw(u: float, cands: dict[CandKey, Candidate], weights: dict[CandKey, float]) -> Candidate:
        """``random.choices`` with the random number ``u``: the same draw, bit for bit, as before coupling."""
        keys = list(cands)
        cum = list(itertools.accumulate(weights[k] for k in keys))
        i = bisect.bisect(cum, u * cum[-1], 0, len(keys) - 1)
        return cands[keys[i]]
