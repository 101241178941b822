"""Parameters bind by their role in the goal: a skill or subgoal learned on one task acts on a sibling whose
extractor names the same values otherwise, and stays unbound where no value has that role."""

from __future__ import annotations

from guimem.agents.base import PolicyInput
from guimem.agents.explorer import ExplorerPolicy
from guimem.memory.program import SkillProgram, can_start
from guimem.memory.roles import binding, goal_roles, rebind
from guimem.types import Action, ActionKind, Behaviour, InjectedItem, Injection, ItemKind, Role, Selector, Task
from tests.memory.test_screen_identity import screen

FORWARD = Task(id="forward", app="miniwob", goal="Find the email by Livia and forward that email to Maura.",
               params={"by": "Livia", "to": "Maura"})
OTHER_NAMES = Task(id="sibling", app="miniwob", goal="Find the email by Kalila and forward that email to Ange.",
                   params={"sender": "Kalila", "recipient": "Ange"})
OTHER_WORDS = Task(id="phrased", app="miniwob", goal="Send Ange the email you got from Kalila.",
                   params={"sender": "Kalila", "recipient": "Ange"})
OPEN = Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="{by}", contains=True))
TYPE_TO = Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="to"), text="{to}")


REPLY = Task(id="r", app="miniwob", goal='Reply to Livia with the text "Nulla. Fusce."', params={"by": "Livia"})


def test_a_value_s_role_is_where_the_goal_puts_it_as_a_whole_word():
    assert goal_roles(FORWARD) == {"by": "by|and", "to": "to|"}
    assert goal_roles(OTHER_WORDS) == {"sender": "from|", "recipient": "send|the"}
    assert goal_roles(REPLY) == {"by": "to|with", "quoted0": "text|"}
    inside = Task(id="m", app="miniwob", goal="Open the email from Ma.", params={"name": "Ma"})
    assert goal_roles(inside) == {"name": "from|"}, "not the 'ma' inside 'email'"


def test_a_goal_read_once_is_read_alike_again_and_a_caller_cannot_change_it():
    from guimem.memory.roles import _read_goal, shown_names

    _read_goal.cache_clear()
    first = goal_roles(FORWARD)
    first["by"] = "changed"
    again = Task(id="another-id", app="other", goal=FORWARD.goal, params=dict(FORWARD.params), seed=3)
    assert goal_roles(again) == {"by": "by|and", "to": "to|"}, "a caller's change never reaches the next reading"
    assert _read_goal.cache_info().hits >= 1, "the same goal and parameters are read once"
    assert goal_roles(OTHER_NAMES) == {"sender": "by|and", "recipient": "to|"}, "other parameters: read anew"
    assert shown_names(REPLY) == {"by", "quoted0"}
    shown = shown_names(REPLY)
    shown.add("x")
    assert shown_names(REPLY) == {"by", "quoted0"}


def test_binding_is_one_to_one_and_never_guesses():
    assert binding(["to"], {"to": "to|"}, REPLY) == {}, "the sender a reply is sent to is not a recipient"
    two = Task(id="t", app="miniwob", goal="Type x in A and y in B.", params={"p": "x", "q": "y"})
    assert binding(["a", "b"], {"a": "in|and", "b": "in|and"}, two) == {}, "two placeholders with one role"
    assert binding(["a"], {"a": "type|in"}, two) == {"a": "p"}
    assert binding(["a", "p"], {"a": "type|in"}, two) == {"p": "p"}, "p is taken by its own name"


def test_a_skill_from_one_sibling_binds_to_another_s_values_by_role():
    obs, _ = screen("email-inbox-forward-501-inbox")
    program = SkillProgram.from_templates((OPEN, TYPE_TO), goal_roles(FORWARD))
    assert program.params == ("by", "to") and program.roles == {"by": "by|and", "to": "to|"}
    assert program.args_for(OTHER_NAMES) == {**OTHER_NAMES.params, "by": "Kalila", "to": "Ange"}
    assert can_start(program, program.args_for(OTHER_NAMES), obs, OTHER_NAMES), \
        "opens Kalila's e-mail on the recorded inbox"
    assert binding(program.params, program.roles, OTHER_WORDS) == {}, "the goal puts no value there: unbound"
    assert not can_start(program, program.args_for(OTHER_WORDS), obs, OTHER_WORDS)
    assert binding(program.params, program.roles, FORWARD) == {"by": "by", "to": "to"}, "a name that exists wins"


