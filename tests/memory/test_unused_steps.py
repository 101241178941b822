"""Steps whose effect the rest of the path never used are no part of a routine (issue #35: skills induced from the
explorer's wandering kept menus it opened on the way to another and entries it typed before the right one)."""

from __future__ import annotations

from guimem.memory.generalise import Performed
from guimem.memory.program import can_start
from guimem.memory.skills.induce import induce
from guimem.memory.skills.unused import unused_steps
from guimem.types import (
    Action,
    ActionKind,
    Observation,
    Outcome,
    Role,
    Selector,
    Step,
    Task,
    Trajectory,
    UIElement,
)

MENUS = {"File": ("Open", "Export"), "Format": ("Bold", "Italic"), "Tools": ("Ruler", "Grid")}


def _el(role: Role, name: str, value: str | None = None, container: str = "", checked: bool | None = None
        ) -> UIElement:
    return UIElement(ref=f"{role.value}:{name}", role=role, text=name, value=value, clickable=True,
                     editable=role is Role.TEXTBOX, container=container, checked=checked)


def screen(menu: str = "", ruler: bool = False, text: str = "", location: str = "Editor", extra=()) -> Observation:
    """An editor: a menu bar, the document, the open menu's items, a ruler's buttons when it is on."""
    els = [_el(Role.MENUITEM, m) for m in MENUS] + [_el(Role.TEXTBOX, "", value=text)]
    els += [_el(Role.MENUITEM, item, container=menu) for item in MENUS.get(menu, ())]
    if ruler:
        els += [_el(Role.BUTTON, b) for b in ("Indent", "Export as")]
    return Observation(app="editor", location=location, elements=(*els, *extra))


def tap(role: Role, name: str) -> Action:
    return Action(kind=ActionKind.TAP, ref=f"{role.value}:{name}", selector=Selector(role=role, text=name))


def type_(text: str, name: str = "", nth: int | None = None) -> Action:
    ref = f"textbox:{name}" if nth is None else f"textbox:{name}{nth}"
    return Action(kind=ActionKind.TYPE, ref=ref, selector=Selector(role=Role.TEXTBOX, text=name, nth=nth), text=text)


def path(first: Observation, *steps: tuple[Action, Observation], failed: tuple[int, ...] = ()) -> list[Performed]:
    """Performed steps, each on its own screen: one step's screen after is the next one's before."""
    out, before = [], first
    for i, (action, after) in enumerate(steps):
        out.append(Performed(i, action, before, after, i in failed))
        before = after
    return out


def test_menus_opened_on_the_way_to_another_are_unused():
    """Format and File were opened and left; Tools' Ruler was tapped, and the ruler's Export as used."""
    steps = path(screen(), (tap(Role.MENUITEM, "Format"), screen("Format")),
                 (tap(Role.MENUITEM, "File"), screen("File")),
                 (tap(Role.MENUITEM, "Tools"), screen("Tools")),
                 (tap(Role.MENUITEM, "Ruler"), screen(ruler=True)),
                 (tap(Role.BUTTON, "Export as"), screen(ruler=True, location="Export")))
    assert unused_steps(steps) == {0, 1}


def test_what_stays_on_the_screen_is_never_cut():
    """A ruler turned on and never used stays on the screen (so does an added row, an expanded section): what a
    routine's later screens show may depend on it. Tools is used by the Ruler tap; the last step is the end."""
    steps = path(screen(), (tap(Role.MENUITEM, "Tools"), screen("Tools")),
                 (tap(Role.MENUITEM, "Ruler"), screen(ruler=True)),
                 (type_("hello"), screen(ruler=True, text="hello")),
                 (tap(Role.MENUITEM, "Tools"), screen("Tools", ruler=True, text="hello")))
    assert unused_steps(steps) == set()
    row = (_el(Role.LISTITEM, "milk"),)
    for end in (screen(location="Done"), screen(location="Next")):  # the page after: reset, or another page
        steps = path(screen(), (tap(Role.BUTTON, "Add"), screen(extra=row)), (tap(Role.BUTTON, "Next"), end),
                     (tap(Role.BUTTON, "Submit"), screen(location="Done")))
        assert unused_steps(steps) == set(), "a row added and then out of sight was still added"
    steps = path(screen(), (tap(Role.BUTTON, "Add"), screen(extra=row)), (tap(Role.BUTTON, "Submit"), screen()))
    assert unused_steps(steps) == set(), "the episode's end (a page reset on the same screen) proves nothing"
    section = (_el(Role.LINK, "details"),)
    steps = path(screen(), (tap(Role.BUTTON, "Add"), screen(extra=row)),
                 (tap(Role.BUTTON, "Expand"), screen(extra=(*row, *section))),
                 (tap(Role.BUTTON, "Submit"), screen(location="Done")))
    assert unused_steps(steps) == set()


