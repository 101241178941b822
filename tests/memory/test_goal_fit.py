"""An item whose actions decided a goal's outcome is advice only where the goal asks for the same thing.

The tap on the trash icon that finished a delete task is no advice for a reply task on the same e-mail; the
tap that opened the e-mail on the way there is. Recorded MiniWoB++ screens (tests/data/screens)."""

from __future__ import annotations

import pytest

from guimem.memory.base import RecallQuery
from guimem.memory.generalise import TaskScreen, field_values, goal_verb, serves_goal, verbs_conflict
from guimem.memory.kit import fits_goal, holds_here
from guimem.memory.skills.induce import induce
from guimem.memory.steer.contract import OfflineContractParser
from guimem.memory.steer.propose import OfflineProposer
from guimem.memory.subgoals import OfflineAnnotator, Segment
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    ActionKind,
    Behaviour,
    InjectedItem,
    ItemKind,
    Observation,
    Outcome,
    Role,
    Selector,
    Step,
    Task,
    Trajectory,
    UIElement,
    page_view,
)
from tests.memory.test_screen_identity import embedder, graph, screen  # noqa: F401  (fixtures)

OPEN = Action(kind=ActionKind.TAP, selector=Selector(role=Role.TEXT, text="Livia"))
TRASH = Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, label="trash"))
DELETE = Task(id="email-inbox-delete", app="miniwob", params={"by": "Livia"}, seed=501,
              goal="Find the email by Livia and click the trash icon to delete it.")


def _reply() -> Task:
    return screen("email-inbox-reply-501-inbox")[1]


def _episode(task: Task, success: bool = True) -> Trajectory:
    """Open Livia's e-mail from the inbox, then tap the trash icon (which ends the episode)."""
    inbox, email = screen("email-inbox-reply-501-inbox")[0], screen("email-inbox-reply-501-email")[0]
    steps = [Step(index=0, observation=inbox, action=OPEN), Step(index=1, observation=email, action=TRASH)]
    return Trajectory(task=task, steps=steps, final_observation=inbox,
                      outcome=Outcome(success=success, score=1.0 if success else -1.0))


def test_a_goal_s_verb_is_what_it_asks_to_do_and_verbs_conflict_only_when_both_say_what():
    assert goal_verb(DELETE) == "delete"
    assert goal_verb(_reply()) == "reply"
    assert goal_verb(screen("email-inbox-important-501-inbox")[1]) == "star", "the task value is the verb"
    assert goal_verb(Task(id="t", app="a", goal="Click the button labelled OK.")) == "click", "generic, alone"
    assert goal_verb(Task(id="t", app="a", goal="Say hello.")) == ""
    assert verbs_conflict("delete", "reply") and verbs_conflict("forward", "reply")
    assert not verbs_conflict("click", "delete"), "a generic verb says how, not what"
    assert not verbs_conflict("", "reply") and not verbs_conflict("reply", "reply")


def test_a_verb_that_says_what_serves_only_a_goal_that_says_it():
    close = Task(id="c", app="miniwob", goal='Close the dialog box by clicking the "x".')
    press = Task(id="p", app="miniwob", goal='Click the button in the dialog box labeled "OK".', params={"t": "OK"})
    assert goal_verb(close) == "close" and goal_verb(press) == "click"
    assert not serves_goal("close", press), "closing a dialog finished another goal than pressing its OK"
    assert serves_goal("close", close) and serves_goal("click", close), "a generic verb says how"
    assert serves_goal("delete", DELETE) and not serves_goal("delete", _reply())
    assert serves_goal("delete", Task(id="n", app="miniwob", goal="Say hello.")), "no verb: nothing to judge by"


def test_only_the_step_that_decided_the_outcome_serves_the_goal_s_verb():
    traj = _episode(DELETE)
    from guimem.memory.generalise import performed_actions
    opened, trashed = performed_actions(traj)
    annotator = OfflineAnnotator()
    assert annotator.annotate(Segment((opened,)), traj, is_last=False).behaviour.serves == ""
    assert annotator.annotate(Segment((trashed,)), traj, is_last=True).behaviour.serves == "delete"
    windows = {tuple(a.describe() for a in c.program.steps): c.program.serves for c in induce(traj, (1, 2))}
    assert sorted(windows.values()) == ["", "delete", "delete"], "the windows that end the episode serve it"
    assert all(s == "delete" for k, s in windows.items() if "trash" in k[-1])


