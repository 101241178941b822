"""Screen identity across tasks, on screens recorded from real MiniWoB++ pages (tests/data/screens):
a page is the same page whichever task opened it, and different pages stay apart.

The recordings are seed 501 of three sibling tasks (the inbox, and the e-mail opened from it) and the
login form; `page_view` gives their location from the page's structure, never the task id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guimem.embeddings import CachedEmbedder
from guimem.embeddings.e5 import E5Embedder
from guimem.memory.generalise import state_masks, state_text
from guimem.memory.graph import GraphMemory
from guimem.memory.kit import MemoryKit
from guimem.storage.sqlite import SQLiteStore
from guimem.tokens import WhitespaceCounter
from guimem.types import Bounds, Observation, Role, Task, UIElement, page_view

SCREENS = Path(__file__).parent.parent / "data" / "screens"


def screen(name: str) -> tuple[Observation, Task]:
    data = json.loads((SCREENS / f"{name}.json").read_text())
    return Observation.model_validate(data["observation"]), Task.model_validate(data["task"])


@pytest.fixture(scope="module")
def embedder():
    return CachedEmbedder(E5Embedder())


@pytest.fixture
def graph(tmp_path, embedder):
    store = SQLiteStore(tmp_path / "g.sqlite")
    yield GraphMemory(MemoryKit(store, embedder, WhitespaceCounter(), "graph"))
    store.close()


def node(graph: GraphMemory, name: str) -> str:
    obs, task = screen(name)
    return graph._node_for(obs, task, graph.kit.embed_state(obs, task))


def test_no_recorded_screen_is_located_by_its_task():
    for path in SCREENS.glob("*.json"):
        obs, task = screen(path.stem)
        assert task.id not in obs.location, path.stem
        assert obs.location == page_view(obs.elements), "its containers, or nothing on a page that has none"


def test_a_verb_the_task_asks_for_is_not_masked_but_its_names_are():
    _, important = screen("email-inbox-important-501-inbox")
    assert important.params["task"] == "star"
    assert state_masks(important) == [important.params["by"]], "the star button is the page's, not the task's"


def test_sibling_tasks_same_screen_is_one_graph_state(graph):
    inbox = {node(graph, f"{t}-501-inbox") for t in ("email-inbox-forward", "email-inbox-reply",
                                                     "email-inbox-important")}
    opened = {node(graph, f"{t}-501-email") for t in ("email-inbox-forward", "email-inbox-reply")}
    assert len(inbox) == 1, "the inbox is one page whichever task opened it"
    assert len(opened) == 1, "so is the e-mail opened from it"
    assert graph.stats()["nodes"] == 2


def test_different_screens_are_different_graph_states(graph):
    ids = [node(graph, n) for n in ("email-inbox-forward-501-inbox", "email-inbox-forward-501-email",
                                    "login-user-501")]
    assert len(set(ids)) == 3
    obs, task = screen("email-inbox-forward-501-inbox")
    assert state_text(obs, task) != state_text(*screen("email-inbox-forward-501-email"))


def test_the_same_elements_under_other_containers_are_another_page():
    a = Observation(app="miniwob", location=page_view([UIElement(ref="1", text="OK", container="dialog")]))
    b = Observation(app="miniwob", location=page_view([UIElement(ref="1", text="OK", container="form")]))
    assert a.location == "#dialog" and b.location == "#form"
    assert page_view([UIElement(ref=str(i), container=f"title-{i}") for i in range(9)]) == "#title-#"


def test_a_choice_among_alike_controls_follows_the_value_not_the_position():
    from guimem.memory.generalise import generalise_action
    from guimem.types import Action, ActionKind, Selector

    obs, task = screen("email-inbox-important-501-inbox")  # star the e-mail from Livia
    row = next(e for e in obs.elements if e.text == task.params["by"])
    star = min((e for e in obs.elements if e.label == "star"), key=lambda e: abs(e.bounds.y - row.bounds.y))
    recorded = Action(kind=ActionKind.TAP, ref=star.ref, selector=Selector.for_element(star, obs))
    assert recorded.selector.nth is not None and recorded.selector.near == task.params["by"]
    template = generalise_action(recorded, task).selector
    assert template.near == "{by}" and template.nth is None and template.label == "{task}"
    # a sibling task on the same page asks for another sender's e-mail: the star of that row
    for sender in ("Rachelle", "Kalila", "Livia"):
        other = next(e for e in obs.elements if e.text == sender)
        found = template.resolve(obs, {"by": sender, "task": "star"})
        assert found.ok and found.element.label == "star" and abs(found.element.bounds.y - other.bounds.y) < 12
    assert not template.resolve(obs, {"by": "Nobody", "task": "star"}).ok, "no anchor: no guess"
    assert not template.resolve(obs, {"by": "Livia", "task": "delete"}).ok, "another verb names another control"


def _walk(*screens: str):
    """A successful episode of taps through recorded screens (each tap goes from one to the next)."""
    from guimem.types import Action, ActionKind, Outcome, Selector, Step, Trajectory

    _, task = screen(screens[0])
    obs = [screen(n)[0] for n in screens]
    steps = [Step(index=i, observation=o, action=Action(kind=ActionKind.TAP, selector=Selector(text=f"step {i}")))
             for i, o in enumerate(obs[:-1])]
    return Trajectory(task=task, steps=steps, final_observation=obs[-1], outcome=Outcome(success=True, score=1.0))


def test_a_detour_is_cut_from_the_path_and_its_subgoal_is_not_said_to_have_worked():
    from guimem.memory.generalise import direct_path, performed_actions
    from guimem.memory.subgoals import OfflineAnnotator, Segment

    # open the e-mail, wander to another view, come back, then go back to the inbox
    walk = _walk("email-inbox-forward-501-inbox", "email-inbox-forward-501-email", "login-user-501",
                 "email-inbox-forward-501-email", "email-inbox-forward-501-inbox")
    steps = performed_actions(walk)
    assert [p.step for p in direct_path(steps, walk.task)] == [0, 3], "the detour through the other view is cut"
    assert [p.step for p in direct_path(steps[:3], walk.task)] == [0, 1, 2], "the last step ends the episode"
    still = steps[0].__class__(9, steps[0].action, steps[0].before, steps[0].before, False)
    assert direct_path([still], walk.task) == [still], "a step that changes nothing visible is kept"
    annotator, (opened, away, back, home) = OfflineAnnotator(), steps
    assert annotator.annotate(Segment((opened,)), walk, is_last=False).success == "yes"
    assert annotator.annotate(Segment((away,)), walk, is_last=False).success == "uncertain", "a detour"
    assert annotator.annotate(Segment((back,)), walk, is_last=False).success == "uncertain"
    assert annotator.annotate(Segment((home,)), walk, is_last=True).success == "yes"


def test_another_tasks_procedure_can_act_here_only_when_its_steps_bind_and_resolve():
    from guimem.memory.kit import acts_here
    from guimem.types import Action, ActionKind, Behaviour, Role, Selector

    obs, task = screen("email-inbox-reply-501-inbox")
    star = Behaviour(actions=(Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, label="{task}",
                                                                          near="{by}")),))
    starring = task.model_copy(update={"id": "sibling", "params": {"by": "Kalila", "task": "star"}})
    deleting = task.model_copy(update={"id": "other", "params": {"by": "Kalila", "task": "delete"}})
    assert acts_here(star, starring, obs)
    assert not acts_here(star, deleting, obs), "no control this verb names"
    assert not acts_here(star, task.model_copy(update={"params": {"task": "star"}}), obs), "a value it lacks"


def test_steps_that_change_nothing_visible_are_never_a_detour_however_many_come_in_a_row():
    from guimem.memory.generalise import direct_path, performed_actions

    ticks = _walk("login-user-501", "login-user-501", "login-user-501", "email-inbox-forward-501-inbox",
                  "login-user-501", "email-inbox-forward-501-email")
    steps = performed_actions(ticks)
    assert [p.step for p in direct_path(steps, ticks.task)] == [0, 1, 4], "only the trip away and back is cut"
    assert [p.step for p in direct_path(steps[:3], ticks.task)] == [0, 1, 2]


def test_a_quoted_value_that_happens_to_be_a_verb_is_still_a_name():
    login = Task(id="login", app="miniwob", goal='Enter the username "mark" and the password "book".',
                 params={"username": "mark", "password": "book"})
    assert sorted(state_masks(login)) == ["book", "mark"]


def test_a_value_changed_in_a_field_is_progress_not_a_detour():
    """Type "Roma", open the suggestions, pick "Romania": the field reads "filled" before and after, but
    it holds another value, so picking the suggestion is not a way back (the episode needs it)."""
    from guimem.memory.generalise import direct_path, performed_actions
    from guimem.types import Action, ActionKind, Outcome, Selector, Step, Trajectory

    def form(value: str, suggestions: bool) -> Observation:
        els = [UIElement(ref="1", role=Role.TEXTBOX, label="Tags:", editable=True, value=value, clickable=True,
                         bounds=Bounds(x=0, y=0, w=100, h=20))]
        if suggestions:
            els.append(UIElement(ref="2", role=Role.TEXT, text="Romania", clickable=True,
                                 bounds=Bounds(x=0, y=20, w=100, h=20), container="ui-id-1"))
        els.append(UIElement(ref="3", role=Role.BUTTON, text="Submit", clickable=True,
                             bounds=Bounds(x=0, y=40, w=60, h=20)))
        return Observation(app="miniwob", location=page_view(els), elements=tuple(els))

    screens = [form("", False), form("Roma", False), form("Roma", True), form("Romania", False), form("", False)]
    task = Task(id="t", app="miniwob", goal='Enter an item that starts with "Roma".', params={"start": "Roma"})
    steps = [Step(index=i, observation=o, action=Action(kind=ActionKind.TAP, selector=Selector(text=f"s{i}")))
             for i, o in enumerate(screens[:-1])]
    traj = Trajectory(task=task, steps=steps, final_observation=screens[-1], outcome=Outcome(success=True, score=1.0))
    assert [p.step for p in direct_path(performed_actions(traj), task)] == [0, 1, 2, 3]
    back = [form("", False), form("Roma", False), form("Roma", True), form("Roma", False), form("", False)]
    steps = [s.model_copy(update={"observation": o}) for s, o in zip(steps, back, strict=False)]
    closed = traj.model_copy(update={"steps": steps})
    assert [p.step for p in direct_path(performed_actions(closed), task)] == [0, 3], "opening and closing the list is"


def test_a_procedure_whose_values_do_not_all_bind_is_not_offered_even_where_a_click_would_resolve():
    from guimem.memory.kit import acts_here
    from guimem.types import Action, ActionKind, Behaviour, Role, Selector

    obs, task = screen("login-user-501")
    login = Behaviour(actions=(
        Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="username"), text="{username}"),
        Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Login"))))
    assert acts_here(login, task, obs)
    assert not acts_here(login, task.model_copy(update={"params": {}}), obs), "it would only press Login"


def test_a_detour_is_told_by_its_position_not_by_the_indices_or_the_episode_id_a_trajectory_states():
    from guimem.memory.generalise import performed_actions
    from guimem.memory.subgoals import OfflineAnnotator, Segment

    honest = _walk("email-inbox-forward-501-inbox", "email-inbox-forward-501-email", "login-user-501",
                   "email-inbox-forward-501-email", "email-inbox-forward-501-inbox")
    # a hostile writer: every step says index 0, and the detour's tap is the same as the path's last one
    steps = [s.model_copy(update={"index": 0}) for s in honest.steps]
    steps[1] = steps[1].model_copy(update={"action": steps[3].action})
    hostile = honest.model_copy(update={"steps": tuple(steps)})
    away = performed_actions(hostile)[1]
    assert OfflineAnnotator().annotate(Segment((away,)), hostile, is_last=False).success == "uncertain"
    # another trajectory under the same episode id, annotated first by the same annotator, says nothing here
    straight = _walk("email-inbox-forward-501-inbox", "email-inbox-forward-501-email", "login-user-501")
    straight = straight.model_copy(update={"episode_id": honest.episode_id, "steps": (
        straight.steps[0], straight.steps[1].model_copy(update={"action": honest.steps[1].action}))})
    annotator = OfflineAnnotator()
    assert annotator.annotate(Segment((performed_actions(straight)[1],)), straight, is_last=True).success == "yes"
    assert annotator.annotate(Segment((performed_actions(honest)[1],)), honest, is_last=False).success == "uncertain"
