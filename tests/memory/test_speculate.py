"""Speculative screen embedding (`Speculating`, `Previewing`): recall's work moves into the env's settle wait,
and what is recalled never changes — compared step by step with and without it."""

from __future__ import annotations

import threading

from guimem.agents.explorer import ExplorerPolicy
from guimem.embeddings import CachedEmbedder
from guimem.embeddings.hashing import HashingEmbedder
from guimem.envs.base import StartMemo, StepLimit, Transition
from guimem.harness.episode import EpisodeSettings, run_episode
from guimem.memory.base import RecallQuery, Speculating
from guimem.memory.factory import open_memory
from guimem.settings import GuimemSettings
from guimem.testing import FormEnv
from guimem.types import Action, ActionKind, AheadUse, Observation, Task
from tests.memory.conftest import steps_seen

METHODS = ("graph", "skills", "stack")


class PreviewingForm(FormEnv):
    """A form env that previews, in each step, the screen it will return — except every third step, where
    the preview is the screen before the action (the page had not settled yet: speculation misses)."""

    def __init__(self) -> None:
        super().__init__()
        self.callback = None
        self.previews = 0
        self._last: Observation | None = None

    def preview_to(self, callback):
        self.callback = callback

    def reset(self, task: Task) -> Observation:
        self._last = super().reset(task)
        return self._last

    def step(self, action: Action) -> Transition:
        before = self._last
        result = super().step(action)
        if self.callback is not None:
            self.previews += 1
            self.callback(before if self.previews % 3 == 0 and before is not None else result.observation)
        self._last = result.observation
        return result


class ForeseeingForm(FormEnv):
    """A form env that previews no step but guesses each reset's start from the last reset of the same task
    (`ForeseeingStart`) — except for seed 3, whose guess is seed 1's first screen, and seed 2, whose guess is its
    screen for another goal (two wrong guesses)."""

    def __init__(self) -> None:
        super().__init__()
        self.starts = StartMemo()
        self.guesses = 0

    def reset(self, task: Task) -> Observation:
        obs = super().reset(task)
        self.starts.remember(task, self.task, obs)
        return obs

    def expected_start(self, task: Task) -> tuple[Task, Observation] | None:
        guess = self.starts.expected(task)
        other = self.starts.expected(task.model_copy(update={"seed": 1}))
        if guess is not None and task.seed == 3 and other is not None:
            guess = (guess[0], other[1])
        if guess is not None and task.seed == 2:  # the right screen for another goal
            guess = (guess[0].model_copy(update={"goal": guess[0].goal + " twice"}), guess[1])
        self.guesses += guess is not None
        return guess


class FailingGuess(FormEnv):
    """A form env whose guess of the start fails."""

    def expected_start(self, task: Task) -> tuple[Task, Observation] | None:
        raise RuntimeError("no guess today")


def _run(tmp_path, method: str, speculate: bool, env_class: type[FormEnv] = PreviewingForm, wrap=None):
    settings = GuimemSettings()
    embedder = CachedEmbedder(HashingEmbedder(settings.embedder.dim))
    name = f"{method}-{speculate}-{env_class.__name__}-{'wrapped' if wrap else 'plain'}"
    memory = open_memory(method, str(tmp_path / f"{name}.sqlite"), settings, embedder=embedder, env_factory=FormEnv)
    inner = env_class()
    env = wrap(inner) if wrap else inner
    trajectories = []
    try:
        for round_index in range(3):
            batch = []
            for seed in (1, 2, 3):
                task = Task(id="form", goal="", app="form", seed=seed, max_steps=6)
                runner = getattr(memory, "run_skill", None)
                batch.append(run_episode(env, ExplorerPolicy(seed=seed + 7 * round_index), task, memory=memory,
                                         settings=EpisodeSettings(max_steps=6, speculate=speculate),
                                         skill_runner=runner, round_index=round_index, slot=seed - 1))
            memory.commit_round(round_index, batch)
            trajectories.extend(batch)
    finally:
        memory.close()
        embedder.close()
    return trajectories, embedder, inner, memory