def test_recalled_behaviour_is_renamed_to_this_task_s_parameters_and_the_explorer_follows_it():
    obs, _ = screen("email-inbox-forward-501-inbox")
    item = InjectedItem(id="e", kind=ItemKind.EDGE, text="open it", success=True, score=1.0,
                        behaviour=Behaviour(actions=(OPEN,), roles={"by": "by|and"}))
    here = rebind(item, OTHER_NAMES)
    assert here.behaviour.actions[0].selector.text == "{sender}" and here.behaviour.roles == {"sender": "by|and"}
    assert rebind(item, OTHER_WORDS) == item, "nothing to bind to: left as it is (its step cannot act)"
    policy = ExplorerPolicy()
    policy.reset(OTHER_NAMES)
    chosen = policy.act(PolicyInput(task=OTHER_NAMES, observation=obs, injection=Injection(items=(here,))))
    target = next(e for e in obs.elements if e.role is Role.BUTTON and e.text.startswith("Kalila"))
    assert chosen.action.ref == target.ref


EDIT = Task(id="edit", app="mousepad", goal='Replace the text of notes.txt with "meeting at noon" and save the file.',
            params={"text": "meeting at noon"})
EDIT_AGAIN = Task(id="edit", app="mousepad", goal='Replace the text of notes.txt with "ship it" and save the file.',
                  params={"text": "ship it"}, seed=2)
COPY = Task(id="copy", app="mousepad", goal="Save a copy of notes.txt as plan.txt in the folder drafts.",
            params={"text": "ship the parcel", "name": "plan.txt", "folder": "drafts"})


def test_a_value_the_goal_asked_for_never_binds_to_a_same_named_value_this_goal_does_not_show():
    """A 5-round desktop run: "type {text}; File; Save", learned where the goal said the text, started on a
    save-a-copy task whose `text` is the document's own content (not in its goal), typed it back and saved the
    document in place; none saved the copy. By name it bound; by what the goal asks it must not."""
    from guimem.memory.kit import acts_here
    from guimem.memory.roles import bound_args
    from guimem.types import Observation, UIElement

    doc = UIElement(ref="1", role=Role.TEXTBOX, editable=True, value="ship the parcel")
    menu = UIElement(ref="2", role=Role.MENUITEM, text="File")
    obs = Observation(app="mousepad", location="~/notes.txt - Mousepad", elements=(menu, doc))
    type_text = Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX), text="{text}")
    tap_file = Action(kind=ActionKind.TAP, selector=Selector(role=Role.MENUITEM, text="File"))
    program = SkillProgram.from_templates((type_text, tap_file), goal_roles(EDIT))
    assert program.roles == {"text": "txt|and"}
    assert binding(["text"], program.roles, EDIT_AGAIN) == {"text": "text"}, "a sibling that asks for text"
    assert can_start(program, program.args_for(EDIT_AGAIN), obs, EDIT_AGAIN)
    assert binding(["text"], program.roles, COPY) == {}
    assert "text" not in bound_args(["text"], program.roles, COPY) and bound_args([], {}, COPY) == COPY.params
    assert not can_start(program, program.args_for(COPY), obs, COPY)
    assert not acts_here(Behaviour(actions=(type_text, tap_file), roles=program.roles), COPY, obs)
    learned_here = Behaviour(actions=(type_text, tap_file), roles=goal_roles(COPY))  # no role: the copy's own
    assert acts_here(learned_here, COPY, obs), "what the task itself learned still binds by name"
    apart = Task(id="api", app="mousepad", goal="Do it.", params={"text": "ship it"})
    assert binding(["text"], program.roles, apart) == {"text": "text"}, "a goal that shows no value: by name"


def test_a_verb_the_task_asks_for_binds_by_name_though_its_goal_never_says_the_word():
    """email-inbox-nl-turk's goal "Mark Taffy's email important." shows `by` but not its `task` ("star"): the star
    near the sender, learned on email-inbox-important where the goal says "star", is what it asks for. Refusing
    it (as a save-a-copy task's document content is refused) lost the stack its transfer to nl-turk on
    `families`."""
    important = Task(id="email-inbox-important", app="miniwob", params={"by": "Livia", "task": "star"},
                     goal="Find the email by Livia and click the star icon to mark it as important.")
    turk = Task(id="email-inbox-nl-turk", app="miniwob", params={"by": "Taffy", "task": "star"},
                goal="Mark Taffy's email important.")
    assert binding(["task", "by"], goal_roles(important), turk) == {"task": "task", "by": "by"}
    assert binding(["text"], {"text": "txt|and"}, COPY) == {}, "a phrase the goal does not show stays refused"
