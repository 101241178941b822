"""Steps whose effect the rest of the path never used are no part of a routine (issue #35: skills induced from the
explorer's wandering kept "tap Document; tap File; tap View" and typed file names into the document)."""

from __future__ import annotations

from guimem.memory.generalise import Performed, unused_steps
from guimem.types import Action, ActionKind, Observation, Role, Selector, UIElement

MENUS = {"File": ("New", "Save"), "Document": ("Word Wrap", "Tab Size"), "View": ("Toolbar", "Statusbar")}


def _el(role: Role, name: str, value: str | None = None, container: str = "") -> UIElement:
    return UIElement(ref=f"{role.value}:{name}", role=role, text=name, value=value, clickable=True,
                     editable=role is Role.TEXTBOX, container=container)


def screen(menu: str = "", toolbar: bool = False, text: str = "", location: str = "Editor", extra=()) -> Observation:
    """The editor: a menu bar, the document, the open menu's items, the toolbar's buttons when it is on."""
    els = [_el(Role.MENUITEM, m) for m in MENUS] + [_el(Role.TEXTBOX, "", value=text)]
    els += [_el(Role.MENUITEM, item, container=menu) for item in MENUS.get(menu, ())]
    if toolbar:
        els += [_el(Role.BUTTON, b) for b in ("New", "Save As...")]
    return Observation(app="editor", location=location, elements=(*els, *extra))


def tap(role: Role, name: str) -> Action:
    return Action(kind=ActionKind.TAP, ref=f"{role.value}:{name}", selector=Selector(role=role, text=name))


def type_(text: str, name: str = "") -> Action:
    return Action(kind=ActionKind.TYPE, ref=f"textbox:{name}", selector=Selector(role=Role.TEXTBOX, text=name),
                  text=text)


def path(first: Observation, *steps: tuple[Action, Observation]) -> list[Performed]:
    """Performed steps, each on its own screen: one step's screen after is the next one's before."""
    out, before = [], first
    for i, (action, after) in enumerate(steps):
        out.append(Performed(i, action, before, after, False))
        before = after
    return out


def test_menus_opened_on_the_way_and_a_toolbar_that_is_used():
    """Document and File were opened and left; View's Toolbar was tapped, and the toolbar's Save As... used."""
    steps = path(screen(), (tap(Role.MENUITEM, "Document"), screen("Document")),
                 (tap(Role.MENUITEM, "File"), screen("File")),
                 (tap(Role.MENUITEM, "View"), screen("View")),
                 (tap(Role.MENUITEM, "Toolbar"), screen(toolbar=True)),
                 (tap(Role.BUTTON, "Save As..."), screen(toolbar=True, location="Save As")))
    assert unused_steps(steps) == {0, 1}


def test_a_toolbar_turned_on_and_never_used_is_unused_but_the_last_step_never_is():
    steps = path(screen(), (tap(Role.MENUITEM, "View"), screen("View")),
                 (tap(Role.MENUITEM, "Toolbar"), screen(toolbar=True)),
                 (type_("hello"), screen(toolbar=True, text="hello")),
                 (tap(Role.MENUITEM, "View"), screen("View", toolbar=True, text="hello")))
    # View shows Toolbar, which is used; the toolbar's buttons are not; the last tap is the episode's end
    assert unused_steps(steps) == {1}


def test_a_click_the_open_menu_swallowed_goes_with_the_opening():
    """Opening Document and then tapping the toolbar's New only closed the menu (nothing else changed)."""
    steps = path(screen(toolbar=True), (tap(Role.MENUITEM, "Document"), screen("Document", toolbar=True)),
                 (tap(Role.BUTTON, "New"), screen(toolbar=True)),
                 (tap(Role.BUTTON, "Save As..."), screen(toolbar=True, location="Save As")))
    assert unused_steps(steps) == {0, 1}


def test_a_click_that_closes_a_menu_a_kept_step_opened_stays():
    steps = path(screen(toolbar=True), (tap(Role.MENUITEM, "View"), screen("View", toolbar=True)),
                 (tap(Role.BUTTON, "New"), screen(toolbar=True)),
                 (tap(Role.MENUITEM, "View"), screen("View", toolbar=True)),
                 (tap(Role.MENUITEM, "Toolbar"), screen(location="Done")))
    # the first View is used (its Toolbar is tapped at the end), so the tap that closed it is kept
    assert unused_steps(steps) == set()


def test_steps_that_went_somewhere_or_changed_something_are_kept():
    folder = (_el(Role.LISTITEM, "reports"), _el(Role.LISTITEM, "drafts"))
    inside = (_el(Role.BUTTON, "reports"),)
    steps = path(screen(extra=folder), (tap(Role.LISTITEM, "reports"), screen(extra=inside)),  # into a folder
                 (tap(Role.MENUITEM, "View"), screen("View", extra=inside)),
                 (tap(Role.MENUITEM, "Statusbar"), screen(location="Other", extra=inside)),  # a new location
                 (tap(Role.BUTTON, "reports"), screen(location="Other", extra=inside)))
    assert unused_steps(steps) == set()
    box = (_el(Role.CHECKBOX, "wrap"),)
    checked = (UIElement(ref="checkbox:wrap", role=Role.CHECKBOX, text="wrap", checked=True, clickable=True),)
    box = (UIElement(ref="checkbox:wrap", role=Role.CHECKBOX, text="wrap", checked=False, clickable=True),)
    steps = path(screen(extra=box), (tap(Role.CHECKBOX, "wrap"), screen("Document", extra=checked)),
                 (tap(Role.BUTTON, "Save As..."), screen(location="Save As")))
    assert unused_steps(steps) == set(), "it showed a menu nobody used, but it also checked a box"


def test_a_step_of_a_skill_run_is_not_judged_by_the_runs_screens():
    start, end = screen(), screen("File")
    run = [Performed(0, tap(Role.MENUITEM, "Document"), start, end, False),
           Performed(0, tap(Role.MENUITEM, "File"), start, end, False)]
    after = Performed(1, tap(Role.BUTTON, "Save As..."), end, screen(location="Save As"), False)
    assert unused_steps([*run, after]) == set()


def test_an_entry_a_later_entry_in_the_same_field_replaces_is_unused():
    steps = path(screen(), (type_("todo.txt"), screen(text="todo.txt")),
                 (tap(Role.MENUITEM, "View"), screen("View", text="todo.txt")),  # a menu between changes nothing
                 (type_("call the plumber"), screen("View", text="call the plumber")),
                 (tap(Role.MENUITEM, "Toolbar"), screen(toolbar=True, text="call the plumber")),
                 (tap(Role.BUTTON, "Save As..."), screen(location="Save As")))
    assert unused_steps(steps) == {0}
    name = (_el(Role.TEXTBOX, "Name", value=""),)
    steps = path(screen(extra=name), (type_("todo.txt"), screen(text="todo.txt", extra=name)),
                 (type_("a.txt", "Name"), screen(text="todo.txt", extra=name)),  # another field
                 (type_("call the plumber"), screen(text="call the plumber", extra=name)),
                 (tap(Role.BUTTON, "Save As..."), screen(location="Save As")))
    assert unused_steps(steps) == set(), "a step between that is not a passive tap keeps the first entry"