def test_the_injections_are_the_same_with_and_without_speculation(tmp_path):
    for method in METHODS:
        plain, plain_embedder, plain_env, plain_memory = _run(tmp_path, method, speculate=False)
        ahead, ahead_embedder, ahead_env, ahead_memory = _run(tmp_path, method, speculate=True)
        assert plain_env.previews == 0 and plain_embedder.prefetched == 0
        assert steps_seen(ahead) == steps_seen(plain), method
        assert [t.outcome.success for t in ahead] == [t.outcome.success for t in plain]
        assert any(s.injection.items for t in ahead for s in t.steps), f"{method} recalled nothing: nothing is tested"
        assert ahead_env.previews > 0 and ahead_env.callback is None  # the episode took its callback back
        assert ahead_embedder.prefetched > 0, f"{method} never used a speculative vector"
        # the whole recall is done ahead, taken only on a previewed screen
        assert ahead_memory.recalled_ahead > 0 and plain_memory.recalled_ahead == 0, method
        # and the traces say which steps took it
        uses = [s.recall_ahead for t in ahead for s in t.steps]
        assert sum(u in (AheadUse.TAKEN, AheadUse.WAITED) for u in uses) == ahead_memory.recalled_ahead, method
        assert {s.recall_ahead for t in plain for s in t.steps} == {AheadUse.NONE}, method
        assert all("ahead_wait" in s.timings_ms for t in ahead for s in t.steps if s.recall_ahead is AheadUse.WAITED)


def test_a_foreseen_first_screen_is_recalled_ahead_and_what_is_recalled_never_changes(tmp_path):
    """Before each reset the env guesses the start from the last reset of the same task: the first step's recall
    is done ahead and taken when the guess was right (nothing previews a step here, so every recall taken ahead
    is a first step's), and a wrong guess (seed 3's screen, seed 2's goal) is recalled afresh: the steps are the same
    as without it."""
    for method in METHODS:
        plain, _, plain_env, plain_memory = _run(tmp_path, method, speculate=False, env_class=ForeseeingForm)
        ahead, _, ahead_env, ahead_memory = _run(tmp_path, method, speculate=True, env_class=ForeseeingForm)
        assert plain_env.guesses == 0 and ahead_env.guesses == 6  # seeds 1-3 of rounds 1 and 2
        assert steps_seen(ahead) == steps_seen(plain), method
        assert any(t.steps[0].injection.items for t in ahead[3:]), f"{method}: no first step recalled: nothing tested"
        # the right guesses only (seed 1 of rounds 1 and 2), each taken once
        assert ahead_memory.recalled_ahead == 2 and plain_memory.recalled_ahead == 0, method


def test_a_guess_that_fails_leaves_the_episode_as_it_would_be_without_it(tmp_path, caplog):
    for method in METHODS:
        plain, *_ = _run(tmp_path, method, speculate=False, env_class=FormEnv)
        failing, *_ = _run(tmp_path, method, speculate=True, env_class=FailingGuess)
        assert steps_seen(failing) == steps_seen(plain), method
        assert all(t.outcome.infra is None for t in failing)
    assert "no guess today" in caplog.text


def test_the_stack_recalls_a_foreseen_start_for_the_slot_the_episode_will_have(tmp_path):
    """A guess before the reset knows the episode's trial slot (`SpeculatingQueries`), which a step's preview
    does not: the stack's first recall takes it, whatever slot the memory's last recall had."""
    from guimem.memory.base import SpeculatingQueries

    settings = GuimemSettings()
    embedder = CachedEmbedder(HashingEmbedder(settings.embedder.dim))
    memory = open_memory("stack", str(tmp_path / "stack.sqlite"), settings, embedder=embedder, env_factory=FormEnv)
    env = ForeseeingForm()
    try:
        assert isinstance(memory, SpeculatingQueries)
        batch = [run_episode(env, ExplorerPolicy(seed=seed), Task(id="form", goal="", app="form", seed=seed,
                                                                  max_steps=6), memory=memory,
                             settings=EpisodeSettings(max_steps=6), slot=seed - 1, skill_runner=memory.run_skill)
                 for seed in (1, 2)]
        memory.commit_round(0, batch)
        before = memory.recalled_ahead
        # slot 0 again, where the memory's last recall was slot 1's
        again = run_episode(env, ExplorerPolicy(seed=1), Task(id="form", goal="", app="form", seed=1, max_steps=6),
                            memory=memory, settings=EpisodeSettings(max_steps=6), slot=0, round_index=1,
                            skill_runner=memory.run_skill)
        assert again.steps[0].injection.items, "the stack recalled nothing: nothing is tested"
        assert memory.recalled_ahead == before + 1
        fresh = memory.recall(RecallQuery(task=again.task, observation=env.reset(again.task.model_copy(
            update={"goal": ""})), slot=0))  # the same screen, recalled now for slot 0
        assert again.steps[0].injection.text == fresh.text and again.steps[0].injection.items == fresh.items
    finally:
        memory.close()
        embedder.close()