def test_a_warning_serves_the_goal_only_when_its_action_ended_the_failed_episode():
    proposer = OfflineProposer(OfflineContractParser())
    [ended] = [k for k in proposer.propose(_episode(DELETE, success=False), 0) if k.kind == "warning"]
    assert ended.behaviour.serves == "delete"
    failed = _episode(DELETE, success=False)
    gone = ActionError(code=ActionErrorCode.NO_SUCH_ELEMENT, message="gone")
    last = failed.steps[-1].model_copy(update={"error": gone})
    errored = failed.model_copy(update={"steps": (*failed.steps[:-1], last)})
    [mid] = [k for k in proposer.propose(errored, 0) if k.kind == "warning"]
    assert "trash" in mid.behaviour.actions[0].describe(), "the last action is the one that errored"
    assert mid.behaviour.serves == "", "an action that errored failed whatever the goal, even the last one"


def test_fits_goal_reads_the_verb_an_item_serves():
    def item(serves: str) -> InjectedItem:
        return InjectedItem(id=serves or "way", kind=ItemKind.EDGE, text="x", success=True,
                            behaviour=Behaviour(actions=(TRASH,), serves=serves))
    assert fits_goal(item(""), _reply()) and fits_goal(item("reply"), _reply())
    assert not fits_goal(item("delete"), _reply())
    assert fits_goal(item("delete"), DELETE)


@pytest.mark.parametrize("exclude", [False, True])
def test_a_sibling_s_finishing_step_is_withheld_and_its_way_there_is_offered(graph, exclude):  # noqa: F811
    graph.settings = graph.settings.model_copy(update={"exclude_source_task": exclude})
    graph.learn(_episode(DELETE))
    graph.end_round()
    reply = _reply()
    inbox, email = screen("email-inbox-reply-501-inbox")[0], screen("email-inbox-reply-501-email")[0]
    on_inbox = graph.recall(RecallQuery(task=reply, observation=inbox))
    assert [i.behaviour.actions[0].selector.text for i in on_inbox.items] == ["{by}"], "open the e-mail: offered"
    on_email = graph.recall(RecallQuery(task=reply, observation=email))
    assert on_email.items == () and len(on_email.unfit) == 1, "the trash tap that finished a delete task"
    assert on_email.withheld == (), "not a trial's control"
    same = graph.recall(RecallQuery(task=DELETE.model_copy(update={"id": "email-inbox", "seed": 7}),
                                    observation=email))
    assert len(same.items) == 1, "another task whose goal asks to delete is offered it"


def _tags(value: str) -> Observation:
    return Observation(app="miniwob", location=page_view([]), elements=(
        UIElement(ref="1", role=Role.TEXTBOX, label="Tags:", value=value, editable=True, enabled=True),
        UIElement(ref="2", role=Role.BUTTON, text="Submit", clickable=True, enabled=True)))


def test_a_step_learned_with_a_picked_value_is_no_advice_where_the_task_s_value_was_only_typed(graph):  # noqa: F811
    """An autocomplete: type the start, pick the suggestion, submit. The screen with the suggestion picked
    and the screen with the start only typed read alike; submitting is advice only on the first."""
    task = Task(id="autocomplete", app="miniwob", goal='Enter an item that starts with "Roma".',
                params={"start": "Roma"}, seed=1)
    submit = Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Submit"))
    steps = [Step(index=0, observation=_tags("Romania"), action=submit)]
    traj = Trajectory(task=task, steps=steps, final_observation=_tags("Romania"), outcome=Outcome(success=True))
    from guimem.memory.generalise import performed_actions
    learned = OfflineAnnotator().annotate(Segment(tuple(performed_actions(traj))), traj, is_last=True).behaviour
    assert learned.fields == {"Tags:": "*"}, "a value the task did not give"
    graph.learn(traj)
    graph.end_round()
    other = task.model_copy(update={"seed": 2, "params": {"start": "Bra"},
                                    "goal": 'Enter an item that starts with "Bra".'})
    picked = graph.recall(RecallQuery(task=other, observation=_tags("Brazil")))
    assert len(picked.items) == 1 and picked.unfit == ()
    typed = graph.recall(RecallQuery(task=other, observation=_tags("Bra")))
    assert typed.items == () and len(typed.unfit) == 1, "only the task's value typed: not the state it was learned in"
    empty = graph.recall(RecallQuery(task=other, observation=_tags("")))
    assert empty.items == ()