def test_a_menu_whose_only_used_item_was_cut_goes_too():
    """Tools was opened for Grid, and Grid only opened a sub-menu nobody used: both go (repeated until stable)."""
    grid = (_el(Role.MENUITEM, "Fine", container="Grid"),)
    steps = path(screen(), (tap(Role.MENUITEM, "Tools"), screen("Tools")),
                 (tap(Role.MENUITEM, "Grid"), screen("Tools", extra=grid)),
                 (type_("hello"), screen(text="hello")),
                 (tap(Role.BUTTON, "Save"), screen(location="Done")))
    assert unused_steps(steps) == {0, 1}


def test_a_click_the_open_menu_swallowed_goes_with_the_opening():
    """Opening Format and then tapping the ruler's Indent only closed the menu (nothing else changed)."""
    steps = path(screen(ruler=True), (tap(Role.MENUITEM, "Format"), screen("Format", ruler=True)),
                 (tap(Role.BUTTON, "Indent"), screen(ruler=True)),
                 (tap(Role.BUTTON, "Export as"), screen(ruler=True, location="Export")))
    assert unused_steps(steps) == {0, 1}


def test_a_click_that_closes_a_menu_a_kept_step_opened_stays():
    steps = path(screen(ruler=True), (tap(Role.MENUITEM, "Tools"), screen("Tools", ruler=True)),
                 (tap(Role.BUTTON, "Indent"), screen(ruler=True)),
                 (tap(Role.MENUITEM, "Tools"), screen("Tools", ruler=True)),
                 (tap(Role.MENUITEM, "Ruler"), screen(location="Done")))
    # the first Tools is used (its Ruler is tapped at the end), so the tap that closed it is kept
    assert unused_steps(steps) == set()


def test_steps_that_went_somewhere_or_changed_something_are_kept():
    folder = (_el(Role.LISTITEM, "reports"), _el(Role.LISTITEM, "drafts"))
    inside = (_el(Role.LISTITEM, "q3.txt"),)
    steps = path(screen(extra=folder), (tap(Role.LISTITEM, "reports"), screen(extra=inside)),  # into a folder
                 (tap(Role.MENUITEM, "File"), screen("File", extra=inside, location="Other")),  # a new location
                 (tap(Role.BUTTON, "Save"), screen(location="Done")))
    assert unused_steps(steps) == set()
    # into a folder, whose listing the next step changes on the same screen: what it showed is gone, yet it went
    sorted_ = (_el(Role.LISTITEM, "q4.txt"),)
    steps = path(screen(extra=folder), (tap(Role.LISTITEM, "reports"), screen(extra=inside)),
                 (tap(Role.BUTTON, "Sort"), screen(extra=sorted_)), (tap(Role.BUTTON, "Save"), screen(location="Done")))
    assert unused_steps(steps) == set()
    # to another screen, whose elements the next step replaces there
    steps = path(screen(), (tap(Role.BUTTON, "Preview"), screen(location="Preview", extra=inside)),
                 (tap(Role.BUTTON, "Sort"), screen(location="Preview", extra=sorted_)),
                 (tap(Role.BUTTON, "Save"), screen(location="Done")))
    assert unused_steps(steps) == set()
    off = (_el(Role.CHECKBOX, "wrap", checked=False),)
    on = (_el(Role.CHECKBOX, "wrap", checked=True),)
    steps = path(screen(extra=off), (tap(Role.CHECKBOX, "wrap"), screen("Format", extra=on)),
                 (tap(Role.BUTTON, "Save"), screen(location="Done")))
    assert unused_steps(steps) == set(), "it showed a menu nobody used, but it also ticked a box"
    combo = (UIElement(ref="combobox:size", role=Role.COMBOBOX, label="size", text="small"),)
    picked = (UIElement(ref="combobox:size", role=Role.COMBOBOX, label="size", text="large"),)
    steps = path(screen(extra=combo), (tap(Role.COMBOBOX, "size"), screen("Format", extra=picked)),
                 (tap(Role.MENUITEM, "File"), screen("File", extra=picked)),
                 (tap(Role.BUTTON, "Save"), screen(location="Done")))
    assert unused_steps(steps) == set(), "its text changed"