def test_a_start_memo_guesses_from_the_same_task_only_and_forgets_the_oldest():
    memo = StartMemo(size=2)
    env = FormEnv()
    tasks = [Task(id="form", goal="", app="form", seed=s, max_steps=6) for s in (1, 2, 3)]
    for task in tasks:
        memo.remember(task, task.model_copy(update={"goal": f"goal {task.seed}"}), env.reset(task))
    assert memo.expected(tasks[0]) is None  # the oldest of three, forgotten
    started, screen = memo.expected(tasks[2]) or (None, None)
    assert started is not None and started.goal == "goal 3" and screen == env.reset(tasks[2])
    assert memo.expected(tasks[2].model_copy(update={"max_steps": 7})) is None  # another task asked
    screen = env.reset(tasks[0])
    small = StartMemo(size=10, elements=2 * len(screen.elements))
    for task in tasks:
        small.remember(task, task, screen)
    assert [small.expected(t) is not None for t in tasks] == [False, True, True]  # the elements held are bounded
    small.remember(tasks[1], tasks[1], screen.model_copy(update={"elements": screen.elements * 3}))
    assert small.expected(tasks[1]) is None and small.expected(tasks[2]) is not None  # too big: not kept


def test_graph_skills_and_stack_speculate_and_a_step_limit_forwards_previews(tmp_path):
    settings = GuimemSettings()
    for method in METHODS:
        embedder = CachedEmbedder(HashingEmbedder(settings.embedder.dim))
        memory = open_memory(method, str(tmp_path / f"{method}.sqlite"), settings, embedder=embedder)
        try:
            assert isinstance(memory, Speculating), method
        finally:
            memory.close()
    env = PreviewingForm()
    seen: list[Observation] = []
    limited = StepLimit(env, 5)
    limited.preview_to(seen.append)
    obs = limited.reset(Task(id="form", goal="", app="form", seed=1, max_steps=5))
    result = limited.step(Action(kind=ActionKind.TYPE, ref=obs.elements[0].ref, text="x"))
    assert seen == [result.observation]
    limited.preview_to(None)
    assert env.callback is None
    foreseeing = ForeseeingForm()
    task = Task(id="form", goal="", app="form", seed=4, max_steps=5)
    assert StepLimit(foreseeing, 5).expected_start(task) is None
    first = StepLimit(foreseeing, 5).reset(task)
    assert StepLimit(foreseeing, 5).expected_start(task) == (foreseeing.task, first)
    assert StepLimit(env, 5).expected_start(task) is None  # the wrapped env guesses nothing


def test_drift_and_poison_wrappers_preview_what_they_will_show():
    from guimem.envs.drift import DriftEnv
    from guimem.envs.poison import PoisonedEnv

    for wrap in (lambda e: DriftEnv(e, "v1", frozenset({"relabel", "reorder"})), lambda e: PoisonedEnv(e)):
        inner = PreviewingForm()
        env = wrap(inner)
        seen: list[Observation] = []
        env.preview_to(seen.append)
        obs = env.reset(Task(id="form", goal="", app="form", seed=2, max_steps=5))
        result = env.step(Action(kind=ActionKind.TYPE, ref=obs.elements[-1].ref, text="x"))
        assert seen == [result.observation] and seen[0] != inner._last  # shown as the wrapper shows it
        env.preview_to(None)
        assert inner.callback is None