def test_a_field_holding_the_task_s_value_binds_by_placeholder():
    task = Task(id="t", app="miniwob", goal="Type Roma and submit.", params={"start": "Roma"})
    assert field_values(_tags("Roma"), task) == {"Tags:": "{start}"}
    item = InjectedItem(id="s", kind=ItemKind.EDGE, text="submit", success=True,
                        behaviour=Behaviour(actions=(), fields={"Tags:": "{start}"}))
    other = Task(id="u", app="miniwob", goal="Type Bra and submit.", params={"start": "Bra"})
    assert holds_here(item, TaskScreen(other, _tags("Bra")))
    assert not holds_here(item, TaskScreen(other, _tags("Brazil")))
    assert not holds_here(item, TaskScreen(other, _tags("Roma"))), "another task's value is not this task's"


def test_fields_that_share_a_name_hold_when_one_of_them_does():
    """Masking digits gives numbered fields one name; the one that holds the value is enough."""
    task = Task(id="t", app="miniwob", goal="Type Roma into a field.", params={"start": "Roma"})
    def two(first: str, second: str) -> Observation:
        return Observation(app="miniwob", location=page_view([]), elements=(
            UIElement(ref="1", role=Role.TEXTBOX, resource_id="field1", value=first, editable=True, enabled=True),
            UIElement(ref="2", role=Role.TEXTBOX, resource_id="field2", value=second, editable=True, enabled=True)))
    learned = field_values(two("Roma", ""), task)
    assert learned == {"field#": "{start}"}
    item = InjectedItem(id="s", kind=ItemKind.EDGE, text="x", success=True,
                        behaviour=Behaviour(actions=(), fields=learned))
    assert holds_here(item, TaskScreen(task, two("Roma", ""))), "the screen it was learned on"
    assert holds_here(item, TaskScreen(task, two("", "Roma")))
    assert not holds_here(item, TaskScreen(task, two("", "")))
    assert field_values(two("   ", ""), task) == {}, "white space is no value"


def test_a_placeholder_too_long_to_store_reads_as_another_value_and_learning_goes_on():
    name = "p" * 70
    task = Task(id="t", app="miniwob", goal="Type Roma.", params={name: "Roma"})
    assert field_values(_tags("Roma"), task) == {"Tags:": "*"}
    steps = [Step(index=0, observation=_tags("Roma"), action=Action(kind=ActionKind.KEY, key="enter"))]
    traj = Trajectory(task=task, steps=steps, final_observation=_tags("Roma"), outcome=Outcome(success=True))
    from guimem.memory.generalise import performed_actions
    OfflineAnnotator().annotate(Segment(tuple(performed_actions(traj))), traj, is_last=True)


@pytest.mark.parametrize("bad", [{"serves": "<b>"}, {"serves": "x" * 40}, {"fields": {"f": "ignore all"}},
                                 {"fields": {"f": "{" + "p" * 70 + "}"}}])
def test_a_stored_behaviour_s_verb_and_fields_are_validated(bad):
    from pydantic import ValidationError
    with pytest.raises(ValidationError):
        Behaviour.model_validate({"actions": [], **bad})
    assert Behaviour.model_validate({"actions": []}).serves == "", "a record written before them loads"


ENTER = Action(kind=ActionKind.KEY, key="enter")
TAP_TT = Action(kind=ActionKind.TAP, selector=Selector(role=Role.TEXTBOX, label="tt", resource_id="tt"))


def test_what_another_task_learned_is_withheld_where_none_of_its_targets_is_on_screen(graph):  # noqa: F811
    """A procedure learned on focus-text ("press enter, tap the textbox tt") recalled by similarity on
    focus-text-2 or an autocomplete would push only its key press: withheld there, offered on its own page; on
    its own task, where its target is gone it is stale (#33), never offered as if valid."""
    proc = InjectedItem(id="p", kind=ItemKind.PROCEDURE, text="To focus: 1) key(enter); 2) tap(textbox tt)",
                        success=True, sources=("focus-text",), behaviour=Behaviour(actions=(ENTER, TAP_TT)))
    for name in ("focus-text-2-501", "use-autocomplete-nodelay-501"):
        obs, task = screen(name)
        got = graph.kit.injection("m", "t", [proc], observation=obs, task=task)
        assert got.items == () and got.unfit == ("p",), name
    obs, task = screen("focus-text-501")
    sibling = task.model_copy(update={"id": "focus-text-3"})
    assert graph.kit.injection("m", "t", [proc], observation=obs, task=sibling).items != (), "its target is here"
    other, _ = screen("focus-text-2-501")
    own = graph.kit.injection("m", "t", [proc], observation=other, task=task)
    assert own.items == () and own.stale == ("p",) and own.unfit == (), "its own task: stale where its target is gone"
    keys = proc.model_copy(update={"behaviour": Behaviour(actions=(ENTER,))})
    assert graph.kit.injection("m", "t", [keys], observation=other, task=sibling).items != (), "nothing targeted"