def test_a_step_of_a_skill_run_is_not_judged_by_the_runs_screens():
    start, end = screen(), screen("File")
    run = [Performed(0, tap(Role.MENUITEM, "Format"), start, end, False),
           Performed(0, tap(Role.MENUITEM, "File"), start, end, False)]
    after = Performed(1, tap(Role.BUTTON, "Save"), end, screen(location="Done"), False)
    assert unused_steps([*run, after]) == set()


def test_an_entry_a_later_entry_in_the_same_field_replaces_is_unused():
    steps = path(screen(), (type_("notes.txt"), screen(text="notes.txt")),
                 (tap(Role.MENUITEM, "Tools"), screen("Tools", text="notes.txt")),  # a menu between changes nothing
                 (type_("call the plumber"), screen("Tools", text="call the plumber")),
                 (tap(Role.MENUITEM, "Ruler"), screen(ruler=True, text="call the plumber")),
                 (tap(Role.BUTTON, "Export as"), screen(location="Export")))
    assert unused_steps(steps) == {0}


def test_entries_that_were_used_or_went_elsewhere_are_kept():
    name = (_el(Role.TEXTBOX, "Name", value=""),)
    steps = path(screen(extra=name), (type_("notes.txt"), screen(text="notes.txt", extra=name)),
                 (type_("a.txt", "Name"), screen(text="notes.txt", extra=name)),  # another field between
                 (type_("call the plumber"), screen(text="call the plumber", extra=name)),
                 (tap(Role.BUTTON, "Save"), screen(location="Done")))
    assert unused_steps(steps) == set(), "a step between that is not a menu keeps the first entry"

    def two(first: str, second: str) -> tuple[UIElement, ...]:
        return (UIElement(ref="textbox:0", role=Role.TEXTBOX, value=first, editable=True),
                UIElement(ref="textbox:1", role=Role.TEXTBOX, value=second, editable=True))
    steps = path(screen(extra=two("", "")), (type_("Ann", nth=0), screen(extra=two("Ann", ""))),
                 (type_("Lee", nth=1), screen(extra=two("Ann", "Lee"))),
                 (tap(Role.BUTTON, "Save"), screen(location="Done")))
    assert unused_steps(steps) == set(), "two unnamed fields are two fields"
    added = (_el(Role.LISTITEM, "foo"),)
    steps = path(screen(), (type_("foo"), screen(text="foo")),
                 (tap(Role.BUTTON, "Add"), screen(text="foo", extra=added)),  # shows a row that stays
                 (type_("bar"), screen(text="bar", extra=added)),
                 (tap(Role.BUTTON, "Add"), screen(location="Done")))
    assert unused_steps(steps) == set(), "the tap between used the entry"
    other = (UIElement(ref="textbox:other", role=Role.TEXTBOX, value="", editable=True),)
    elsewhere = type_("bar").model_copy(update={"ref": "textbox:other"})  # the same selector, another field
    steps = path(screen(extra=other), (type_("foo"), screen(text="foo", extra=other)),
                 (tap(Role.MENUITEM, "Tools"), screen("Tools", text="foo", extra=other)),
                 (elsewhere, screen("Tools", text="foo")), (tap(Role.BUTTON, "Save"), screen(location="Done")))
    assert unused_steps(steps) == set(), "the field the later entry went to did not hold the first one"
    steps = path(screen(), (type_("foo"), screen(text="foo")), (type_("bar"), screen(text="foo")),
                 (tap(Role.BUTTON, "Save"), screen(location="Done")), failed=(1,))
    assert unused_steps(steps) == set(), "the later entry failed: the first one stands"