def test_the_stack_recalls_ahead_for_the_episodes_trial_slot_only(tmp_path, monkeypatch):
    """The stack's answer depends on the episode's trial slot (trial or control arm), which a preview does not
    carry: a recall ahead is for the slot of the last recall, and taken only by a recall of that slot."""
    from guimem.memory.base import RecallQuery
    from guimem.memory.stack import StackMemory
    from guimem.types import Injection

    settings = GuimemSettings()
    embedder = CachedEmbedder(HashingEmbedder(settings.embedder.dim))
    memory = open_memory("stack", str(tmp_path / "stack.sqlite"), settings, embedder=embedder)
    assert isinstance(memory, StackMemory)
    monkeypatch.setattr(type(memory.lifecycle), "has_items", property(lambda self: True))
    monkeypatch.setattr(memory, "_recall", lambda q: (Injection(method="stack", note=f"slot {q.slot}"), {}))
    env = PreviewingForm()
    task = Task(id="form", goal="", app="form", seed=1, max_steps=6)
    screen = env.reset(task)
    try:
        for slot in (0, 1, 1, 2, 0):
            assert memory.recall(RecallQuery(task=task, observation=screen, slot=slot)).note == f"slot {slot}"
            memory.speculate(task, screen)  # the preview of the episode's next step (this slot's)
            taken = memory.recalled_ahead
            assert memory.recall(RecallQuery(task=task, observation=screen, slot=slot)).note == f"slot {slot}"
            assert memory.recalled_ahead == taken + 1
    finally:
        memory.close()
        embedder.close()


def test_a_round_ended_outside_commit_round_forgets_what_was_recalled_ahead(tmp_path):
    """`end_round` is public (check_memory calls it): what it learns changes recall at once, so an answer recalled
    ahead before it is not taken after it, for every method that recalls ahead."""
    from guimem.memory.base import RecallQuery

    for method in METHODS:
        settings = GuimemSettings()
        embedder = CachedEmbedder(HashingEmbedder(settings.embedder.dim))
        memory = open_memory(method, str(tmp_path / f"{method}-direct.sqlite"), settings, embedder=embedder,
                             env_factory=FormEnv)
        env = FormEnv()
        runner = getattr(memory, "run_skill", None)

        def run(seed: int, round_index: int, env=env, memory=memory, runner=runner):
            task = Task(id="form", goal="", app="form", seed=seed, max_steps=6)
            return run_episode(env, ExplorerPolicy(seed=seed), task, memory=memory, skill_runner=runner,
                               settings=EpisodeSettings(max_steps=6, speculate=False), round_index=round_index)
        try:
            memory.commit_round(0, [run(seed, 0) for seed in (1, 2, 3)])
            for trajectory in [run(seed, 1) for seed in (4, 5, 6, 7, 8)]:
                memory.learn(trajectory)
            task = Task(id="form", goal="", app="form", seed=1, max_steps=6)
            query = RecallQuery(task=task, observation=env.reset(task))
            memory.recall(query)
            memory.speculate(task, query.observation)  # recalled ahead, then the round ends
            memory.end_round()
            taken = memory.recalled_ahead
            memory.recall(query)
            assert memory.recalled_ahead == taken, method
        finally:
            memory.close()
            embedder.close()


def test_a_newer_preview_drops_an_older_ones_recall_not_started_and_close_forgets_what_was_kept():
    from guimem.memory.ahead import RecallAhead

    ahead = RecallAhead()
    ran: list[str] = []
    task = Task(id="form", goal="", app="form", seed=1, max_steps=6)
    screens = [FormEnv().reset(task.model_copy(update={"seed": s})) for s in (1, 2, 3)]
    blocker = threading.Event()
    ahead.recall_ahead(task, screens[0], lambda: blocker.wait(5) and ran.append("first"))
    ahead.recall_ahead(task, screens[1], lambda: ran.append("second"))  # superseded before it started
    ahead.recall_ahead(task, screens[2], lambda: ran.append("third") or "third")
    blocker.set()
    assert ahead.recalled(task, screens[2], lambda: "now") == "third"
    assert ran == ["first", "third"] and ahead.recalls_taken == 1
    ahead.close()
    assert ahead.recalled(task, screens[2], lambda: "after close") == "after close"  # nothing kept after close