def test_induced_routines_and_their_replay_prefix_leave_the_unused_steps_out():
    """End to end through `induce`: no routine holds the menus opened on the way or the replaced entry, and the
    prefix a routine is verified after (replayed from the task's start) leaves them out too."""
    task = Task(id="edit", goal='Write "hi" and export it.', app="editor", seed=1, params={"text": "hi"})
    screens = [screen(), screen(text="oops"), screen("Format", text="oops"), screen("File", text="oops"),
               screen("Tools", text="oops"), screen("Tools", text="hi"), screen(ruler=True, text="hi")]
    actions = [type_("oops"), tap(Role.MENUITEM, "Format"), tap(Role.MENUITEM, "File"), tap(Role.MENUITEM, "Tools"),
               type_("hi"), tap(Role.MENUITEM, "Ruler"), tap(Role.BUTTON, "Export as")]
    steps = tuple(Step(index=i, observation=screens[i], action=a) for i, a in enumerate(actions))
    traj = Trajectory(task=task, steps=steps, final_observation=screen(location="Export"),
                      outcome=Outcome(success=True, score=1.0))
    found = induce(traj)
    seen = {(a.kind, a.text or a.selector.text) for c in found for a in (*c.program.steps, *c.source.prefix)
            if a.selector is not None}
    assert not seen & {(ActionKind.TAP, "Format"), (ActionKind.TAP, "File"), (ActionKind.TYPE, "oops")}, seen
    longest = max(found, key=lambda c: len(c.program.steps))
    assert [(a.kind, a.text or a.selector.text) for a in longest.program.steps if a.selector is not None] == [
        (ActionKind.TAP, "Tools"), (ActionKind.TYPE, "{text}"), (ActionKind.TAP, "Ruler"),
        (ActionKind.TAP, "Export as")]


def test_a_routine_learned_inside_an_open_menu_starts_only_where_that_menu_is_open():
    """A window that began with the Tools menu already open (its opening was before the window, or in a skill run)
    taps one of the menu's items: it starts only where that item is on the screen, not wherever its first step's
    text box is (issue #35: "type; tap Toolbar; tap Save" started on a screen without the menu, failed at its
    second step, and the episode went elsewhere)."""
    task = Task(id="edit", goal='Write "hi" and export it.', app="editor", seed=1, params={"text": "hi"})
    screens = [screen(), screen("Tools"), screen("Tools", text="hi"), screen(ruler=True, text="hi")]
    actions = [tap(Role.MENUITEM, "Tools"), type_("hi"), tap(Role.MENUITEM, "Ruler"), tap(Role.BUTTON, "Export as")]
    steps = tuple(Step(index=i, observation=screens[i], action=a) for i, a in enumerate(actions))
    traj = Trajectory(task=task, steps=steps, final_observation=screen(location="Export"),
                      outcome=Outcome(success=True, score=1.0))
    (inside,) = [c for c in induce(traj) if [a.kind for a in c.program.steps] == [ActionKind.TYPE, ActionKind.TAP]
                 and c.program.steps[1].selector.text == "Ruler"]
    assert inside.program.present == (1,)
    assert can_start(inside.program, {"text": "hi"}, screen("Tools"), task)
    assert not can_start(inside.program, {"text": "hi"}, screen(), task), "no Tools menu open: no Ruler to tap"
    (whole,) = [c for c in induce(traj) if len(c.program.steps) == 4]
    assert whole.program.present == (1,), "its text box was there; the Ruler its own Tools tap shows was not"
    assert can_start(whole.program, {"text": "hi"}, screen(), task)


def test_a_routine_learned_after_an_edit_starts_only_where_the_document_holds_it():
    """The window "tap Close; tap Save" began after the unnamed document was given the task's text: it starts only
    where the document holds that text, not on the untouched document, where Close quits without asking (issue
    #35: gedit-edit-save seed 1, round 2, harmed by skills; an unnamed field had no name to record it by)."""
    task = Task(id="edit", goal='Replace the text with "hi" and save.', app="editor", seed=1, params={"text": "hi"})
    dialog = (_el(Role.BUTTON, "Save"), _el(Role.BUTTON, "Close without saving"))
    close = _el(Role.BUTTON, "Close")
    screens = [screen(text="draft", extra=(close,)), screen(text="hi", extra=(close,)),
               screen(text="hi", location="Save changes?", extra=dialog)]
    actions = [type_("hi"), tap(Role.BUTTON, "Close"), tap(Role.BUTTON, "Save")]
    steps = tuple(Step(index=i, observation=screens[i], action=a) for i, a in enumerate(actions))
    traj = Trajectory(task=task, steps=steps, final_observation=screen(location="Desktop"),
                      outcome=Outcome(success=True, score=1.0))
    (after,) = [c for c in induce(traj) if [a.selector.text for a in c.program.steps] == ["Close", "Save"]]
    assert can_start(after.program, {"text": "hi"}, screens[1], task)
    assert not can_start(after.program, {"text": "hi"}, screens[0], task), "the document still holds its draft"
    other = task.model_copy(update={"params": {"text": "yo"}, "goal": 'Replace the text with "yo" and save.'})
    assert not can_start(after.program, {"text": "yo"}, screens[1], other), "it holds another task's text"
    assert can_start(after.program, {"text": "yo"}, screen(text="yo", extra=(close,)), other)
    renamed = Task(id="edit-2", goal='Replace the text with "yo" and save.', app="editor", seed=1,
                   params={"body": "yo"})
    assert can_start(after.program, after.program.args_for(renamed), screen(text="yo", extra=(close,)), renamed), \
        "the text the document holds binds by its role in the goal, as the steps' placeholders do"
    assert not can_start(after.program, after.program.args_for(renamed), screens[1], renamed)
    (whole,) = [c for c in induce(traj) if len(c.program.steps) == 3]
    assert whole.program.fields == {}, "what the routine types into the document is its own doing"
    for start in (screens[0], screen(text="", extra=(close,))):
        assert can_start(whole.program, {"text": "hi"}, start, task), "the whole routine types the text itself"


def test_a_routine_learned_after_typing_the_goal_s_text_does_not_start_on_a_document_that_came_with_it():
    """"File; Save", learned after the document was given the text its goal asked for, presupposes an edit. A
    save-a-copy task's document holds its own `text` from the start, which its goal never asks for: the binding
    refuses that name, and what the document holds must not bind it back (issue #35, transfer only: the routine
    started on mousepad-save-copy's untouched document, where Save is disabled)."""
    task = Task(id="edit", goal='Replace the text with "hi" and save.', app="editor", seed=1, params={"text": "hi"})
    dialog = screen(text="hi", location="Open", extra=(_el(Role.BUTTON, "Cancel"),))
    screens = [screen(text="draft"), screen(text="hi"), screen("File", text="hi"), dialog]
    actions = [type_("hi"), tap(Role.MENUITEM, "File"), tap(Role.MENUITEM, "Open"), tap(Role.BUTTON, "Cancel")]
    steps = tuple(Step(index=i, observation=screens[i], action=a) for i, a in enumerate(actions))
    traj = Trajectory(task=task, steps=steps, final_observation=screen(text="hi"),
                      outcome=Outcome(success=True, score=1.0))
    (after,) = [c.program for c in induce(traj) if [a.selector.text for a in c.program.steps] == ["File", "Open"]]
    assert after.unplaced is None, "a step on the way: what the goal asks is left to later steps"
    assert after.fields == {"<textbox>": "{text}"}
    copy = Task(id="copy", goal="Save a copy as a.txt in the folder b.", app="editor", seed=1,
                params={"text": "yo", "name": "a.txt", "folder": "b"})
    assert not can_start(after, after.args_for(copy), screen(text="yo"), copy), "nobody typed the text here"
    assert can_start(after, after.args_for(task), screens[1], task)