def test_skills_count_as_shown_every_skill_picked_even_one_the_defences_withhold(tmp_path, monkeypatch):
    """As before recall ran ahead: the skills MMR picked are counted as shown, whatever the injection then kept."""
    from guimem.memory.base import RecallQuery
    from guimem.types import Injection

    settings = GuimemSettings()
    embedder = CachedEmbedder(HashingEmbedder(settings.embedder.dim))
    memory = open_memory("skills", str(tmp_path / "skills.sqlite"), settings, embedder=embedder, env_factory=FormEnv)
    env = FormEnv()
    try:
        batch = [run_episode(env, ExplorerPolicy(seed=seed), Task(id="form", goal="", app="form", seed=seed,
                                                                  max_steps=6), memory=memory,
                             settings=EpisodeSettings(max_steps=6), skill_runner=memory.run_skill)
                 for seed in (1, 2, 3, 4)]
        memory.commit_round(0, batch)
        found = [(t.task, o) for t in batch for o in t.observations if memory._recall(t.task, o)[1]]
        assert found, "no screen where a skill starts: nothing is tested"
        task, screen = found[0]
        picked = memory._recall(task, screen)[1]
        monkeypatch.setattr(memory.kit, "injection", lambda method, *a, **k: Injection(method=method))  # all withheld
        assert not memory.recall(RecallQuery(task=task, observation=screen)).items
        assert memory._shown == dict.fromkeys(picked, 1)
    finally:
        memory.close()
        embedder.close()


def _wrappers():
    from guimem.envs.drift import DriftEnv
    from guimem.envs.poison import PoisonedEnv

    return {"drift v0": lambda e: DriftEnv(e, "v0"),
            "drift v2 with its notice": lambda e: DriftEnv(e, "v2", frozenset({"relabel", "reorder", "interstitial"})),
            "poison": lambda e: PoisonedEnv(e)}


def test_drift_and_poison_wrappers_foresee_the_start_as_they_will_show_it():
    """The wrapper's guess is the wrapped env's, rewritten or planted as the next reset will show it (the rewrite
    and the attack are drawn from the task and its first screen): equal to what that reset returns."""
    for name, wrap in _wrappers().items():
        env = wrap(ForeseeingForm())
        task = Task(id="form", goal="", app="form", seed=4, max_steps=5)
        assert env.expected_start(task) is None, name  # never started
        first = env.reset(task)
        guess = env.expected_start(task)
        again = env.reset(task)
        assert guess == (env.task, again) and again == first, name
        assert wrap(PreviewingForm()).expected_start(task) is None, name  # the wrapped env guesses nothing
    from guimem.envs.drift import NOTICE_CONTAINER

    drifted = _wrappers()["drift v2 with its notice"](ForeseeingForm())
    task = Task(id="form", goal="", app="form", seed=5, max_steps=5)
    bare = drifted.inner.reset(task)
    shown = drifted.reset(task)
    guess = drifted.expected_start(task)
    assert guess is not None and guess[1] == shown != bare  # rewritten, under the notice
    assert shown.elements[0].container == NOTICE_CONTAINER


def test_a_drifted_or_poisoned_episode_recalls_its_foreseen_first_step_ahead(tmp_path):
    """Behind drift and poison wrappers (`Workbench` wraps every env of a drift run) the right guesses are taken
    ahead as on the bare env, and every step is the same as without speculation."""
    for name, wrap in _wrappers().items():
        for method in METHODS:
            plain, _, _, plain_memory = _run(tmp_path, method, False, ForeseeingForm, wrap)
            ahead, _, ahead_env, ahead_memory = _run(tmp_path, method, True, ForeseeingForm, wrap)
            assert steps_seen(ahead) == steps_seen(plain), (name, method)
            assert any(t.steps[0].injection.items for t in ahead[3:]), f"{name} {method}: nothing recalled"
            assert ahead_env.guesses == 6 and plain_memory.recalled_ahead == 0, (name, method)
            # the right guesses (seed 1 of rounds 1 and 2); under the notice a refused action leaves the same
            # screen, whose answer kept from ahead is taken again
            taken = ahead_memory.recalled_ahead
            assert taken >= 2 if "notice" in name else taken == 2, (name, method, taken)
